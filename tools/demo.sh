#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, synthesise the bundled default
# model (the `tiny` preset + its DFlash drafter, seeded), compile it to a plan, and decode with
# DDTree — on the GPU when there is one, else on the CPU reference backend.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build=${KPLAN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${KPLAN_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)" --target kplan
kplan="$build/bin/kplan"
work="$build/demo"
rm -rf "$work" && mkdir -p "$work"
"$kplan" synth tiny --seed 1 --out "$work/tiny" --draft "$work/tiny-draft"
"$kplan" compile --model "$work/tiny" --draft "$work/tiny-draft" --arch sm_90,sm_120 -o "$work/tiny.kplan"
"$kplan" inspect "$work/tiny.kplan"
prompt=5,17,42,99,7,300,12
echo "== AR (reference) =="
"$kplan" run "$work/tiny" --device cpu --prompt-ids $prompt --max-new 32 --spec none --stats
echo "== DDTree with the DFlash drafter, budget 16 (CPU reference; random drafter weights accept little) =="
"$kplan" run "$work/tiny" --draft "$work/tiny-draft" --device cpu --prompt-ids $prompt --max-new 32 \
  --spec ddtree --budget 16 --drafter dflash --stats
echo "== DDTree on the plan, oracle drafter (80% right per depth), budget 16 (GPU when present) =="
"$kplan" run "$work/tiny.kplan" --device auto --prompt-ids $prompt \
  --max-new 32 --spec ddtree --budget 16 --drafter oracle --oracle-accuracy 0.8 --stats
