#!/usr/bin/env bash
# test_exports: the shared library exports the public API only. Lists the
# defined dynamic symbols of libnexar.so and fails on any name that is not
# nexar_* (or is an internal nexar__*), and on any public function declared
# in include/nexar.h that is not exported.
#
# usage: test_exports.sh LIBNEXAR_SO NEXAR_H
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 LIBNEXAR_SO NEXAR_H" >&2
  exit 2
fi
. "$(dirname "$0")/lib.sh" test_exports

nm -D --defined-only "$1" >"$tmp/nm" || fail "nm -D $1"
awk '{ print $NF }' "$tmp/nm" | sort -u >"$tmp/exported"
n=$(wc -l <"$tmp/exported")
[ "$n" -gt 0 ] || fail "no defined dynamic symbols in $1"
grep -v '^nexar_' "$tmp/exported" >"$tmp/out"
grep '^nexar__' "$tmp/exported" >>"$tmp/out"
[ -s "$tmp/out" ] && fail "$1 exports names outside the public API (below)"
# Every function the header declares is there.
grep -o 'NEXAR_EXTERN[^(;]*(' "$2" | grep -o 'nexar_[a-z0-9_]*($' |
  tr -d '(' | sort -u >"$tmp/declared"
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/out"
[ -s "$tmp/out" ] && fail "declared in $2 but not exported (below)"
comm -13 "$tmp/declared" "$tmp/exported" >"$tmp/out"
[ -s "$tmp/out" ] && fail "exported but not declared in $2 (below)"
echo "test_exports: $n symbols, all nexar_*, as declared in nexar.h"
