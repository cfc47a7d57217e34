#!/usr/bin/env bash
# test_coll_hier_netns: two-level collectives across real hosts, played by
# network namespaces (docs/communicators.md). Three namespaces hold 3, 2
# and 2 of 7 ranks (placed round robin: 0 3 5 | 1 4 | 2 6), joined through
# a bridge in a fourth namespace where the seed runs. Each namespace has its
# own host key (boot id and namespace inode), with no NEXAR_HOST_KEY.
#   1. automatic algorithms (two-level): `test_coll_hier --check big`;
#   2. flat algorithms forced: the same checks, against the same serial
#      reference, so both give the same bits;
#   3. rank 6 forces the ring allreduce: every rank's allreduce fails with
#      NEXAR_ERR_MISMATCH naming [hier] and [ring], which shows the others
#      chose the two-level algorithm from the roster on their own.
# Skipped (exit 77) where `ip netns` is not permitted.
#
# usage: test_coll_hier_netns.sh NEXAR_SEED TEST_COLL_HIER
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 NEXAR_SEED TEST_COLL_HIER" >&2
  exit 2
fi
seed_bin=$1 prog=$2
. "$(dirname "$0")/lib.sh" test_coll_hier_netns
id=nxh$$
hub=${id}h
spaces=("${id}a" "${id}b" "${id}c")
seed_pid=
cleanup() {
  [ -n "$seed_pid" ] && kill "$seed_pid" 2>/dev/null
  for ns in "$hub" "${spaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

if ! ip netns add "$hub" 2>"$tmp/err" ||
  ! ip netns exec "$hub" true 2>>"$tmp/err"; then
  echo "SKIP: network namespaces are not permitted here ($(head -c 200 "$tmp/err"))"
  exit 77
fi
ip -n "$hub" link set lo up || fail "lo up in $hub"
ip -n "$hub" link add br0 type bridge || fail "bridge in $hub"
ip -n "$hub" addr add 10.77.0.254/24 dev br0 || fail "bridge address"
ip -n "$hub" link set br0 up || fail "bridge up"
for k in 0 1 2; do
  ns=${spaces[$k]}
  ip netns add "$ns" || fail "ip netns add $ns"
  ip link add "${id}v$k" type veth peer name "${id}p$k" || fail "veth $k"
  ip link set "${id}v$k" netns "$hub" || fail "veth $k to $hub"
  ip link set "${id}p$k" netns "$ns" || fail "veth $k to $ns"
  ip -n "$hub" link set "${id}v$k" master br0 up || fail "veth $k on the bridge"
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.77.0.$((k + 1))/24" dev "${id}p$k" || fail "address $k"
  ip -n "$ns" link set "${id}p$k" up || fail "veth $k up"
done

export NEXAR_SECRET=test-coll-hier-netns NEXAR_WORLD_SIZE=7
export NEXAR_BOOTSTRAP_TIMEOUT_MS=20000 NEXAR_OP_TIMEOUT_MS=30000
host_of=(0 1 2 0 1 0 2) # rank -> namespace: 3 + 2 + 2

# job NAME ARGS...: a seed in the hub and 7 ranks in their namespaces, each
# running test_coll_hier ARGS; rank 6 gets $RANK6_ENV as well.
job() {
  local name=$1 port= r
  shift
  ip netns exec "$hub" "$seed_bin" --listen 10.77.0.254:0 --world-size 7 \
    2>"$tmp/seed" &
  seed_pid=$!
  port=$(seed_port "$tmp/seed")
  [ -n "$port" ] || fail "$name: nexar-seed printed no port: $(cat "$tmp/seed")"
  local pids=()
  for r in 0 1 2 3 4 5 6; do
    local k=${host_of[$r]} extra=
    [ "$r" = 6 ] && extra=${RANK6_ENV:-}
    ip netns exec "${spaces[$k]}" env NEXAR_RANK=$r \
      NEXAR_SEED=10.77.0.254:$port NEXAR_BIND_ADDR=10.77.0.$((k + 1)) $extra \
      timeout 60 "$prog" "$@" >"$tmp/out.$r" 2>"$tmp/err.$r" &
    pids+=($!)
  done
  local bad=
  for r in 0 1 2 3 4 5 6; do wait "${pids[$r]}" || bad="$bad $r"; done
  wait "$seed_pid"
  seed_pid=
  if [ -n "$bad" ]; then
    for r in 0 1 2 3 4 5 6; do echo "--- rank $r" >&2; cat "$tmp/err.$r" >&2; done
    fail "$name: ranks$bad failed"
  fi
  echo "$name: ok"
}

job "auto (two-level)" --check big
flat="NEXAR_ALGO_ALLREDUCE=rabenseifner NEXAR_ALGO_BCAST=binomial"
flat="$flat NEXAR_ALGO_REDUCE=binomial NEXAR_ALGO_ALLGATHER=ring"
flat="$flat NEXAR_ALGO_BARRIER=dissemination"
# shellcheck disable=SC2086
export $flat
job "flat forced" --check big
unset NEXAR_ALGO_ALLREDUCE NEXAR_ALGO_BCAST NEXAR_ALGO_REDUCE \
  NEXAR_ALGO_ALLGATHER NEXAR_ALGO_BARRIER
RANK6_ENV="NEXAR_ALGO_ALLREDUCE=ring NEXAR_COLL_PROBE_MS=200" \
  job "one rank forcing ring: mismatch names [hier]" --mismatch
