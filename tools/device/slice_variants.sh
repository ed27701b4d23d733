#!/usr/bin/env bash
# Compile-time variants of the K2.6 3-layer slice (1 dense + 2 MoE layers at full width, weights
# generated on the device at load) timed side by side in one device run: each variant is a name and
# the environment its plan is compiled under (the compile-time switches README.md lists:
# KPLAN_FUSE_ADDS, KPLAN_FUSE_SIBLINGS, KPLAN_FUSE_GLU, KPLAN_WEIGHT_PREFETCH, KPLAN_MOE_WIDE, KPLAN_MLA_SPLIT, ...). Every plan is
# benched in the same process order at the same context, then a table of step ms per token count
# is printed last (and $OUT/variants.json written).
# Run from the kit `gpu_check.sh --stage` carried (.carry/gpu).
# Env: KPLAN_VARIANTS ("name:VAR=V,VAR=V name2:" ...; default: each fusion off against the
# default; "name:KPLAN_TUNE=family[COND=V]:PARAM=V,PARAM=V;family2:..." sets tuning overrides,
# compiler/codegen/heuristics/tune_override.h; an entry starting with -- is a compile flag:
# "name:--activations=f32,KPLAN_MOE_XBF16=0"), KPLAN_VARIANT_EXPERTS (int4 | bf16: the INT4 published config or
# bench/configs/k26-bf16-experts), KPLAN_SLICE_CONTEXT (512), KPLAN_SLICE_TOKENS (1,16),
# KPLAN_SLICE_MAX_CONTEXT (the plans' --max-context: 2 x context + the last token count; a
# deployment's is larger, and the split MLA's split count follows it), KPLAN_VARIANT_IN_GRAPH=1 (each
# plan's first-bucket step also timed launch by launch inside its graph, `kplan bench --kernels
# --in-graph`, KPLAN_VARIANT_GRAPH_STEPS replays a prefix (100): its summed step is a column of the
# table, each launch's marginal in $OUT/in_graph_NAME.log).
set -uo pipefail
default_out=/tmp/kplan-variants
source "$(dirname "$0")/carried_env.sh"
ctx=${KPLAN_SLICE_CONTEXT:-512}
tokens=${KPLAN_SLICE_TOKENS:-1,16}
max_t=${tokens##*,}
max_ctx=${KPLAN_SLICE_MAX_CONTEXT:-$((2 * ctx + max_t))}
experts=${KPLAN_VARIANT_EXPERTS:-int4}
cfg=$repo/tests/data/kimi-k2.6/config.json
[ "$experts" = bf16 ] && cfg=$repo/bench/configs/k26-bf16-experts/config.json
variants=${KPLAN_VARIANTS:-"default: no-fused-adds:KPLAN_FUSE_ADDS=0 no-siblings:KPLAN_FUSE_SIBLINGS=0 no-glu:KPLAN_FUSE_GLU=0"}
export KPLAN_CACHE_DIR=${KPLAN_CACHE_DIR:-/tmp/kplan-variant-cache}
names=()
for v in $variants; do
  name=${v%%:*}
  envs=${v#*:}
  plan=/tmp/k26_l3_${experts}_$name.kplan
  names+=("$name")
  # A variant that is one KPLAN_TUNE=... takes it whole (its entries hold commas and brackets).
  if [[ $envs == KPLAN_TUNE=* ]]; then assignments=("$envs"); else read -r -a assignments <<< "${envs//,/ }"; fi
  # Entries starting with -- are compile flags (--activations=f32), the rest environment.
  flags=(); vars=()
  for a in "${assignments[@]}"; do if [[ $a == --* ]]; then flags+=("${a%%=*}" "${a#*=}"); else vars+=("$a"); fi; done
  env "${vars[@]}" "$bin/kplan" compile --model "$cfg" --no-weights --layers 3 --synthetic-weights 1 --arch sm_90 \
      --buckets "$tokens" --max-context "$max_ctx" "${flags[@]}" -o "$plan" > "$out/compile_$name.log" 2>&1 \
      || { echo "compile $name failed:"; tail -5 "$out/compile_$name.log"; }
done
for name in "${names[@]}"; do
  plan=/tmp/k26_l3_${experts}_$name.kplan
  [ -f "$plan" ] || continue
  echo "== $name ($experts experts, context $ctx)"
  timeout 180 "$bin/kplan" bench "$plan" --steps 50 --context "$ctx" --all-buckets --json "$out/variant_$name.json" 2>&1 | tail -4
  if [ "${KPLAN_VARIANT_IN_GRAPH:-0}" = 1 ]; then
    timeout 240 "$bin/kplan" bench "$plan" --steps "${KPLAN_VARIANT_GRAPH_STEPS:-100}" --context "$ctx" --kernels \
        --kernel-tokens "${tokens%%,*}" --in-graph > "$out/in_graph_$name.log" 2>&1
    grep -m1 "inside its graph" "$out/in_graph_$name.log"
  fi
done
python3 - "$out" "$tokens" "${names[@]}" <<'EOF'
import json, os, sys
out, tokens, names = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3:]
rows = {}
for n in names:
    f = os.path.join(out, f"variant_{n}.json")
    if not os.path.exists(f):
        continue
    j = json.load(open(f))
    steps = {int(b["tokens"]): b for b in j.get("buckets", [])}
    rows[n] = steps
json.dump(rows, open(os.path.join(out, "variants.json"), "w"), indent=1)
# The in-graph step (KPLAN_VARIANT_IN_GRAPH=1): the launches' marginals summed.
import re
def in_graph(n):
    f = os.path.join(out, f"in_graph_{n}.log")
    m = re.search(r"inside its graph: (\d+) launches, ([0-9.]+) ms", open(f).read()) if os.path.exists(f) else None
    return f"{float(m.group(2)):>10.4f} ms ({m.group(1)})" if m else ""
# step ms (median of the bench's steps) and its share of the byte floor (read_bytes at 4.3 TB/s)
print("variant".ljust(20) + "".join(f"{str(t) + ' tok':>20}" for t in tokens) + "   in the graph")
for n, steps in rows.items():
    cells = []
    for t in tokens:
        b = steps.get(t)
        cells.append(f"{b['step_ms_median']:>10.4f} ms ({100 * b['read_bytes'] / 4.3e9 / b['step_ms_median']:3.0f}%)" if b else " " * 20)
    print(n.ljust(20) + "".join(cells) + "   " + in_graph(n))
EOF
