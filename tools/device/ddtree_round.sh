#!/usr/bin/env bash
# Issue 9's figures on the GPU machine: the bundled pair (models/mini-v3 + mini-v3-dflash) with the
# whole round on the GPU. Staged by `gpu_check.sh --stage` with the plan in KPLAN_STAGE_PLANS
# (compiled here: kplan compile --model models/mini-v3 --draft models/mini-v3-dflash --arch sm_90
# --buckets 1,4,8,16,32,64,128 -o mini-v3.kplan); run after gpu_check.sh in the same device call.
# Prints: verify step time per bucket (graph replay), per-stage times of one decode per budget,
# and tokens/s of AR, chain DFlash and DDTree over held-out prompts, ending with the table; all of
# it in $OUT/ddtree.txt (and $OUT/acceptance.json).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
stage=$repo/.carry/gpu
bin=$stage/bin
plan=${KPLAN_PLAN:-$stage/plans/mini-v3.kplan}
out=${OUT:-/tmp/kplan-ddtree}
mkdir -p "$out"
nvrtc_dir=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/*/lib/libnvrtc.so.13 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH=${nvrtc_dir:-/usr/local/cuda/lib64}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$stage/lib

{
for pdl in ${KPLAN_PDL_SWEEP:-small}; do  # programmatic dependent launch: small (the default: buckets <= 8 tokens), all, none
  echo "== verify step time per bucket (graph replay, context 128), PDL $pdl"
  KPLAN_PDL=$pdl "$bin/kplan" bench "$plan" --steps 300 --all-buckets 2>&1 | tail -8
done

prompt=$(python3 -c "import json;print(json.loads(open('$repo/tests/data/mini-v3/heldout_prompts.jsonl').readline())['text'])")
for budget in 15 31 auto; do
  echo "== one decode, DDTree budget $budget, 96 tokens, --stats --compare"
  "$bin/kplan" run "$plan" --device gpu --spec ddtree --budget "$budget" --max-new 96 --ignore-eos --stats --compare \
      --prompt "$prompt" 2>&1 >/dev/null | grep -E "stats: (rounds|mean acc|tokens/s|time)|compare" 
done
echo "== chain DFlash, 96 tokens"
"$bin/kplan" run "$plan" --device gpu --spec dflash --max-new 96 --ignore-eos --stats --compare --prompt "$prompt" 2>&1 >/dev/null \
    | grep -E "stats: (rounds|mean acc|tokens/s|time)|compare"

head -20 "$repo/tests/data/mini-v3/heldout_prompts.jsonl" > /tmp/prompts20.jsonl
for v in ${KPLAN_PDL_ACCEPTANCE_SWEEP:-}; do  # e.g. "all none"
  echo "== acceptance and speed, PDL $v: 20 held-out prompts, 64 tokens, greedy"
  KPLAN_PDL=$v "$bin/kplan" bench --acceptance /tmp/prompts20.jsonl "$plan" --budgets 15,31 --temperatures 0 --max-new 64 \
      --ignore-eos --device gpu 2>&1 | grep -E "^0 |identical|differ"
done
for dr in ${KPLAN_DEVICE_ROUNDS_SWEEP:-}; do  # e.g. "0 1": the host's round against the device's one-graph round
  echo "== KPLAN_DEVICE_ROUNDS=$dr: 20 held-out prompts, 64 tokens, greedy"
  KPLAN_DEVICE_ROUNDS=$dr "$bin/kplan" bench --acceptance /tmp/prompts20.jsonl "$plan" --budgets 7,15,31,63 --temperatures 0 \
      --max-new 64 --ignore-eos --device gpu 2>&1 | tail -9
  for budget in 15 31; do
    echo "== KPLAN_DEVICE_ROUNDS=$dr one decode, DDTree budget $budget, 96 tokens"
    KPLAN_DEVICE_ROUNDS=$dr "$bin/kplan" run "$plan" --device gpu --spec ddtree --budget "$budget" --max-new 96 --ignore-eos --stats \
        --compare --prompt "$prompt" 2>&1 >/dev/null | grep -E "stats: (rounds|mean acc|tokens/s|time)|compare"
  done
  echo "== KPLAN_DEVICE_ROUNDS=$dr one decode, chain DFlash, 96 tokens"
  KPLAN_DEVICE_ROUNDS=$dr "$bin/kplan" run "$plan" --device gpu --spec dflash --max-new 96 --ignore-eos --stats --compare \
      --prompt "$prompt" 2>&1 >/dev/null | grep -E "stats: (rounds|mean acc|tokens/s|time)|compare"
done
if [ -z "${KPLAN_SKIP_FULL_ACCEPTANCE:-}" ]; then  # set: the sweeps above only
echo "== acceptance and speed: 20 held-out prompts, 64 tokens, greedy and T=0.7"
"$bin/kplan" bench --acceptance /tmp/prompts20.jsonl "$plan" --budgets 4,8,15,16,31,32,63,auto --temperatures 0,0.7 --max-new 64 \
    --ignore-eos --device gpu --json "$out/acceptance.json" 2>&1
if [ -n "${KPLAN_DEMO_PLAN:-}" ]; then  # tools/demo.sh's run, on its plan (--arch sm_90,sm_120, default buckets)
  echo "== tools/demo.sh's command on the GPU"
  "$bin/kplan" run "$KPLAN_DEMO_PLAN" --prompt "$prompt" --spec compare --budget 15 --max-new 96 --device auto 2>&1
  echo "== the demo's previous prompt (hand-written), budget 15"
  "$bin/kplan" run "$KPLAN_DEMO_PLAN" --prompt $'import os\n\n\ndef list_python_files(root):\n    """Yield the path of every .py file under root."""\n' \
      --spec compare --budget 15 --max-new 96 --device auto 2>&1 | tail -4
fi
fi
} > "$out/ddtree.txt" 2>&1
cat "$out/ddtree.txt"
