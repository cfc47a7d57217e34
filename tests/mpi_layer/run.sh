#!/bin/bash
# The MPI layer's own tests: builds the programs of tests/mpi_layer with an
# mpicc and runs them with an mpiexec at 1 (singleton), 2 and 4 ranks, each
# under a hard timeout; checks the wrappers' options; checks that
# MPI_ERRORS_ARE_FATAL ends the job naming the call and the rank.
# usage: run.sh MPICC MPIEXEC [core]
#   core: also run p2p_core (needs nexar_iprobe / _cancel / _issend).
set -u
mpicc=$1
mpiexec=$2
core=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh" mpi_layer

progs="singleton dtype p2p comm errors fatal"
[ "$core" = core ] && progs="$progs p2p_core"
for p in $progs; do
  "$mpicc" -Wall -Wextra -Werror -o "$tmp/$p" "$here/$p.c" \
    >"$tmp/out" 2>"$tmp/err" || fail "compile $p"
done

# run NAME NP: runs $tmp/NAME on NP ranks (0: no mpiexec) and expects the
# line "NAME: OK".
run() {
  local name=$1 np=$2
  echo "== $name -n $np"
  if [ "$np" = 0 ]; then
    timeout 60 "$tmp/$name" >"$tmp/out" 2>"$tmp/err"
  else
    timeout 120 "$mpiexec" -n "$np" "$tmp/$name" >"$tmp/out" 2>"$tmp/err"
  fi || fail "$name on $np ranks (exit $?)"
  grep -q "^$name: OK" "$tmp/out" || fail "$name on $np ranks: no OK line"
}

run singleton 0
run dtype 0
for np in 2 4; do
  for p in dtype p2p comm errors; do run $p $np; done
  [ "$core" = core ] && run p2p_core $np
done
run p2p 3

echo "== fatal"
timeout 60 "$mpiexec" -n 2 "$tmp/fatal" >"$tmp/out" 2>"$tmp/err" &&
  fail "fatal: the job did not fail"
grep -q "MPI_Send (rank 0): rank 7 is not in 0..1" "$tmp/err" ||
  fail "fatal: no message naming MPI_Send and rank 0"
grep -q "rank 0 still running" "$tmp/out" && fail "fatal: rank 0 went on"

echo "== wrappers"
"$mpicc" -showme:compile | grep -q -- "-I" || fail "-showme:compile"
"$mpicc" -showme:link | grep -q -- "-lnexar-mpi" || fail "-showme:link"
"$mpicc" -show x.c | grep -q "x.c" || fail "-show"
"$mpicc" -compile_info | grep -q -- "-I" || fail "-compile_info"
"$mpicc" -link-info | grep -q -- "-lnexar-mpi" || fail "-link-info"
"$mpicc" -c -o "$tmp/s.o" "$here/singleton.c" >"$tmp/out" 2>"$tmp/err" ||
  fail "mpicc -c"
"$mpicc" -o "$tmp/s2" "$tmp/s.o" >"$tmp/out" 2>"$tmp/err" || fail "link"
NEXAR_MPICC_CC=false "$mpicc" -c "$here/singleton.c" -o "$tmp/x.o" \
  2>/dev/null && fail "NEXAR_MPICC_CC not used"
cat >"$tmp/env.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  printf("env %d %s %s\n", r, getenv("MPI_LAYER_X") ? getenv("MPI_LAYER_X") : "-", argc > 1 ? argv[1] : "-");
  MPI_Finalize();
  return 0;
}
C
"$mpicc" -o "$tmp/env" "$tmp/env.c" >"$tmp/out" 2>"$tmp/err" || fail "env"
printf 'localhost slots=4\n# comment\n127.0.0.1\n' >"$tmp/hosts"
timeout 60 "$mpiexec" -np 3 --oversubscribe --allow-run-as-root \
  -x MPI_LAYER_X=yes --host localhost,127.0.0.1 -f "$tmp/hosts" \
  "$tmp/env" arg1 >"$tmp/out" 2>"$tmp/err" || fail "mpiexec options"
[ "$(grep -c '^env [0-2] yes arg1$' "$tmp/out")" = 3 ] ||
  fail "mpiexec -x / arguments"
timeout 60 "$mpiexec" -n 2 --host no-such-host.invalid "$tmp/env" \
  >"$tmp/out" 2>"$tmp/err" && fail "a remote host was accepted"
grep -q "not this host" "$tmp/err" || fail "no message for a remote host"
echo "== exports"
# libnexar-mpi exports MPI_* / MPIX_* only, and every function mpi.h
# declares (the collectives once mpi/coll*.c exist).
lib="$("$mpicc" -showme:libdirs)/libnexar-mpi.so"
nm -D --defined-only "$lib" | awk '{ print $NF }' | sort -u >"$tmp/exported"
grep -v -e '^MPI_' -e '^MPIX_' "$tmp/exported" >"$tmp/out"
[ -s "$tmp/out" ] && fail "libnexar-mpi exports other names (in $tmp/out)"
proto="$here/../../mpi/include/mpi_proto.h"
sed -n 's/^[A-Za-z_ ]* \**\(MPIX\{0,1\}_[A-Za-z0-9_]*\)(.*/\1/p' "$proto" |
  sort -u >"$tmp/declared"
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/missing"
if ! ls "$here"/../../mpi/coll*.c >/dev/null 2>&1; then
  sed -n '/^\/\* Collectives/,/^$/p' "$proto" |
    grep -oE ' (MPI_[A-Za-z0-9_]+)\(' | tr -d ' (' | sort -u >"$tmp/coll"
  comm -23 "$tmp/missing" "$tmp/coll" >"$tmp/out"
else
  cp "$tmp/missing" "$tmp/out"
fi
[ -s "$tmp/out" ] && fail "declared in mpi.h but not exported (in $tmp/out)"
echo "mpi_layer: OK"
