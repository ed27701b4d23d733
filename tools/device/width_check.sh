#!/usr/bin/env bash
# Issue 10's kernels at K2.6 width and issue 12's soak, on the GPU machine, after gpu_check.sh in the
# same device call (staged by `gpu_check.sh --stage`; KPLAN_STAGE_PLANS names the K2.6 slice
# k26_l3.kplan compiled here: kplan compile --model ../shared/models/kimi-k2.6 --no-weights --layers 3
# --synthetic-weights 1 --arch sm_90 -o k26_l3.kplan, and the bundled pair mini-v3.kplan).
# Prints: the MoE and dense matmul kernels against the CPU op with their GB/s (the GPU tests' figure
# lines), the split MLA partials (CUDA cores, MMA 1, the all-heads MMA 2 / 3) with their TB/s, the slice's per-kernel table at 1, 16 and 64 tokens, its verify time against nodes, and
# the soak on the GPU; everything in $OUT/width.txt.
set -uo pipefail
default_out=/tmp/kplan-width
source "$(dirname "$0")/carried_env.sh"
slice=$stage/plans/k26_l3.kplan
pair=$stage/plans/mini-v3.kplan
{
echo "== MoE grouped kernels (GpuOps.MoeGrouped*) and dense matmuls (GpuOps.Matmul*)"
timeout ${KPLAN_KERNEL_TESTS_S:-240} "$bin/codegen_tests" --gtest_color=no --gtest_filter='GpuOps.MoeGrouped*:GpuOps.Matmul*' \
  > "$out/kernel_tests.txt" 2>&1
grep -E "^\[ (figures|lm_head|moe|sweep)|^\[  (PASSED|FAILED) |Failure|OK \]|^moe_grouped |^[a-z_]+ +matmul_|^shape " "$out/kernel_tests.txt" | head -160
echo "== split MLA at K2.6 width (GpuOps.MlaSplit*): every partial against the CPU op, then ms and TB/s at 4096 / 32768 keys"
timeout ${KPLAN_MLA_TESTS_S:-150} "$bin/codegen_tests" --gtest_color=no --gtest_filter='GpuOps.MlaSplit*' > "$out/mla_tests.txt" 2>&1
grep -E "^\[ figures|^\[  (PASSED|FAILED) |Failure|OK \]" "$out/mla_tests.txt" | grep -v "mla_attention  K2.6 f32" | head -80
echo "== K2.6-width 2-layer slice, GPU against the CPU reference (~6 minutes: the CPU side at full width)"
KPLAN_TEST_K26_SLICE=1 timeout ${KPLAN_K26_SLICE_S:-480} "$bin/runtime_tests" --gtest_color=no --gtest_filter='GpuSynthetic.KimiK26*' \
  2>&1 | grep -E "figures|OK \]|FAILED|Failure"
if [ -f "$slice" ]; then
  echo "== K2.6 3-layer slice: per-kernel times at 1, 16, 64 tokens"
  timeout 150 "$bin/kplan" bench "$slice" --steps 20 --kernels --kernel-tokens 1,16,64 --json "$out/k26_kernels.json" 2>&1 | tail -80
  echo "== K2.6 3-layer slice: every bucket (verify time and distinct experts against nodes)"
  timeout 120 "$bin/kplan" bench "$slice" --steps 50 --all-buckets --context 128 2>&1 | tail -14
fi
# The tensor-core instances for steps of 16+ tokens against the CUDA cores only, on the bundled
# pair and the slice: the same plans compiled both ways here (KPLAN_MATMUL_MMA_MIN_TOKENS=0).
if [ -n "${KPLAN_MMA_SWEEP:-}" ]; then
  head -20 "$repo/tests/data/mini-v3/heldout_prompts.jsonl" > /tmp/prompts20.jsonl
  for mma in 16 0; do
    KPLAN_MATMUL_MMA_MIN_TOKENS=$mma "$bin/kplan" compile --model "$repo/models/mini-v3" --draft "$repo/models/mini-v3-dflash" \
        --arch sm_90 --buckets 1,2,4,8,16,32,64,128 -o /tmp/mini-v3-mma$mma.kplan > /dev/null 2>&1
    echo "== bundled pair, tensor cores from $mma tokens (0: never): 20 held-out prompts, 64 tokens"
    timeout 60 "$bin/kplan" bench --acceptance /tmp/prompts20.jsonl /tmp/mini-v3-mma$mma.kplan --budgets 15,31,auto \
        --temperatures 0 --max-new 64 --ignore-eos --device gpu 2>&1 | tail -6
    timeout 60 "$bin/kplan" bench /tmp/mini-v3-mma$mma.kplan --steps 200 --all-buckets 2>&1 | tail -9
    if [ "$mma" = 0 ] && [ -f "$slice" ]; then
      KPLAN_MATMUL_MMA_MIN_TOKENS=0 "$bin/kplan" compile --model "$repo/tests/data/kimi-k2.6/config.json" --no-weights --layers 3 \
          --synthetic-weights 1 --arch sm_90 -o /tmp/k26_l3_mma0.kplan > /dev/null 2>&1
      echo "== K2.6 slice, CUDA cores only: every bucket"
      timeout 120 "$bin/kplan" bench /tmp/k26_l3_mma0.kplan --steps 50 --all-buckets --context 128 2>&1 | tail -8
    fi
  done
fi
if [ -f "$pair" ]; then
  echo "== soak on the GPU: 10,000 tokens in one session, 1,000 sessions on one model"
  timeout ${KPLAN_SOAK_S:-240} "$bin/kplan" soak "$pair" --device gpu --tokens 10000 --sessions ${KPLAN_SOAK_SESSIONS:-1000} \
      --json "$out/soak_gpu.json" 2>&1 | tail -8
fi
} > "$out/width.txt" 2>&1
cat "$out/width.txt"
