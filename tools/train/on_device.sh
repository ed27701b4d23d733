#!/usr/bin/env bash
# One device call that trains the pair and tries kplan on it (the device tool; carry [".carry/train"]).
#   here:   tools/train/on_device.sh --stage DATA     (DATA from prepare_data.py; copies the token
#           streams, tokenizer and a kplan binary into .carry/train)
#   there:  tools/train/on_device.sh                  (results under $OUT: models/, logs, kplan output)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
stage=$repo/.carry/train
if [ "${1:-}" = "--stage" ]; then
  set -e
  rm -rf "$stage" && mkdir -p "$stage/data/tokenizer" "$stage/bin" "$stage/lib"
  for f in train.u16 heldout.u16 heldout_prompts.jsonl tokenizer_sample.jsonl data_manifest.json; do cp "$2/$f" "$stage/data/"; done
  cp "$2"/tokenizer/* "$stage/data/tokenizer/"
  objcopy --strip-debug "${KPLAN_BUILD_DIR:-$repo/build}/bin/kplan" "$stage/bin/kplan"
  cp -L /lib/x86_64-linux-gnu/libpcre2-8.so.0 "$stage/lib/"
  du -sh "$stage"
  exit 0
fi
out=${OUT:-/tmp/train-out}
work=/tmp/train-work
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
models=/tmp/models
if [ -n "${DRAFTER_ONLY:-}" ]; then mkdir -p $models && cp -r "$repo/models/mini-v3" $models/; fi
bash "$repo/tools/train/train_all.sh" "$stage/data" "$work" $models "${SEED:-1}" 2>&1 | tee "$out/train.log"
cp "$work"/*.json "$out/" 2>/dev/null
[ -f $models/mini-v3-dflash/model.safetensors ] || exit 1
# At most 8 files come back: the weights, not the directories (configs and tokenizer are rebuilt
# from tools/train by export.py's rules).
for d in mini-v3 mini-v3-int4 mini-v3-dflash; do
  [ -n "${DRAFTER_ONLY:-}" ] && [ $d != mini-v3-dflash ] && continue
  cp $models/$d/model.safetensors "$out/$d.safetensors"
done
# kplan on the fresh pair, on the GPU.
nvrtc=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/*/lib/libnvrtc.so.13 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$nvrtc:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$stage/lib
mkdir -p /work && { [ -e /work/main ] || ln -s "$repo" /work/main; }
k=$stage/bin/kplan
plan=/tmp/mini-v3.kplan
timeout 120 "$k" compile --model $models/mini-v3 --draft $models/mini-v3-dflash --arch sm_90 -o "$plan" 2>&1 | tail -3
prompt=$(python3 -c 'import json; print(json.loads(open("'"$repo"'/tests/data/mini-v3/heldout_prompts.jsonl").readline())["text"], end="")')
timeout 60 "$k" run "$plan" --prompt "$prompt" --spec compare --budget 16 --max-new 96 --device gpu 2>&1 | tee "$out/compare_gpu.txt"
head -50 "$repo/tests/data/mini-v3/heldout_prompts.jsonl" > /tmp/prompts50.jsonl
timeout ${SWEEP_SECONDS:-200} "$k" bench --acceptance /tmp/prompts50.jsonl "$plan" --budgets 4,8,16,32,64 \
  --temperatures ${SWEEP_TEMPERATURES:-0} --max-new 32 --device gpu --json "$out/acceptance_gpu.json" 2>&1 | tail -12
