#!/usr/bin/env bash
# test_launchers: a job started the way torchrun and a Kubernetes Indexed
# Job start one, with exactly the variables those systems set (and the
# NEXAR_* a manifest adds), across two network namespaces this test creates
# (hosts 10.77.0.1 and 10.77.0.2 on a veth pair; names in each namespace's
# /etc/hosts, as `ip netns exec` mounts /etc/netns/NAME/hosts), so that the
# rendezvous host is resolved, rank 0 runs the embedded seed and the others
# dial it from the other host. Rank 0 starts last, after the others are
# already dialling. Every process runs launch_check (an allreduce checked bit
# for bit) under a hard timeout. Skipped (exit 77) where network namespaces
# cannot be made (not root, no ip).
#
# usage: test_launchers.sh LAUNCH_CHECK
set -u
if [ $# -ne 1 ]; then
  echo "usage: $0 LAUNCH_CHECK" >&2
  exit 2
fi
check=$1
. "$(dirname "$0")/lib.sh" test_launchers

a=nxla$$
b=nxlb$$
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null ||
  ! ip netns add "$a" 2>"$tmp/err"; then
  echo "SKIP: cannot create network namespaces (needs root and iproute2):" \
    "$(cat "$tmp/err" 2>/dev/null)"
  exit 77
fi
cleanup() {
  ip netns pids "$a" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$b" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "/etc/netns/$a" "/etc/netns/$b" "$tmp"
}
trap cleanup EXIT
ip netns add "$b" || fail "ip netns add $b"
ip -n "$a" link add va type veth peer name vb netns "$b" || fail "veth pair"
ip -n "$a" addr add 10.77.0.1/24 dev va
ip -n "$b" addr add 10.77.0.2/24 dev vb
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set va up
ip -n "$b" link set vb up
for ns in "$a" "$b"; do
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.77.0.1 trainer-a ddp-0.nexar-ddp\n10.77.0.2 trainer-b ddp-1.nexar-ddp\n' \
    >"/etc/netns/$ns/hosts"
done
head -c 32 /dev/urandom | base64 >"$tmp/secret"
chmod 600 "$tmp/secret"
port=$((29500 + $$ % 2000))

# start NS NAME VAR=VALUE...: launch_check in namespace NS with only the
# given environment (and PATH), output in $tmp/NAME.
start() {
  local ns=$1 name=$2
  shift 2
  timeout 30 ip netns exec "$ns" env -i PATH="$PATH" "$@" \
    NEXAR_DEBUG=INFO NEXAR_DEBUG_SUBSYS=INIT "$check" >"$tmp/$name" 2>&1 &
}

# expect NAME LINE: process NAME exited 0 (its status in $tmp/NAME.rc) and
# printed LINE.
expect() {
  grep -qxF -- "$2" "$tmp/$1" || {
    cat "$tmp/$1" >&2
    fail "$1: missing '$2'"
  }
  ! grep -qF -- "$(cat "$tmp/secret")" "$tmp/$1" || fail "$1: the secret is in its output"
}

echo "== torchrun: 4 ranks, 2 per host, MASTER_ADDR=trainer-a (resolved)"
t0=$SECONDS
for r in 3 2 1 0; do
  ns=$a
  [ "$r" -ge 2 ] && ns=$b
  [ "$r" -eq 0 ] && sleep 1 # the others dial before the seed is up
  start "$ns" "torch$r" RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) \
    LOCAL_WORLD_SIZE=2 GROUP_RANK=$((r / 2)) ROLE_RANK=$r ROLE_WORLD_SIZE=4 \
    ROLE_NAME=default GROUP_WORLD_SIZE=2 MASTER_ADDR=trainer-a \
    MASTER_PORT=$port TORCHELASTIC_RUN_ID=none TORCHELASTIC_RESTART_COUNT=0 \
    TORCHELASTIC_MAX_RESTARTS=0 OMP_NUM_THREADS=1 \
    NEXAR_SECRET_FILE="$tmp/secret"
done
wait
for r in 0 1 2 3; do
  expect "torch$r" "launch_check: rank $r of 4, local $((r % 2)) of 2, allreduce ok"
  grep -m1 -o "launcher: .*" "$tmp/torch$r"
done
grep -q "launcher: torchrun.*seed 10.77.0.1:$port, run by this process" \
  "$tmp/torch0" || fail "rank 0 did not run the embedded seed"
grep -q "launcher: torchrun.*seed 10.77.0.1:$port\$" "$tmp/torch3" ||
  fail "rank 3 did not dial 10.77.0.1:$port"
echo "torchrun: 4 ranks ok in $((SECONDS - t0)) s"

echo "== Kubernetes Indexed Job: 2 pods, headless Service nexar-ddp"
t0=$SECONDS
for i in 1 0; do
  ns=$a
  [ "$i" -eq 1 ] && ns=$b
  [ "$i" -eq 0 ] && sleep 1
  start "$ns" "pod$i" JOB_COMPLETION_INDEX=$i HOSTNAME=ddp-$i \
    KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 \
    NEXAR_WORLD_SIZE=2 NEXAR_K8S_SERVICE=nexar-ddp \
    NEXAR_SECRET_FILE="$tmp/secret"
done
wait
for i in 0 1; do
  # One pod per host: the local ranks come from the roster's addresses.
  expect "pod$i" "launch_check: rank $i of 2, local 0 of 1, allreduce ok"
  grep -m1 -o "launcher: .*" "$tmp/pod$i"
done
grep -q "launcher: k8s.*seed 10.77.0.1:29500, run by this process" \
  "$tmp/pod0" || fail "pod 0 did not run the embedded seed on 29500"
echo "k8s: 2 pods ok in $((SECONDS - t0)) s"
echo "PASS"
