#!/usr/bin/env bash
# kplan against its peer in one device run: the same checkpoint (bench/configs/mid.json,
# synthesised with seed 1, bf16), the same context (128 cached positions) and token counts
# (1 = AR decode, 8 and 32 = tree-verify sizes). kplan: `kplan bench --all-buckets` (graph
# replay). Peer: HuggingFace transformers' DeepseekV3ForCausalLM, eager and torch.compile
# (reduce-overhead, CUDA graphs), tools/device/peer_checkpoint.py. Prints a table last.
# Uses the kit `tools/device/gpu_check.sh --stage` made (carry [".carry/gpu"]).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$repo/.carry/gpu/bin
out=${OUT:-/tmp/kplan-peer}
mkdir -p "$out"
nvrtc=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$nvrtc:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$repo/.carry/gpu/lib
ctx=128
d=/tmp/kplan_peer_mid
rm -rf "$d" && "$bin/kplan" synth --config "$repo/bench/configs/mid.json" --seed 1 --out "$d" >/dev/null || exit 1
"$bin/kplan" compile --model "$d" -o "$d.kplan" --arch sm_90 --buckets 1,8,32 | tail -1
"$bin/kplan" bench "$d.kplan" --steps 300 --context $ctx --all-buckets --json "$out/kplan_mid.json" || exit 1
export PYTHONUNBUFFERED=1
python3 "$repo/tools/device/peer_checkpoint.py" --model "$d" --context $ctx --tokens 1,8,32 --json "$out/peer_eager.json"
python3 "$repo/tools/device/peer_checkpoint.py" --model "$d" --context $ctx --tokens 1,8,32 --compile \
  --json "$out/peer_compiled.json" 2> "$out/peer_compiled.err" || tail -20 "$out/peer_compiled.err"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
k = json.load(open(os.path.join(out, "kplan_mid.json")))
kp = {b["tokens"]: b for b in k["buckets"]}
peers = {}
for name in ("eager", "compiled"):
    p = os.path.join(out, f"peer_{name}.json")
    if os.path.exists(p):
        rows = json.load(open(p))["rows"]
        peers[name] = {r["tokens"]: r["ms"] for r in rows}
        contexts = {r["tokens"]: r["mean_context"] for r in rows}
print(f"== mid bf16, context {k['context']}, {k['device']}: step time (ms), median")
print(f"{'tokens':>6} {'kplan':>9} {'GB/s':>7} " + " ".join(f"{'peer ' + n:>14} {'kplan/peer':>10}" for n in peers))
for t in sorted(kp):
    row = f"{t:>6} {kp[t]['step_ms_median']:>9.4f} {kp[t]['achieved_gb_per_s']:>7.1f} "
    for n, m in peers.items():
        row += f"{m.get(t, float('nan')):>14.4f} {kp[t]['step_ms_median'] / m.get(t, float('nan')):>10.2f} "
    print(row)
if peers:
    print("peer mean context per token count (its cache grows while timed):",
          ", ".join(f"{t}: {c:.0f}" for t, c in sorted(contexts.items())))
PY
