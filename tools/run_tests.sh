#!/usr/bin/env bash
# The whole test suite from a clean clone: install dependencies, configure, build, run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build=${KPLAN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${KPLAN_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
