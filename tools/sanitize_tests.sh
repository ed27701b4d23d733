#!/usr/bin/env bash
# CI's second step (.ci/run): the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer in a
# second build tree (clang-16, -DKPLAN_FUZZ=ON: every object sanitized and coverage-instrumented, the
# kplan CLI the tests run included), then the fuzz smoke: every tests/fuzz target replays its crash
# corpus and fuzzes for a short fixed time (tests/fuzz/run.sh).
#   tools/sanitize_tests.sh            KPLAN_SANITIZE_AREAS="frontend ir ..." picks the test areas,
#                                      KPLAN_FUZZ_SECONDS (default 10) the time per fuzz target,
#                                      KPLAN_SANITIZE_BUILD_DIR (default build-san) the tree,
#                                      KPLAN_JOBS (default nproc) the build and ctest jobs.
# The areas by default are the parsers of untrusted input and what runs them: frontend, ir, synth,
# tokenizer, plan (the reader, writer and damaged plans) and cpu (the reference interpreter). Left
# out for CI's time: codegen, ops, passes, runtime, ddtree, cli, arch (their code is compiled here
# all the same; KPLAN_SANITIZE_AREAS=all runs every area). Nothing is compiled by nvcc: the GPU
# code is host C++ (driver API, dlopen-ed) and is sanitized like the rest; NVRTC and the driver are
# NVIDIA's uninstrumented libraries, and the GPU tests skip without a GPU.
# Time (2026-12-06, a clean clone on the 2-core development machine, -j2, another build beside
# it): build 608 s (-O1 -gline-tables-only; 898 s with full debug info), unit tests 98 s, fuzz smoke 195 s
# (the targets one after another; since, two at a time on two cores: ~100 s).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build=${KPLAN_SANITIZE_BUILD_DIR:-build-san}
jobs=${KPLAN_JOBS:-$(nproc)}
areas=${KPLAN_SANITIZE_AREAS:-frontend ir synth tokenizer plan cpu}
[ "$areas" != all ] || areas="frontend synth ir passes cli cpu ddtree codegen ops plan runtime tokenizer arch"
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DKPLAN_FUZZ=ON >/dev/null
targets=()
for a in $areas; do targets+=("${a}_tests"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}" fuzz_targets
built=$(date +%s)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L "^($(echo $areas | tr ' ' '|'))\$"
tested=$(date +%s)
# 10 s a target (20 until 2026-12-07: a clean clone's .ci/run reached 1913 s on the 2-core machine,
# its sanitized build alone varying 556-688 s between runs of the same tree).
tests/fuzz/run.sh -b "$build" -j "$jobs" -t "${KPLAN_FUZZ_SECONDS:-10}"
done_at=$(date +%s)
echo "sanitize_tests: build $((built - start)) s, unit tests ($areas) $((tested - built)) s, fuzz smoke $((done_at - tested)) s"
