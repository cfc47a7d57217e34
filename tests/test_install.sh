#!/usr/bin/env bash
# test_install: nexar installed like any C library (docs/installing.md).
# Installs the build into a scratch prefix, checks the files, then builds
# tests/install/consumer.c outside the source tree three ways: with
# `pkg-config --cflags --libs nexar`, with find_package(nexar CONFIG) and
# nexar::nexar (plus nexar::nexar_static), and statically linked against
# libnexar.a with `pkg-config --static --libs nexar`; runs each on 2 ranks
# under the installed nexar-run (no LD_LIBRARY_PATH) and checks the
# allreduce sum every rank prints.
#
# usage: test_install.sh CMAKE BUILD_DIR CC [CFLAGS]
# (CFLAGS: for the consumer builds; -fsanitize=... when nexar has it)
set -u

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 CMAKE BUILD_DIR CC [CFLAGS]" >&2
  exit 2
fi
cmake=$1 build=$2 cc=$3 cflags=${4:-}
src=$(cd "$(dirname "$0")/install" && pwd)
. "$(dirname "$0")/lib.sh" test_install
unset LD_LIBRARY_PATH
p=$tmp/prefix

echo "== cmake --install"
"$cmake" --install "$build" --prefix "$p" >"$tmp/out" 2>"$tmp/err" ||
  fail "cmake --install"
ver=$(sed -n 's/^#define NEXAR_VERSION_STRING "\(.*\)"$/\1/p' \
  "$p/include/nexar_version.h")
[ -n "$ver" ] || fail "no NEXAR_VERSION_STRING in nexar_version.h"
major=${ver%%.*}
for f in include/nexar.h lib/libnexar.a "lib/libnexar.so.$ver" \
  lib/pkgconfig/nexar.pc lib/cmake/nexar/nexarConfig.cmake \
  lib/cmake/nexar/nexarConfigVersion.cmake; do
  [ -f "$p/$f" ] || fail "not installed: $f"
done
[ "$(readlink "$p/lib/libnexar.so.$major")" = "libnexar.so.$ver" ] ||
  fail "libnexar.so.$major is not a link to libnexar.so.$ver"
[ "$(readlink "$p/lib/libnexar.so")" = "libnexar.so.$major" ] ||
  fail "libnexar.so is not a link to libnexar.so.$major"
readelf -d "$p/lib/libnexar.so.$ver" >"$tmp/out"
grep -qF "Library soname: [libnexar.so.$major]" "$tmp/out" || fail "SONAME"
for t in nexar-seed nexar-run nexar-perf; do
  "$p/bin/$t" --version >"$tmp/out" 2>"$tmp/err" || fail "$t --version"
  grep -qxF "$t (nexar) $ver" "$tmp/out" || fail "$t --version"
  [ -s "$p/share/man/man1/$t.1" ] || fail "no man page for $t"
done

export PKG_CONFIG_PATH=$p/lib/pkgconfig
[ "$(pkg-config --modversion nexar)" = "$ver" ] || fail "pkg-config version"

# run2 NAME PROGRAM: runs PROGRAM on 2 ranks under the installed nexar-run
# and checks that both ranks printed the sum 1 + 2.
run2() {
  timeout 60 "$p/bin/nexar-run" -n 2 -t 30 -- "$2" >"$tmp/out" 2>"$tmp/err" ||
    fail "$1: nexar-run exit status $?"
  for r in 0 1; do
    grep -qxF "[$r] rank $r of 2: sum 3" "$tmp/out" ||
      fail "$1: rank $r did not print the sum 3"
  done
  echo "$1: both ranks got the sum 3"
}

echo "== pkg-config"
# shellcheck disable=SC2046,SC2086
"$cc" $cflags -o "$tmp/consumer_pc" "$src/consumer.c" $(pkg-config --cflags --libs nexar) \
  -Wl,-rpath,"$(pkg-config --variable=libdir nexar)" >"$tmp/out" 2>"$tmp/err" ||
  fail "pkg-config build"
run2 pkg-config "$tmp/consumer_pc"

echo "== pkg-config --static, libnexar.a"
libs=$(pkg-config --static --libs nexar | sed 's/-lnexar /-l:libnexar.a /')
# shellcheck disable=SC2046,SC2086
"$cc" $cflags -o "$tmp/consumer_a" "$src/consumer.c" $(pkg-config --cflags nexar) $libs \
  >"$tmp/out" 2>"$tmp/err" || fail "static build: $libs"
readelf -d "$tmp/consumer_a" >"$tmp/out"
grep -q 'libnexar' "$tmp/out" && fail "static build needs libnexar.so"
run2 static "$tmp/consumer_a"

echo "== find_package(nexar CONFIG)"
"$cmake" -S "$src" -B "$tmp/cb" -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$cflags" \
  -DCMAKE_PREFIX_PATH="$p" >"$tmp/out" 2>"$tmp/err" || fail "cmake configure"
"$cmake" --build "$tmp/cb" >"$tmp/out" 2>"$tmp/err" || fail "cmake build"
run2 cmake "$tmp/cb/consumer"
run2 cmake-static "$tmp/cb/consumer_static"
echo "test_install: OK"
