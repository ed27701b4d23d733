#!/usr/bin/env bash
# Stages the fuzz binaries of a build tree for a machine without a compiler (tools/device/fuzz_long.sh):
#   tests/fuzz/stage.sh [BUILD [DEST [TARGET...]]]     (BUILD default build-fuzz-fast, DEST .carry/fuzz)
# Writes DEST/fuzz_<t>.gz for each target (all 9 when none is named; several calls may fill one
# DEST from different builds, e.g. UBSan-only binaries for the slowest targets): BUILD/fuzz/fuzz_<t>
# stripped of debug information and symbols (the code is the same, and the device has no
# symbolizer anyway: symbolize a report's (fuzz_<t>+0xOFFSET) frames here with
# `llvm-symbolizer-16 -e BUILD/fuzz/fuzz_<t> 0xOFFSET`), gzipped (about 12 MB for all 9;
# fuzz_long.sh unpacks them), and records each one's sanitizers and flags in DEST/MANIFEST. The sanitizer runtimes are linked in statically; the binaries need only
# libc, libm, libresolv, libgcc_s, libstdc++ and libpcre2-8, which are checked here with ldd.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(realpath -m "${1:-$root/build-fuzz-fast}")"
dest="$(realpath -m "${2:-$root/.carry/fuzz}")"
shift $(( $# < 2 ? $# : 2 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors safetensors_index model_config draft_config plan_reader tokenizer_files tokenizer_codec chat_template ir_parser)
[ -f "$build/CMakeCache.txt" ] || { echo "stage.sh: $build is not a build tree (tests/fuzz/run.sh --fast --build-only)" >&2; exit 1; }
sanitizers=$(sed -n 's/^KPLAN_SANITIZERS:STRING=//p' "$build/CMakeCache.txt"); sanitizers=${sanitizers:-address,undefined}
flags=$(sed -n 's/^CMAKE_CXX_FLAGS_RELWITHDEBINFO:STRING=//p' "$build/CMakeCache.txt" | tr ' ' '_')
strip=$(command -v llvm-strip-16 || command -v strip)
mkdir -p "$dest"
touch "$dest/MANIFEST"
for t in "${targets[@]}"; do
  src="$build/fuzz/fuzz_$t"
  [ -x "$src" ] || { echo "stage.sh: no $src (ninja -C $build fuzz_$t)" >&2; exit 1; }
  extra=$(ldd "$src" | awk '{print $1}' | grep -vE '^(linux-vdso\.so|/lib64/ld-linux-x86-64\.so|libc\.so|libm\.so|libgcc_s\.so|libstdc\+\+\.so|libresolv\.so|libpcre2-8\.so)' || true)
  [ -z "$extra" ] || { echo "stage.sh: fuzz_$t needs libraries the device may lack: $extra" >&2; exit 1; }
  "$strip" --strip-all -o "$dest/fuzz_$t" "$src"
  gzip -9 -f "$dest/fuzz_$t"
  awk -v t="$t" '$1 != t' "$dest/MANIFEST" > "$dest/MANIFEST.new"
  echo "$t $sanitizers $flags $build $(date -u +%FT%TZ)" >> "$dest/MANIFEST.new"
  mv "$dest/MANIFEST.new" "$dest/MANIFEST"
done
# libpcre2-8 travels too, in case the device has none (fuzz_long.sh puts DEST on LD_LIBRARY_PATH).
pcre=$(ldd "$build/fuzz/fuzz_${targets[0]}" | awk '$1 ~ /^libpcre2-8/ {print $3}')
[ -z "$pcre" ] || cp -L "$pcre" "$dest/"
du -sh "$dest"
ls -l "$dest"
