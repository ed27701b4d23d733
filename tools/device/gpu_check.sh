#!/usr/bin/env bash
# The GPU check, run on the GPU machine: every GPU unit test, `kplan run` on the GPU against the HF
# goldens (short prompts and a 200-token prompt), and `kplan bench`, ending with a short table.
#
# The GPU machine has no FlatBuffers/CLI11/GTest packages, so the binaries are built on the CPU
# machine (Debian 12 binaries run there; libcuda is dlopen-ed, libnvrtc comes from its CUDA 13)
# and carried:   tools/device/gpu_check.sh --stage     (here: copies binaries + plans to .carry/gpu)
# then on the device (device tool, carry [".carry/gpu"]):   tools/device/gpu_check.sh
# Results land in $OUT (the device tool's folder) or /tmp/kplan-gpu-check.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
stage=$repo/.carry/gpu
build=${KPLAN_BUILD_DIR:-/work/build-plan}

if [ "${1:-}" = "--stage" ]; then
  set -e
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/plans"
  for b in bin/kplan tests/runtime_tests tests/plan_tests tests/codegen_tests tests/ops_tests tests/ddtree_tests; do
    [ -x "$build/$b" ] && objcopy --strip-debug "$build/$b" "$stage/bin/$(basename "$b")"
  done
  # Plans compiled here, on the CPU-only machine (the point of AOT); KPLAN_STAGE_PLANS lists them.
  for p in ${KPLAN_STAGE_PLANS:-}; do cp "$p" "$stage/plans/"; done
  # The runtime tests' toy plan (real sm_90/sm_120 cubins, exact host model): the runtime's floor.
  KPLAN_TOY_PLAN_OUT=$stage/plans/toy.kplan "$build/tests/runtime_tests" --gtest_filter='ToyPlan.*' >/dev/null
  mkdir -p "$stage/lib" && cp -L /lib/x86_64-linux-gnu/libpcre2-8.so.0 "$stage/lib/"
  # kplan serve's cpp-httplib and what it links (the device machine may lack Debian's packages).
  for l in libcpp-httplib.so.0.11 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1 libssl.so.3 libcrypto.so.3; do
    [ -e "/lib/x86_64-linux-gnu/$l" ] && cp -L "/lib/x86_64-linux-gnu/$l" "$stage/lib/"
  done
  # The peers the project was given (../shared/peers beside the checkout, which does not travel).
  peers=${KPLAN_PEERS_DIR:-$repo/../shared/peers}
  [ -d "$peers" ] && mkdir -p "$stage/peers" && cp "$peers"/*.py "$stage/peers/"
  (cd "$repo" && git rev-parse --short HEAD) > "$stage/commit"
  echo "$build" > "$stage/build_dir"  # the kplan path the test binaries call (carried_env.sh links it)
  du -sh "$stage"
  exit 0
fi

default_out=/tmp/kplan-gpu-check
source "$(dirname "$0")/carried_env.sh"

echo "== device"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== commit $(cat "$stage/commit" 2>/dev/null)  date $(date -u +%FT%TZ)"
ldd "$bin/kplan" | grep -E "not found|nvrtc|cuda" || true

declare -A result
# A log's failures with the lines each failure's message takes (the first ten), then the failed tests.
failures() {
  grep -A3 "Failure$" "$1" | grep -v "^--$" | head -40 | cut -c1-300
  grep -E "^\[  FAILED  \]" "$1" | head -10
}
run_tests() {  # name binary
  local log=$out/tests_$1.log
  "$bin/$2" --gtest_color=no > "$log" 2>&1
  local rc=$?
  result[$1]="rc=$rc $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]' "$log" | tr '\n' ' ')"
  failures "$log"
}
echo "== runtime_tests"; run_tests runtime_tests runtime_tests
echo "== plan_tests"; run_tests plan_tests plan_tests
if [ -x "$bin/codegen_tests" ]; then  # every kernel template against the CPU reference ops
  echo "== codegen_tests (GpuOps*)"
  # KPLAN_GPU_OPS_FILTER narrows it (e.g. leaving out the width sweeps width_check.sh runs).
  "$bin/codegen_tests" --gtest_color=no --gtest_filter="${KPLAN_GPU_OPS_FILTER:-GpuOps*}" > "$out/tests_codegen_gpu.log" 2>&1
  rc=$?
  result[codegen_gpu_ops]="rc=$rc $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]' "$out/tests_codegen_gpu.log" | tr '\n' ' ')"
  failures "$out/tests_codegen_gpu.log"
fi
for t in ops_tests ddtree_tests; do  # the backend-ops table's GPU rows; the decode loops over the GPU
  [ -x "$bin/$t" ] && { echo "== $t"; run_tests "$t" "$t"; }
done
grep -h "^\[ figures  \]" "$out"/tests_*.log

mkdir -p /tmp/kplan_bench
for p in "$stage"/plans/*.kplan; do
  [ -e "$p" ] || continue
  name=$(basename "$p" .kplan)
  echo "== inspect $name"; "$bin/kplan" inspect "$p"
  golden=$repo/tests/data/goldens/$name.json
  if [ -f "$golden" ]; then
    ids=$(python3 -c "import json;print(','.join(map(str,json.load(open('$golden'))['prompts'][0]['ids'])))")
    want=$(python3 -c "import json;print(' '.join(map(str,json.load(open('$golden'))['prompts'][0]['greedy_ids'])))")
    for graphs in 1 0; do
      got=$(KPLAN_NO_GRAPHS=$((1 - graphs)) "$bin/kplan" run "$p" --device gpu --prompt-ids "$ids" --max-new 16 --ignore-eos --stats 2>/tmp/kplan_run.err)
      verdict=MISMATCH; [ "$got" = "$want" ] && verdict=identical
      echo "run $name graphs=$graphs: $got ($verdict to the HF greedy ids)"; grep -E "device|time" /tmp/kplan_run.err
      result[run_${name}_graphs$graphs]="greedy 16 ids $verdict to HF"
    done
    # A prompt longer than the largest bucket (200 tokens against 64) is chunked by every loop.
    long_ids=$(python3 -c "print(','.join(str((7 * i + 3) % 200) for i in range(200)))")
    for spec in none ddtree; do
      g=$("$bin/kplan" run "$p" --device gpu --prompt-ids "$long_ids" --max-new 8 --ignore-eos --spec $spec --drafter oracle 2>/tmp/kplan_run.err)
      c=$("$bin/kplan" run "$p" --device cpu --prompt-ids "$long_ids" --max-new 8 --ignore-eos --spec $spec --drafter oracle 2>>/tmp/kplan_run.err)
      v="MISMATCH (gpu '$g' cpu '$c' $(head -c 300 /tmp/kplan_run.err))"; [ -n "$g" ] && [ "$g" = "$c" ] && v="identical GPU vs CPU reference"
      echo "run $name 200-token prompt spec=$spec: $v"
      result[run_${name}_prompt200_$spec]="$v"
    done
    got=$("$bin/kplan" run "$p" --device gpu --prompt-ids "$ids" --max-new 16 --ignore-eos --spec ddtree \
          --drafter oracle --oracle-accuracy 0.8 --budget 8 --stats 2>/tmp/kplan_run.err)
    verdict=MISMATCH; [ "$got" = "$want" ] && verdict=identical
    echo "ddtree $name: $got ($verdict)"; cat /tmp/kplan_run.err
    result[ddtree_${name}]="oracle budget 8: $verdict to HF; $(grep -E 'acceptance|forwards' /tmp/kplan_run.err | tr -s ' ' | tr '\n' ';')"
  fi
  for mode in graphs nographs; do
    flag=""; [ $mode = nographs ] && flag=--no-graphs
    echo "== bench $name ($mode)"
    "$bin/kplan" bench "$p" --steps 500 $flag --json "/tmp/kplan_bench/${name}_$mode.json" 2>&1 | tee /tmp/bench.txt
    result[bench_${name}_$mode]="$(grep -E 'decode step|achieved' /tmp/bench.txt | tr -s ' ' | tr '\n' ';')"
  done
done
# A mid-size model (bench/configs/mid.json: 8 layers, hidden 1024, kv_lora 512, 16 experts top-4,
# vocab 32000; ~0.55 GiB bf16), synthesised and compiled on the device (too big to carry): the
# decode step at short and long context, bf16 and INT4 experts.
if [ "${KPLAN_BENCH_MID:-1}" = 1 ]; then
  for variant in bf16 int4; do
    flag=""; [ $variant = int4 ] && flag=--int4
    d=/tmp/kplan_mid_$variant
    rm -rf "$d" && "$bin/kplan" synth --config "$repo/bench/configs/mid.json" --seed 1 $flag --out "$d" >/dev/null
    echo "== compile mid-$variant"; ( time "$bin/kplan" compile --model "$d" -o "$d.kplan" --arch sm_90 --buckets 1,8,32 ) 2>&1 | tail -4
    for ctx in 128 4000; do
      echo "== bench mid-$variant context $ctx"
      extra=""; [ $ctx = 128 ] && extra=--all-buckets
      "$bin/kplan" bench "$d.kplan" --steps 300 --context $ctx $extra --json "/tmp/kplan_bench/mid-${variant}_ctx$ctx.json" 2>&1 | tee /tmp/bench.txt
      result[bench_mid-${variant}_ctx$ctx]="$(grep -E 'decode step|achieved|bytes per step' /tmp/bench.txt | tr -s ' ' | tr '\n' ';')"
    done
    ids=5,6,7,8,9,10,11,12
    g=$("$bin/kplan" run "$d.kplan" --device gpu --prompt-ids $ids --max-new 8 --ignore-eos)
    c=$("$bin/kplan" run "$d.kplan" --device cpu --prompt-ids $ids --max-new 8 --ignore-eos)
    t=$("$bin/kplan" run "$d.kplan" --device gpu --prompt-ids $ids --max-new 8 --ignore-eos --spec ddtree --drafter random --budget 24)
    echo "mid-$variant greedy gpu: $g / cpu: $c / gpu ddtree: $t"
    v=differs; [ "$g" = "$c" ] && v=identical; w=differs; [ "$g" = "$t" ] && w=identical
    result[run_mid-$variant]="greedy 8 ids GPU vs CPU reference: $v; GPU DDTree vs GPU AR: $w"
  done
fi

# One JSON file of every bench (the device tool brings back at most 8 files).
python3 -c "
import json, glob, os
print(json.dumps({os.path.basename(f)[:-5]: json.load(open(f)) for f in sorted(glob.glob('/tmp/kplan_bench/*.json'))}, indent=1))
" > "$out/bench.json"
echo "== summary"
for k in "${!result[@]}"; do printf '%-28s %s\n' "$k" "${result[$k]}"; done | sort
