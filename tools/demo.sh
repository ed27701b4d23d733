#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build kplan, compile the bundled pair
# (the trained DeepSeek-V3-architecture target models/mini-v3 and its DFlash drafter
# models/mini-v3-dflash) into one plan, and decode a held-out Python prompt with AR, chain DFlash and
# DDTree in one session (`kplan run --spec compare`: GPU when present, else the CPU reference
# backend): the text once, that the three modes agree, and a table of their figures.
#
# Environment:
#   KPLAN_DEMO_MODEL, KPLAN_DEMO_DRAFT  other target / drafter checkpoints (default: the bundled pair)
#   KPLAN_DEMO_PROMPT_IDS               prompt token ids (e.g. 5,17,42) instead of the text prompt,
#                                       for checkpoints without a tokenizer (`kplan synth`'s)
#   KPLAN_BUILD_DIR, KPLAN_BUILD_TYPE   the build directory (build) and type (tools/configure.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${KPLAN_DEMO_MODEL:-models/mini-v3}
draft=${KPLAN_DEMO_DRAFT:-models/mini-v3-dflash}
for dir in "$model" "$draft"; do
  if [ ! -f "$dir/config.json" ]; then
    echo "demo: error: no checkpoint at '$dir' (the bundled pair is models/mini-v3 + models/mini-v3-dflash;" \
         "set KPLAN_DEMO_MODEL and KPLAN_DEMO_DRAFT to use other checkpoints)" >&2
    exit 1
  fi
done

tools/install_deps.sh
build=${KPLAN_BUILD_DIR:-build}
tools/configure.sh "$build"
cmake --build "$build" -j "$(nproc)" --target kplan
kplan="$build/bin/kplan"
work="$build/demo"
mkdir -p "$work"
plan="$work/$(basename "$model").kplan"
"$kplan" compile --model "$model" --draft "$draft" --arch sm_90,sm_120 -o "$plan"

if [ -n "${KPLAN_DEMO_PROMPT_IDS:-}" ]; then
  prompt=(--prompt-ids "$KPLAN_DEMO_PROMPT_IDS")
else
  # The first held-out prompt of the bundled pair's corpus (Python the model never trained on).
  text=$(python3 -c "import json; print(json.loads(open('tests/data/mini-v3/heldout_prompts.jsonl').readline())['text'], end='')")
  prompt=(--prompt "$text")
fi
# Budget 15: a verify of 16 tokens fills the plan's 16-token bucket (16 nodes would take the 32).
"$kplan" run "$plan" "${prompt[@]}" --spec compare --budget 15 --max-new 96 --device auto
