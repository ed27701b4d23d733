#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of tests/fuzz (clang-16, ASan + UBSan; README.md here).
#   tests/fuzz/run.sh [-t SECONDS] [-n RUNS] [-b BUILD] [-j JOBS] [--fast|--ubsan-only] [--replay-only] [--build-only] [TARGET...]
# For each target (all when none is named): first replays the committed crash corpus
# (corpus/<target>/crashes: inputs that once crashed, each must now run clean), then fuzzes for
# SECONDS (default 60; with -n, until RUNS executions or SECONDS, whichever comes first: the long
# run of bench/RESULTS.md is -n 10000000) from the committed seeds plus the corpus grown by earlier runs
# (BUILD/fuzz/corpus/<target>), with the target's dictionary. A crash leaves its input in
# BUILD/fuzz/artifacts/<target>/ and fails the run; copy it to corpus/<target>/crashes once fixed.
# Prints per target the executions, executions per second, coverage (edges) and features. JOBS
# (default 1) builds with that many jobs and fuzzes that many targets at a time, one core each.
# BUILD (default build-san) is configured here when it is not yet: clang++-16, -DKPLAN_FUZZ=ON,
# -O1 -gline-tables-only, ASan + UBSan. The throughput builds of the long run (tools/device/fuzz_long.sh):
#   --fast        BUILD default build-fuzz-fast: -O2 -gline-tables-only, ASan + UBSan, fuzzed with
#                 ASAN_OPTIONS detect_leaks=0:detect_stack_use_after_return=0 (CI's smoke checks leaks)
#   --ubsan-only  BUILD default build-fuzz-ubsan: -O2 -gline-tables-only, UBSan only (no ASan)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds=60 runs=-1 build="" jobs=1 replay_only=0 build_only=0 targets=() flavor=san
while [ $# -gt 0 ]; do
  case "$1" in
    -t) seconds="$2"; shift 2 ;;
    -n) runs="$2"; shift 2 ;;
    -b) build="$(realpath -m "$2")"; shift 2 ;;
    -j) jobs="$2"; shift 2 ;;
    --fast) flavor=fast; shift ;;
    --ubsan-only) flavor=ubsan; shift ;;
    --replay-only) replay_only=1; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case $flavor in
  san) default_build=build-san opt="-O1 -gline-tables-only" sanitizers=address,undefined
       default_asan=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 ;;
  fast) default_build=build-fuzz-fast opt="-O2 -gline-tables-only" sanitizers=address,undefined
        default_asan=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0 ;;
  ubsan) default_build=build-fuzz-ubsan opt="-O2 -gline-tables-only" sanitizers=undefined default_asan= ;;
esac
[ -n "$build" ] || build="$root/$default_build"
all=(safetensors safetensors_index model_config draft_config plan_reader tokenizer_files tokenizer_codec chat_template ir_parser)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
dict_of() {
  case "$1" in
    ir_parser) echo "$here/ir.dict" ;;
    chat_template) echo "$here/jinja.dict" ;;
    safetensors|safetensors_index|model_config|draft_config|tokenizer_files) echo "$here/json.dict" ;;
    *) echo "" ;;
  esac
}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt" -DKPLAN_FUZZ=ON -DKPLAN_SANITIZERS=$sanitizers >/dev/null
fi
ninja -C "$build" -j "$jobs" $(printf 'fuzz_%s ' "${targets[@]}") | grep -v '^ninja: no work' | tail -n 1
[ $build_only -eq 0 ] || exit 0

export ASAN_OPTIONS="${ASAN_OPTIONS:-$default_asan}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# One target: its crash corpus replayed, then (unless --replay-only) fuzzed for a fixed time.
# Prints its lines; returns non-zero on a finding.
fuzz_one() {
  local t=$1 bin="$build/fuzz/fuzz_$1" committed="$here/corpus/$1"
  mkdir -p "$committed/seeds" "$committed/crashes"
  # 1. The crash corpus: every input once; a crash here is a regression of a fixed finding.
  local crashes=()
  mapfile -t crashes < <(find "$committed/crashes" -type f ! -name README.md | sort)
  if [ ${#crashes[@]} -gt 0 ]; then
    if "$bin" -rss_limit_mb=2048 -timeout=20 "${crashes[@]}" > "$build/fuzz/replay_$t.log" 2>&1; then
      echo "fuzz $t: replayed ${#crashes[@]} crash inputs, all clean"
    else
      echo "fuzz $t: FAILED replaying the crash corpus (log: $build/fuzz/replay_$t.log)"
      grep -E 'ERROR|FINDING|runtime error|Running:' "$build/fuzz/replay_$t.log" | tail -n 6
      return 1
    fi
  fi
  [ $replay_only -eq 0 ] || return 0
  # 2. Fuzzing for a fixed time.
  local grown="$build/fuzz/corpus/$t" artifacts="$build/fuzz/artifacts/$t/" dict log="$build/fuzz/fuzz_$t.log" rc
  mkdir -p "$grown" "$artifacts"
  dict="$(dict_of "$t")"
  set +e
  "$bin" -max_total_time="$seconds" -runs="$runs" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$artifacts" ${dict:+-dict="$dict"} "$grown" "$committed/seeds" > "$log" 2>&1
  rc=$?
  set -e
  local execs rate cov ft
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -oE '(DONE|#[0-9]+) +.*cov: [0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+' | grep -o '[0-9]*' || echo "?")
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  if [ $rc -eq 0 ]; then
    echo "fuzz $t: ${seconds}s, $execs executions ($rate/s), cov $cov, ft $ft, no crash"
  else
    echo "fuzz $t: CRASH after $execs executions (rc $rc; input in $artifacts, log $log)"
    grep -E 'ERROR|FINDING|runtime error|SUMMARY' "$log" | head -n 4
    return 1
  fi
}

# JOBS targets at a time (each fuzzer is one process on one core), their lines printed in target
# order once all have ended.
status=0
summary=()
pids=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$t" > "$build/fuzz/result_$t.txt" 2>&1 &
  pids+=("$!")
done
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  wait "${pids[$i]}" || status=1
  cat "$build/fuzz/result_$t.txt"
  line=$(grep -E "^fuzz $t: .*(no crash|CRASH)" "$build/fuzz/result_$t.txt" | tail -n 1 || true)
  [ -z "$line" ] || summary+=("$line")
done
if [ ${#summary[@]} -gt 1 ]; then printf '%s\n' "---" "${summary[@]}"; fi
exit $status
