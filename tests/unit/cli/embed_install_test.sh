#!/usr/bin/env bash
# Embedding kplan (issue 11): `cmake --install BUILD --component runtime` into a temporary prefix
# gives libkplan.so, kplan/kplan.h and kplan.pc; a C program calling kplan_version() builds with
# $(pkg-config --cflags --libs kplan) and runs; the library exports the kplan_* C symbols and
# nothing else; the installed Python binding finds the library beside it.
set -euo pipefail
build=$1
prefix=$(mktemp -d /tmp/kplan_embed_XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" --component runtime >/dev/null
pc=$(find "$prefix" -name kplan.pc)
[ -n "$pc" ] || fail "no kplan.pc under $prefix"
export PKG_CONFIG_PATH=$(dirname "$pc")
[ "$(pkg-config --modversion kplan)" = "0.1.0" ] || fail "pkg-config --modversion kplan: $(pkg-config --modversion kplan)"
libdir=$(pkg-config --variable=libdir kplan)
[ -f "$libdir/libkplan.so" ] || fail "no libkplan.so in $libdir"
[ -f "$(pkg-config --variable=includedir kplan)/kplan/kplan.h" ] || fail "no kplan/kplan.h"

cat > "$prefix/hello.c" <<'C'
#include <kplan/kplan.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  printf("kplan %s\n", kplan_version());
  kplan_plan* plan = NULL;
  if (kplan_plan_open("/nonexistent/model.kplan", NULL, &plan) == KPLAN_STATUS_OK) return 1;
  printf("error: %s\n", kplan_error_last());
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  return strcmp(kplan_version(), "0.1.0") != 0 || g.top_p != 1.0 || g.max_new != 16;
}
C
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$prefix/hello.c" $(pkg-config --cflags --libs kplan) -o "$prefix/hello"
out=$(LD_LIBRARY_PATH="$libdir" "$prefix/hello") || fail "the C program failed: $out"
echo "$out"
grep -qx "kplan 0.1.0" <<<"$out" || fail "kplan_version() printed: $out"
grep -q "^error: .*nonexistent" <<<"$out" || fail "kplan_error_last() after a failed open: $out"

extra=$(nm -D --defined-only "$libdir/libkplan.so" | awk '{print $3}' | grep -v '^kplan_' | grep -v '^KPLAN_0$' || true)
[ -z "$extra" ] || fail "libkplan.so exports more than kplan_*: $(head -5 <<<"$extra")"

v=$(PYTHONPATH="$prefix/lib/python3/dist-packages" KPLAN_LIBRARY= python3 -c 'import kplan; print(kplan.version(), kplan.library_path())')
grep -q "^0.1.0 $prefix" <<<"$v" || fail "the installed Python binding: $v"
echo "PASS: installed to $prefix; pkg-config build and run; exports kplan_* only; Python finds $libdir/libkplan.so"
