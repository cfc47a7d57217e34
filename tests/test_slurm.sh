#!/usr/bin/env bash
# test_slurm: a real single-node Slurm from Debian (slurm-wlm, munge),
# started by this test in a scratch directory: a fresh munge key and munged,
# then slurmctld and slurmd in the foreground with a generated slurm.conf
# (absolute paths, random ports, ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none, SelectType=select/cons_tres, a node of 2 CPUs). Then
#  - srun -n 4 --overcommit --mpi=pmix launch_check: rank, size, local rank
#    and the seed's address and a fresh secret from Slurm's PMIx server;
#  - srun -n 4 --overcommit --mpi=none launch_check: SLURM_PROCID,
#    SLURM_NTASKS, SLURM_LOCALID, the node list and a port derived from the
#    job and step ids, the secret from a file;
# each ending in an allreduce checked bit for bit on every rank; then
#  - srun -n 4 --mpi=pmix ddp_digits: the DDP example trains to a held-out
#    accuracy of at least 0.90 on world 4.
# The
# daemons are stopped by their process ids at the end, whatever happened.
#
# usage: test_slurm.sh LAUNCH_CHECK DDP_DIGITS
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 LAUNCH_CHECK DDP_DIGITS" >&2
  exit 2
fi
check=$1 ddp=$2
. "$(dirname "$0")/lib.sh" test_slurm
# Under `make asan`: libpmix's own leaks are not nexar's (tests/lsan.supp).
LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp
export LSAN_OPTIONS
d=$tmp

for p in munged slurmctld slurmd srun sinfo; do
  command -v "$p" >/dev/null ||
    fail "$p is not installed (Debian's slurm-wlm and munge: run scripts/install-deps.sh)"
done
[ "$(id -u)" -eq 0 ] || {
  echo "SKIP: the test's slurmd runs jobs as root and needs root"
  exit 77
}

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# A port pair below the ephemeral range (32768 up: a connection of another
# test may hold one there, and slurmctld then never answers), picked from
# the pid and moved on while either port has a listener.
base=$((20000 + ($$ % 6000) * 2))
for _ in $(seq 50); do
  [ -z "$(ss -Htln "( sport = :$base or sport = :$((base + 1)) )")" ] && break
  base=$((20000 + (base - 20000 + 2) % 12000))
done
host=$(hostname -s)
mkdir -p "$d/state" "$d/spool"
chmod 700 "$d"
dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
chmod 400 "$d/munge.key"
munged -F --force --key-file="$d/munge.key" --socket="$d/munge.sock" \
  --pid-file="$d/munged.pid" --log-file="$d/munged.log" \
  --seed-file="$d/munged.seed" >"$d/munged.out" 2>&1 &
pids+=($!)
cat >"$d/slurm.conf" <<EOF
ClusterName=nexartest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
AuthInfo=socket=$d/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
TmpFS=$d
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=nexar Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$d/slurm.conf
for _ in $(seq 50); do [ -S "$d/munge.sock" ] && break; sleep 0.1; done
[ -S "$d/munge.sock" ] || { cat "$d/munged.out" "$d/munged.log" >&2; fail "munged did not start"; }
slurmctld -D -f "$d/slurm.conf" >"$d/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$d/slurm.conf" -N "$host" >"$d/slurmd.out" 2>&1 &
pids+=($!)
# At most 40 s in all (the test's timeout, 300 s, is above the sum of every
# step's own), so that a daemon that never answers is reported with its logs.
state=
t_end=$((SECONDS + 40))
while [ $SECONDS -lt $t_end ]; do
  state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || {
  tail -20 "$d/slurmctld.log" "$d/slurmd.log" "$d/slurmctld.out" "$d/slurmd.out" >&2
  fail "the Slurm node is '$state', not idle"
}
echo "slurm: node $host idle; srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n' ' ')"

# srun_check NAME ARGS...: srun -n 4 of launch_check, 4 ok lines.
srun_check() {
  local name=$1
  shift
  timeout 60 srun -n 4 --overcommit -t 1 "$@" \
    --export=ALL,NEXAR_DEBUG=INFO,NEXAR_DEBUG_SUBSYS=INIT "$check" \
    >"$d/$name" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || { cat "$d/$name" >&2; fail "$name: srun exit status $rc"; }
  for r in 0 1 2 3; do
    grep -qxF "launch_check: rank $r of 4, local $r of 4, allreduce ok" \
      "$d/$name" || { cat "$d/$name" >&2; fail "$name: no ok line for rank $r"; }
  done
  grep -o "launcher: .*rank 0 of 4.*" "$d/$name"
  grep "launch_check:" "$d/$name" | sort
}

echo "== srun -n 4 --mpi=pmix"
srun_check pmix --mpi=pmix
[ "$(grep -c "launcher: pmix " "$d/pmix")" -eq 4 ] ||
  fail "pmix: not every rank says launcher pmix"

echo "== srun -n 4 --mpi=none, secret from a file"
head -c 32 /dev/urandom | base64 >"$d/secret"
NEXAR_SECRET_FILE=$d/secret srun_check none --mpi=none
[ "$(grep -c "launcher: slurm " "$d/none")" -eq 4 ] ||
  fail "none: not every rank says launcher slurm"
! grep -qF -- "$(cat "$d/secret")" "$d/none" || fail "the secret is in the output"

echo "== srun -n 4 --mpi=pmix ddp_digits"
timeout 100 srun -n 4 --overcommit -t 2 --mpi=pmix "$ddp" >"$d/ddp" 2>&1 || {
  cat "$d/ddp" >&2
  fail "ddp_digits under srun failed"
}
acc=$(awk '/^final heldout_acc / && $4 == "world" && $5 == 4 { print $3 }' \
  "$d/ddp")
grep "^final heldout_acc" "$d/ddp"
[ -n "$acc" ] || {
  cat "$d/ddp" >&2
  fail "ddp_digits: no 'final heldout_acc ... world 4' line"
}
awk -v a="$acc" 'BEGIN { exit !(a + 0 >= 0.90) }' ||
  fail "ddp_digits: held-out accuracy $acc < 0.90"
echo "PASS"
