#!/usr/bin/env bash
# Issue 10's step time against N at Kimi K2.6 width, kplan and its peer in one device run: the
# 3-layer slice (1 dense + 2 MoE layers, full width), kplan's with INT4 g32 experts (the published
# config) and with bf16 experts (bench/configs/k26-bf16-experts/config.json: the same config without its
# quantization_config), weights generated on the device at load; the peer
# (../shared/peers/hf_deepseek_v3_slice.py, staged by `gpu_check.sh --stage` into .carry/gpu/peers)
# builds the same shape in transformers with random bf16 weights, eager and compiled
# (torch.compile reduce-overhead: CUDA graphs), run by tools/device/peer_slice.py (a fresh context
# before each timed step: transformers 5's StaticCache otherwise writes past its end). The same context and token counts for all. Writes
# $OUT/slice_*.json and the plot $OUT/slice_steps.png (tools/plot_step_times.py); prints a table.
# Env: KPLAN_SLICE_CONTEXT (512), KPLAN_SLICE_TOKENS (1,2,4,8,16,32,64), KPLAN_SLICE_PEER_TOKENS (the
# compiled peer's: 1,4,16,64; torch.compile recompiles for each), KPLAN_SLICE_PEER=0 (skip it),
# KPLAN_SLICE_PEER_MODES ("eager compiled"; "compiled" alone when device time is short: issue 10's
# ratio is against it), KPLAN_SLICE_KPLAN=0 (the peer only).
set -uo pipefail
default_out=/tmp/kplan-slice
source "$(dirname "$0")/carried_env.sh"
export PYTHONUNBUFFERED=1
ctx=${KPLAN_SLICE_CONTEXT:-512}
tokens=${KPLAN_SLICE_TOKENS:-1,2,4,8,16,32,64}
max_t=${tokens##*,}
for fmt in $([ "${KPLAN_SLICE_KPLAN:-1}" != 0 ] && echo int4 bf16); do
  cfg=$repo/tests/data/kimi-k2.6/config.json
  [ "$fmt" = bf16 ] && cfg=$repo/bench/configs/k26-bf16-experts/config.json
  plan=/tmp/k26_l3_$fmt.kplan
  [ -f "$plan" ] || "$bin/kplan" compile --model "$cfg" --no-weights --layers 3 --synthetic-weights 1 --arch sm_90 \
      --buckets "$tokens" --max-context $((2 * ctx + max_t)) -o "$plan" > "$out/compile_$fmt.log" 2>&1 \
      || { echo "compile $fmt failed:"; tail -5 "$out/compile_$fmt.log"; continue; }
  echo "== kplan, K2.6 3-layer slice, $fmt experts, context $ctx"
  timeout 180 "$bin/kplan" bench "$plan" --steps 30 --context "$ctx" --all-buckets --json "$out/slice_kplan_$fmt.json" 2>&1 | tail -9
done
if [ "${KPLAN_SLICE_PEER:-1}" != 0 ]; then
  for mode in ${KPLAN_SLICE_PEER_MODES:-eager compiled}; do
    flag=; peer_tokens=$tokens
    [ "$mode" = compiled ] && flag=--compile && peer_tokens=${KPLAN_SLICE_PEER_TOKENS:-1,4,16,64}
    echo "== peer: transformers DeepseekV3, $mode, same slice shape (bf16 experts), context $ctx"
    timeout 420 python3 "$repo/tools/device/peer_slice.py" --peer-dir "$stage/peers" --layers 3 --tokens "$peer_tokens" \
        --context "$ctx" $flag --json "$out/slice_peer_$mode.json" 2> "$out/peer_$mode.err" || tail -5 "$out/peer_$mode.err"
  done
fi
python3 "$repo/tools/plot_step_times.py" --out "$out/slice_steps.png" --hbm-gbps 4300 "$out"/slice_*.json
