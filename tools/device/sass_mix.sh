#!/usr/bin/env bash
# The machine code of a plan's kernels: size and instruction mix per kernel, for reading where a
# kernel spends its issue slots (the 1-token MoE and MLA kernels are issue- and fetch-bound on the
# H200, bench/RESULTS.md 2026-12-06 07:20–08:05) without a profiler run.
#
#   tools/device/sass_mix.sh CACHE_DIR [REGEX]
#
# CACHE_DIR: a kernel cache a `kplan compile` filled (KPLAN_CACHE_DIR=CACHE_DIR kplan compile ...;
# compiler/codegen/kernel_cache.cc: a 40-byte header, then the cubin). REGEX picks kernels by id
# (default: all). Prints per kernel the code bytes (readelf) and, where cuobjdump is installed (the
# GPU machine has it, this one has not), the instruction count and the share of each opcode group:
# tensor-core MMAs, global / shared loads and stores, FP32 / packed math, integer and address
# math, conversions and moves, control flow and barriers.
set -uo pipefail
dir=${1:?usage: sass_mix.sh CACHE_DIR [REGEX]}
regex=${2:-.}
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$dir"/*.kcubin; do
  [ -e "$f" ] || { echo "sass_mix: no .kcubin files in $dir" >&2; exit 1; }
  id=$(basename "$f"); id=${id%%.*}
  [[ $id =~ $regex ]] || continue
  tail -c +41 "$f" > "$tmp/k.cubin"
  bytes=$(readelf -S -W "$tmp/k.cubin" 2>/dev/null | python3 -c 'import sys; print(sum(int(f[4], 16) for f in (l.split("]", 1)[1].split() for l in sys.stdin if "]" in l) if len(f) > 4 and f[0].startswith(".text.")) or "?")')
  if [ -z "$cuobjdump" ]; then
    printf '%8s B  %s\n' "${bytes:-?}" "$id"
    continue
  fi
  "$cuobjdump" -sass "$tmp/k.cubin" 2>/dev/null | python3 -c '
import re, sys
groups = [("mma", r"^(HMMA|IMMA|HGMMA|QGMMA)"), ("ldg/stg", r"^(LDG|STG|RED|ATOM|LDGSTS|LDC)"),
          ("lds/sts", r"^(LDS|STS|LDSM)"), ("fp32", r"^(FFMA|FADD|FMUL|FMNMX|MUFU|FSETP|FSEL)"),
          ("packed", r"^(HFMA2|HADD2|HMUL2|HMNMX2)"), ("int/addr", r"^(IMAD|IADD3|LEA|SHF|LOP3|ISETP|IMNMX|VIMNMX|VIADD|SEL|IABS|PRMT|BMSK|FLO|POPC)"),
          ("cvt/mov", r"^(F2F|F2I|I2F|MOV|CS2R|S2R|S2UR|R2UR|UMOV|ULDC|SHFL|P2R|R2P)"), ("control", r"^(BRA|BSSY|BSYNC|BAR|EXIT|RET|CALL|WARPSYNC|NOP|DEPBAR|MEMBAR|ERRBAR)")]
counts, total = {g: 0 for g, _ in groups}, 0
for line in sys.stdin:
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)", line)
    if not m:
        continue
    total += 1
    for g, pat in groups:
        if re.match(pat, m.group(1)):
            counts[g] += 1
            break
shares = "  ".join(f"{g} {100 * c / max(total, 1):4.1f}%" for g, c in counts.items())
print(f"{total:7d} instr  {shares}")
' > "$tmp/mix.txt"
  printf '%8s B  %s  %s\n' "${bytes:-?}" "$(cat "$tmp/mix.txt")" "$id"
done
