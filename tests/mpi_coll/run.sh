#!/usr/bin/env bash
# Builds the collective-path tests (coll_paths.c, coll_topo.c,
# coll_progress.c) with an MPI C compiler and runs each at np 1, 2, 3 and 4
# under a hard timeout; each run must print "NAME OK np N". coll_progress
# runs with NEXAR_OP_TIMEOUT_MS=20000 (unless set): a process that does not
# advance its pending collectives inside other MPI calls deadlocks there,
# and the short op timeout turns that into a failure within seconds. Works
# with any MPI, so the tests themselves can be checked against Open MPI and
# MPICH:
#   run.sh MPICC MPIEXEC [WORKDIR]
#   MPIEXEC_FLAGS="--allow-run-as-root --oversubscribe" \
#     run.sh mpicc.openmpi mpirun.openmpi
# Environment: MPIEXEC_FLAGS (extra launcher flags), CT_TIMEOUT (seconds per
# run, default 120), CT_NPS (default "1 2 3 4"), CT_PROGS (default all three),
# CT_CFLAGS (extra compiler flags, e.g. -fsanitize=address,undefined).
set -u
here=$(cd "$(dirname "$0")" && pwd)
mpicc=${1:?usage: run.sh MPICC MPIEXEC [WORKDIR]}
mpiexec=${2:?usage: run.sh MPICC MPIEXEC [WORKDIR]}
work=${3:-$(mktemp -d)}
mkdir -p "$work"
fail=0
for prog in ${CT_PROGS:-coll_paths coll_topo coll_progress}; do
  tmo=
  [ "$prog" = coll_progress ] && tmo=NEXAR_OP_TIMEOUT_MS=${NEXAR_OP_TIMEOUT_MS:-20000}
  if ! "$mpicc" -O1 -Wall ${CT_CFLAGS:-} -o "$work/$prog" "$here/$prog.c"; then
    echo "FAIL: $prog does not build" >&2
    fail=1
    continue
  fi
  for np in ${CT_NPS:-1 2 3 4}; do
    out=$(env $tmo timeout -k 5 "${CT_TIMEOUT:-120}" "$mpiexec" \
      ${MPIEXEC_FLAGS:-} -n "$np" "$work/$prog" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^$prog OK np $np\$" <<<"$out"; then
      echo "FAIL: $prog np $np (exit $rc)" >&2
      tail -n 30 <<<"$out" >&2
      fail=1
    else
      echo "$prog OK np $np"
    fi
  done
done
exit $fail
