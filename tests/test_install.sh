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
for t in nexar-seed nexar-run nexar-perf nexar-inspect; do
  "$p/bin/$t" --version >"$tmp/out" 2>"$tmp/err" || fail "$t --version"
  grep -qxF "$t (nexar) $ver" "$tmp/out" || fail "$t --version"
  [ -s "$p/share/man/man1/$t.1" ] || fail "no man page for $t"
done

# The flight-recorder tool (a python3 script) is installed and runs.
"$p/bin/nexar-trace" --help | grep -q '^usage: nexar-trace' ||
  fail "nexar-trace --help"

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

echo "== the MPI layer (docs/mpi.md)"
for f in bin/nexar-mpicc bin/nexar-mpicxx bin/nexar-mpiexec \
  libexec/nexar/mpi/bin/mpicc libexec/nexar/mpi/bin/mpicxx \
  libexec/nexar/mpi/bin/mpic++ libexec/nexar/mpi/bin/mpiexec \
  libexec/nexar/mpi/bin/mpirun include/nexar/mpi/mpi.h \
  lib/pkgconfig/nexar-mpi.pc "lib/libnexar-mpi.so.$ver"; do
  [ -e "$p/$f" ] || fail "not installed: $f"
done
cat >"$tmp/mpi_sum.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, v, got = -1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  v = rank + 1;
  MPI_Sendrecv(&v, 1, MPI_INT, 1 - rank, 0, &got, 1, MPI_INT, 1 - rank, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  printf("rank %d of %d: sum %d\n", rank, size, v + got);
  MPI_Finalize();
  return 0;
}
C
PATH=$p/libexec/nexar/mpi/bin:$PATH mpicc -o "$tmp/mpi_sum" "$tmp/mpi_sum.c" \
  >"$tmp/out" 2>"$tmp/err" || fail "installed mpicc"
PATH=$p/libexec/nexar/mpi/bin:$PATH timeout 60 mpiexec -n 2 "$tmp/mpi_sum" \
  >"$tmp/out" 2>"$tmp/err" || fail "installed mpiexec"
for r in 0 1; do
  grep -qxF "rank $r of 2: sum 3" "$tmp/out" || fail "mpi: rank $r"
done
# shellcheck disable=SC2046,SC2086
"$cc" $cflags -o "$tmp/mpi_sum_pc" "$tmp/mpi_sum.c" $(pkg-config --cflags --libs nexar-mpi) \
  >"$tmp/out" 2>"$tmp/err" || fail "pkg-config nexar-mpi build"
timeout 60 "$p/bin/nexar-mpiexec" -n 2 "$tmp/mpi_sum_pc" >"$tmp/out" \
  2>"$tmp/err" || fail "nexar-mpiexec"
grep -qxF "rank 1 of 2: sum 3" "$tmp/out" || fail "pkg-config nexar-mpi run"
echo "test_install: OK"
