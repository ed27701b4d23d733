#!/usr/bin/env bash
# The mini-v3 pair from its seed: tools/train/train_all.sh DATA WORK MODELS [SEED]
#   DATA    from tools/train/prepare_data.py (CPU, any machine; deterministic)
#   WORK    scratch: trained state_dicts and logs
#   MODELS  where mini-v3/, mini-v3-int4/ and mini-v3-dflash/ are written
# DRAFTER_ONLY=1: keep MODELS/mini-v3 and retrain only the drafter. DRAFT_EXACT=1: distil from
# float32 continuations (kplan's numerics) instead of bf16 autocast (the shipped drafter's recipe).
# Stages 2-5 need the GPU machine (torch + transformers). TARGET_STEPS / DRAFT_STEPS: a step count,
# or auto:SECONDS (the shipped pair's logs record the counts that were used; pass them to rerun).
set -euo pipefail
# The drafter learns the SHIPPED target (bf16 weights, loaded from MODELS/mini-v3 by transformers).
drafter() {
  python3 "$here/train_drafter.py" --data "$data" --target "$models/mini-v3" --work "$work" --seed "$seed" \
    --steps "${DRAFT_STEPS:-6000}" --sequences "${DRAFT_SEQUENCES:-65536}" ${DRAFT_EXACT:+--exact-distillation}
  python3 "$here/export.py" --data "$data" --work "$work" --out "$models" --what drafter
}
here=$(cd "$(dirname "$0")" && pwd)
data=$1 work=$2 models=$3 seed=${4:-1}
mkdir -p "$work" "$models"
if [ -z "${DRAFTER_ONLY:-}" ]; then
  python3 "$here/train_target.py" --data "$data" --out "$work" --seed "$seed" --steps "${TARGET_STEPS:-2500}"
  python3 "$here/export.py" --data "$data" --work "$work" --out "$models" --what target
fi
drafter
python3 "$here/check_export.py" --data "$data" --work "$work" --models "$models" --report "$work/check_export.json"
