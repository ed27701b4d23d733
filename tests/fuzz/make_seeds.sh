#!/usr/bin/env bash
# Regenerates the committed seed corpora, tests/fuzz/corpus/<target>/seeds, from what the project
# itself writes: `kplan synth` checkpoints (a micro target + drafter, the presets' configs, a sharded
# tiny2), `kplan compile` (the micro pair's plan and IR), the bundled pair's tokenizer and configs.
# Seeds stay small (the plan's cubins are cut to 16 bytes by the plan target's seed mode).
#   tests/fuzz/make_seeds.sh [GCC_BUILD [FUZZ_BUILD]]   (defaults: build, build-san)
# GCC_BUILD holds bin/kplan (`ninja -C build kplan`), FUZZ_BUILD the fuzz targets
# (tests/fuzz/run.sh --build-only). The crash corpora (corpus/<target>/crashes) are not touched.
set -euo pipefail
cd "$(dirname "$0")/../.."
kplan="$(realpath "${1:-build}")/bin/kplan"
fuzz="$(realpath "${2:-build-san}")/fuzz"
[ -x "$kplan" ] || { echo "make_seeds: no $kplan (ninja -C ${1:-build} kplan)" >&2; exit 1; }
[ -x "$fuzz/fuzz_plan_reader" ] || { echo "make_seeds: no fuzz targets in $fuzz (tests/fuzz/run.sh --build-only)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=tests/fuzz/corpus
seeds() { rm -rf "$corpus/$1/seeds"; mkdir -p "$corpus/$1/seeds"; echo "$corpus/$1/seeds"; }

# A micro target (2 layers, one dense and one MoE, hidden 16, vocab 32) and its drafter.
python3 - "$work/micro.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/tiny.json"))
c.update(hidden_size=16, intermediate_size=32, kv_lora_rank=8, max_position_embeddings=64,
         moe_intermediate_size=8, n_routed_experts=2, n_shared_experts=1, num_attention_heads=1,
         num_experts_per_tok=1, num_hidden_layers=2, num_key_value_heads=1, q_lora_rank=None,
         qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, vocab_size=32, bos_token_id=0,
         eos_token_id=1)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
"$kplan" synth --config "$work/micro.json" --out "$work/micro" --draft "$work/micro-draft" >/dev/null
"$kplan" synth tiny --out "$work/tiny" --draft "$work/tiny-draft" >/dev/null
"$kplan" synth tiny2 --out "$work/tiny2" --shard-mb 1 >/dev/null
"$kplan" synth tiny-yarn --out "$work/tiny-yarn" >/dev/null
"$kplan" synth tiny --int4 --out "$work/tiny-int4" >/dev/null

d=$(seeds model_config)
cp "$work/micro/config.json" "$d/micro.json"
for m in tiny tiny2 tiny-yarn tiny-int4; do cp "$work/$m/config.json" "$d/$m.json"; done
cp tests/data/kimi-k2.6/config.json "$d/kimi-k2.6.json"
cp models/mini-v3/config.json "$d/mini-v3.json"
cp tests/data/configs/tiny-yarn-rope-parameters.json "$d/tiny-yarn-rope-parameters.json"

d=$(seeds draft_config)
cp "$work/micro-draft/config.json" "$d/micro-draft.json"
cp "$work/tiny-draft/config.json" "$d/tiny-draft.json"
cp tests/data/kimi-k2.6-dflash/config.json "$d/kimi-k2.6-dflash.json"
cp tests/data/kimi-k2.6-dflash-modelopt/config.json "$d/kimi-k2.6-dflash-modelopt.json"
cp models/mini-v3-dflash/config.json "$d/mini-v3-dflash.json"
cp tests/data/configs/draft-toplevel-fields.json "$d/draft-toplevel-fields.json"

d=$(seeds safetensors)
cp "$work/micro/model.safetensors" "$d/micro.safetensors"
cp "$work/micro-draft/model.safetensors" "$d/micro-draft.safetensors"
# tiny's header alone (its data section cut off): a real header's shape, refused at the first offset.
python3 - "$work/tiny-int4/model.safetensors" "$d/tiny-int4-header.safetensors" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
open(sys.argv[2], "wb").write(b[:8 + n])
PY

d=$(seeds safetensors_index)
KPLAN_FUZZ_SEED_OUT="$d/harness-shards.json" "$fuzz/fuzz_safetensors_index" -runs=0 >/dev/null 2>&1
cp "$work/tiny2/model.safetensors.index.json" "$d/tiny2.json"

d=$(seeds plan_reader)
"$kplan" compile --model "$work/micro" --draft "$work/micro-draft" -o "$work/micro.kplan" --arch sm_90 \
  --buckets 1,8 --max-context 16 >/dev/null 2>&1
KPLAN_FUZZ_SEED_FROM="$work/micro.kplan" KPLAN_FUZZ_SEED_OUT="$d/micro-pair.plan" "$fuzz/fuzz_plan_reader" >/dev/null 2>&1
"$kplan" compile --model "$work/micro" -o "$work/micro-target.kplan" --arch sm_90,sm_120 --buckets 1 \
  --max-context 16 >/dev/null 2>&1
KPLAN_FUZZ_SEED_FROM="$work/micro-target.kplan" KPLAN_FUZZ_SEED_OUT="$d/micro-two-archs.plan" \
  "$fuzz/fuzz_plan_reader" >/dev/null 2>&1

d=$(seeds ir_parser)
"$kplan" compile --model "$work/micro" --no-weights --dump-ir > "$d/micro.kir"
"$kplan" compile --model "$work/micro" --draft "$work/micro-draft" --no-weights --dump-ir > "$d/micro-pair.kir"
"$kplan" compile --model "$work/tiny-yarn" --no-weights --dump-ir > "$d/tiny-yarn.kir"
"$kplan" compile --model "$work/tiny-int4" --no-weights --dump-ir > "$d/tiny-int4.kir"

d=$(seeds tokenizer_files)
{ head -n 300 models/mini-v3/tiktoken.model; printf '\0'; cat models/mini-v3/tokenizer_config.json; } > "$d/mini-v3-300-ranks"
{ cat models/mini-v3/tiktoken.model; printf '\0'; cat models/mini-v3/tokenizer_config.json; } > "$d/mini-v3"

d=$(seeds chat_template)
for t in kimi-k2 kimi-k2.6 deepseek-v3; do cp "tests/data/chat_templates/$t.jinja" "$d/$t"; done

d=$(seeds tokenizer_codec)
python3 - "$d" <<'PY'
import json, os, struct, sys
out = sys.argv[1]
lines = [json.loads(l)["text"] for l in open("tests/data/mini-v3/heldout_prompts.jsonl")][:3]
for i, text in enumerate(lines):
    open(os.path.join(out, f"encode-heldout-{i}"), "wb").write(b"\x00" + text.encode()[:2000])
open(os.path.join(out, "encode-specials"), "wb").write(b"\x02" + "[BOS]def f(x):<|im_end|> é 汉字 \U0001f600\n".encode())
open(os.path.join(out, "decode-ids"), "wb").write(b"\x01" + struct.pack("<12i", 0, 1, 2, 100, 255, 256, 4095, 4096, 4097, 4351, 4352, -1))
PY
echo "make_seeds: $(find "$corpus" -path '*/seeds/*' -type f | wc -l) seeds, $(du -sh --apparent-size "$corpus" | cut -f1) in $corpus"
