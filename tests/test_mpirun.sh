#!/usr/bin/env bash
# test_mpirun: nexar programs under Open MPI's mpirun, whose PMIx server
# gives rank, world size and local rank and carries rank 0's seed address
# and a fresh secret through its key-value store and a fence (nothing set
# by hand):
#  - mpirun -n 4 launch_check: every rank reports launcher pmix, its rank
#    and local rank, and an allreduce checked bit for bit;
#  - mpirun -n 4 ddp_digits: the same weights, bit for bit, as
#    nexar-run -n 4 ddp_digits;
#  - Open MPI's variables without PMIx (NEXAR_LAUNCHER=ompi, secret from a
#    file): launch_check again.
# mpirun comes from Debian's openmpi-bin (scripts/install-deps.sh); as root
# it needs --allow-run-as-root, and --oversubscribe places 4 ranks on fewer
# cores.
#
# usage: test_mpirun.sh LAUNCH_CHECK NEXAR_RUN DDP_DIGITS COMPARE_WEIGHTS
set -u
if [ $# -ne 4 ]; then
  echo "usage: $0 LAUNCH_CHECK NEXAR_RUN DDP_DIGITS COMPARE_WEIGHTS" >&2
  exit 2
fi
check=$1 nexar_run=$2 ddp=$3 compare=$4
. "$(dirname "$0")/lib.sh" test_mpirun
# Under `make asan`: libpmix's own leaks are not nexar's (tests/lsan.supp).
LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp
export LSAN_OPTIONS

command -v mpirun >/dev/null ||
  fail "mpirun is not installed (Debian's openmpi-bin: run scripts/install-deps.sh)"
mpi=(mpirun --oversubscribe -n 4)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)

# run NAME CMD...: CMD under a hard timeout, output in $tmp/NAME; fails
# unless it exits 0.
run() {
  local name=$1
  shift
  timeout 120 "$@" >"$tmp/$name" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || {
    cat "$tmp/$name" >&2
    fail "$name: exit status $rc"
  }
}

checks_ok() { # NAME LAUNCHER: four ranks ok, each under LAUNCHER
  for r in 0 1 2 3; do
    grep -qxF "launch_check: rank $r of 4, local $r of 4, allreduce ok" \
      "$tmp/$1" || fail "$1: no ok line for rank $r"
  done
  [ "$(grep -c "launcher: $2 " "$tmp/$1")" -eq 4 ] ||
    fail "$1: not every rank says launcher $2"
  grep "launcher: $2 .*rank 0 of 4" "$tmp/$1" | grep -o "launcher: .*"
  grep "launch_check:" "$tmp/$1" | sort
}

echo "== mpirun -n 4 launch_check (PMIx)"
run pmix "${mpi[@]}" -x NEXAR_DEBUG=INFO -x NEXAR_DEBUG_SUBSYS=INIT "$check"
checks_ok pmix pmix
grep -q "launcher: pmix .*run by this process" "$tmp/pmix" ||
  fail "pmix: rank 0 did not run the embedded seed"

echo "== mpirun -n 4 ddp_digits, against nexar-run -n 4 ddp_digits"
run ddp_mpirun "${mpi[@]}" "$ddp" --weights-out "$tmp/w_mpirun"
run ddp_nexar "$nexar_run" -n 4 -t 110 -- "$ddp" --weights-out "$tmp/w_nexar"
grep "^final heldout_acc .* world 4 " "$tmp/ddp_mpirun" ||
  fail "ddp under mpirun: no final line for world 4"
run compare "$compare" "$tmp/w_nexar" "$tmp/w_mpirun" 0
cat "$tmp/compare"
cmp -s "$tmp/w_nexar" "$tmp/w_mpirun" ||
  fail "the weights of mpirun's and nexar-run's jobs differ"
echo "weights identical, byte for byte"

echo "== mpirun -n 4 launch_check, Open MPI's variables (NEXAR_LAUNCHER=ompi)"
head -c 32 /dev/urandom | base64 >"$tmp/secret"
run ompi "${mpi[@]}" -x NEXAR_LAUNCHER=ompi -x NEXAR_SECRET_FILE="$tmp/secret" \
  -x NEXAR_DEBUG=INFO -x NEXAR_DEBUG_SUBSYS=INIT "$check"
checks_ok ompi ompi
! grep -qF -- "$(cat "$tmp/secret")" "$tmp/ompi" ||
  fail "ompi: the secret is in the output"
echo "PASS"
