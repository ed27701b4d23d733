#!/usr/bin/env bash
# HuggingFace goldens for the CPU reference backend (tests/data/goldens/README.md says more).
#
#   tools/device/goldens.sh synth KPLAN CKPT_ROOT   # here: synthesise every case's checkpoints
#   tools/device/goldens.sh run CKPT_ROOT OUT       # on the GPU machine: OUT/<case>.json
#
# `run` makes each golden on the CPU in float32 (the file that is kept), then repeats it on CUDA
# with TF32 off and prints how far the two are apart (a cross-check; that file is thrown away).
# A failing case does not stop the others; the exit status says whether any failed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# case | `kplan synth` arguments of the target | has a drafter
cases=(
  "tiny|tiny --seed 1|yes"
  "tiny2|tiny2 --seed 1|yes"
  "tiny-int4|tiny --seed 1 --int4|no"
  "tiny-yarn|tiny-yarn --seed 1|no"
)

synth_all() {
  local kplan="$1" root="$2"
  mkdir -p "$root"
  for entry in "${cases[@]}"; do
    IFS='|' read -r name args draft <<<"$entry"
    rm -rf "$root/$name" "$root/$name-draft"
    # shellcheck disable=SC2086
    if [[ $draft == yes ]]; then
      "$kplan" synth $args --out "$root/$name" --draft "$root/$name-draft" || return 1
    else
      "$kplan" synth $args --out "$root/$name" || return 1
    fi
  done
  du -sh "$root"
}

run_all() {
  local root="$1" out="$2" failed=0
  mkdir -p "$out" /tmp/goldens-cuda
  python3 -c 'import sys, torch, transformers, safetensors; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__, "cuda", torch.cuda.is_available())'
  python3 -c 'import compressed_tensors' 2>/dev/null && echo "compressed-tensors: installed" || echo "compressed-tensors: not installed"
  for entry in "${cases[@]}"; do
    IFS='|' read -r name args draft <<<"$entry"
    local draft_flags=()
    local synth="kplan synth $args --out $name"
    if [[ $draft == yes ]]; then
      draft_flags=(--draft "$root/$name-draft" --draft-synth-args "$args")
      synth="$synth --draft $name-draft"
    fi
    local cmd="tools/device/make_goldens.py --case $name --ckpt $name --synth-args '$args'"
    [[ $draft == yes ]] && cmd="$cmd --draft $name-draft --draft-synth-args '$args'"
    local start=$SECONDS
    python3 "$here/make_goldens.py" --case "$name" --ckpt "$root/$name" --synth-args "$args" \
      "${draft_flags[@]}" --device cpu --out "$out/$name.json" \
      --command "$synth && python3 $cmd --device cpu --out $name.json" || { failed=1; continue; }
    echo "$name: cpu golden in $((SECONDS - start)) s"
    python3 "$here/make_goldens.py" --case "$name" --ckpt "$root/$name" --synth-args "$args" \
      "${draft_flags[@]}" --device cuda --out "/tmp/goldens-cuda/$name.json" \
      --compare "$out/$name.json" || failed=1
  done
  return $failed
}

case "${1:-}" in
  synth) synth_all "$2" "$3" ;;
  run) run_all "$2" "$3" ;;
  *) echo "usage: $0 synth KPLAN CKPT_ROOT | run CKPT_ROOT OUT" >&2; exit 2 ;;
esac
