#!/usr/bin/env bash
# The whole test suite from a clean clone: install dependencies, configure, build, run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build=${KPLAN_BUILD_DIR:-build}
tools/configure.sh "$build"
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
