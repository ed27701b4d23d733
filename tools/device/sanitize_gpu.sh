#!/usr/bin/env bash
# compute-sanitizer over the GPU tests, on the GPU machine (issue 12 item 2): memcheck (out-of-
# bounds and misaligned device accesses, leaks of device memory), racecheck (shared-memory hazards
# between a block's threads) and initcheck (device reads of memory never written), each over the
# GPU unit tests and a `kplan run` of every staged plan (AR and DDTree), ending with a table.
#
# It runs the binaries tools/device/gpu_check.sh stages (the plain build, not the ASan tree:
# compute-sanitizer and ASan do not share a process). On the CPU machine:
#   tools/device/gpu_check.sh --stage            (binaries + plans into .carry/gpu)
# then on the device (device tool, carry [".carry/gpu"]):
#   tools/device/sanitize_gpu.sh [memcheck racecheck initcheck]
# The device tool allows 10 minutes a command: run one tool per command (memcheck, then racecheck,
# then initcheck); KPLAN_SANITIZE_BINS="runtime_tests codegen_tests" picks the test binaries (default
# all four), KPLAN_SANITIZE_PLANS=0 skips the `kplan run`s, KPLAN_SANITIZE_TIMEOUT (seconds, default
# 280) bounds each run so one slow binary does not take the rest with it.
# COMPUTE_SANITIZER names the binary when it is not on PATH or under /usr/local/cuda*. Results
# (one log per tool and test binary, and summary.txt) land in $OUT or /tmp/kplan-gpu-sanitize.
# Exit status: 0 when every run reports no error, 1 when one does, 2 when nothing could run.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
stage=$repo/.carry/gpu
bin=$stage/bin
out=${OUT:-/tmp/kplan-gpu-sanitize}
mkdir -p "$out"
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck initcheck)

[ -x "$bin/runtime_tests" ] || { echo "sanitize_gpu: no staged binaries in $bin (run tools/device/gpu_check.sh --stage on the CPU machine)" >&2; exit 2; }
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
[ -n "$cs" ] || cs=$(ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
[ -n "$cs" ] || cs=$(find / -name compute-sanitizer -type f -perm -u+x -not -path '/proc/*' 2>/dev/null | head -1)
[ -n "$cs" ] && [ -x "$cs" ] || {
  echo "sanitize_gpu: no compute-sanitizer on this machine (the CUDA toolkit's cuda-sanitizer package, or the" \
       "nvidia-cuda-sanitizer-api wheel); set COMPUTE_SANITIZER=PATH" >&2
  exit 2
}
# The environment gpu_check.sh sets up: NVRTC from the toolkit (or PyTorch's wheel), the carried
# libpcre2, the CPU machine's absolute paths the test binaries carry.
nvrtc_dir=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/*/lib/libnvrtc.so.13 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$nvrtc_dir" ] && [ "$nvrtc_dir" != . ] || nvrtc_dir=$(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$nvrtc_dir:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$stage/lib
build=${KPLAN_BUILD_DIR:-/work/build-plan}
mkdir -p /work && { [ -e /work/main ] || ln -s "$repo" /work/main; }
[ -e "$build/bin/kplan" ] || { mkdir -p "$build/bin" && ln -s "$bin/kplan" "$build/bin/kplan"; }
# CUDA graphs are replayed as captured; compute-sanitizer follows graph launches, but plain launches
# name the kernel of a report directly, so each plan run is also done with KPLAN_NO_GRAPHS=1.

echo "== device"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== commit $(cat "$stage/commit" 2>/dev/null)  date $(date -u +%FT%TZ)  $("$cs" --version | tail -n 1)"

# The GPU tests only (the CPU ones would run slowly under the tool and check nothing on the device).
declare -A filters=(
  [runtime_tests]='GpuRuntime.*:GpuDrafter.*:GpuModelTest.*'
  [codegen_tests]='GpuOps.*'
  [ops_tests]='*BackendOps.Gpu/*'
  [plan_tests]='PlanArch.*'
)
status=0
summary=()
limit=${KPLAN_SANITIZE_TIMEOUT:-280}
record() {  # tool name log rc
  local errors
  errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$3" | tail -n 1 | grep -oE '[0-9]+' || echo "?")
  local tests
  tests=$(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$3" | tr '\n' ' ')
  local verdict=clean
  if [ "$4" -eq 124 ]; then verdict="TIMED OUT after ${limit}s (log $(basename "$3"))"; status=1
  elif [ "$4" -ne 0 ] || [ "$errors" != 0 ]; then verdict="FAILED (rc $4, log $(basename "$3"))"; status=1; fi
  summary+=("$(printf '%-10s %-34s errors %-4s %s %s' "$1" "$2" "$errors" "$verdict" "$tests")")
  echo "${summary[-1]}"
}
for tool in "${tools[@]}"; do
  extra=()
  case "$tool" in
    memcheck) extra=(--leak-check full) ;;
    racecheck|initcheck) ;;
    *) echo "sanitize_gpu: unknown tool $tool (memcheck, racecheck, initcheck)" >&2; exit 2 ;;
  esac
  for t in ${KPLAN_SANITIZE_BINS:-runtime_tests codegen_tests ops_tests plan_tests}; do
    [ -x "$bin/$t" ] || continue
    log=$out/${tool}_$t.log
    echo "== $tool $t"
    timeout "$limit" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 1 --print-limit 50 \
      "$bin/$t" --gtest_color=no --gtest_filter="${filters[$t]}" > "$log" 2>&1
    record "$tool" "$t" "$log" $?
  done
  [ "${KPLAN_SANITIZE_PLANS:-1}" = 1 ] || continue
  for p in "$stage"/plans/*.kplan; do
    [ -e "$p" ] || continue
    name=$(basename "$p" .kplan)
    for spec in none ddtree; do
      run=("$bin/kplan" run "$p" --device gpu --prompt-ids 1,2,3,4,5 --max-new 8 --ignore-eos --spec $spec --drafter oracle)
      # A plan this run cannot decode (the toy plan has no commit program) is left out, saying why.
      if ! "${run[@]}" > /dev/null 2> "$out/plain_run.err"; then
        summary+=("$(printf '%-10s %-34s skipped: %s' "$tool" "run $name $spec" "$(head -c 120 "$out/plain_run.err")")")
        echo "${summary[-1]}"
        continue
      fi
      for graphs in 1 0; do
        log=$out/${tool}_run_${name}_${spec}_graphs$graphs.log
        KPLAN_NO_GRAPHS=$((1 - graphs)) timeout "$limit" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 1 \
          --print-limit 50 "${run[@]}" > "$log" 2>&1
        record "$tool" "run $name $spec graphs=$graphs" "$log" $?
      done
    done
  done
done
printf '%s\n' "== summary" "${summary[@]}" | tee "$out/summary.txt"
exit $status
