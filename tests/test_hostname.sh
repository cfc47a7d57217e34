#!/usr/bin/env bash
# test_hostname: NEXAR_SEED given by host name (docs/configuration.md).
# Starts nexar-seed for 2 workers and runs PROGRAM (examples/split, which
# prints the world sum of the ranks) on 2 ranks with NEXAR_SEED=localhost:PORT,
# then with NEXAR_SEED=<this host's name>:PORT (resolved by getaddrinfo; that
# job is skipped when the name does not resolve to an IPv4 address), and
# checks that a name that does not resolve fails at nexar_init, at once,
# with an error naming NEXAR_SEED and the name.
#
# usage: test_hostname.sh NEXAR_SEED PROGRAM
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 NEXAR_SEED PROGRAM" >&2
  exit 2
fi
seed_bin=$1 prog=$2
. "$(dirname "$0")/lib.sh" test_hostname
export NEXAR_SECRET=test-hostname-secret NEXAR_WORLD_SIZE=2
export NEXAR_BOOTSTRAP_TIMEOUT_MS=20000
seed_pid=
trap '[ -n "$seed_pid" ] && kill "$seed_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

# job NAME IP: a seed on IP (any port), 2 workers bound to IP that reach
# it as NAME:PORT and advertise NAME to each other; both must print the
# world sum 0 + 1.
job() {
  local name=$1 ip=$2 port= r
  "$seed_bin" --listen "$ip:0" --world-size 2 2>"$tmp/seed" &
  seed_pid=$!
  port=$(seed_port "$tmp/seed")
  [ -n "$port" ] || fail "nexar-seed on $ip printed no port: $(cat "$tmp/seed")"
  for r in 0 1; do
    NEXAR_RANK=$r NEXAR_SEED=$name:$port NEXAR_BIND_ADDR=$ip \
      NEXAR_ADVERTISE_ADDR=$name \
      timeout 30 "$prog" >"$tmp/out.$r" 2>"$tmp/err.$r" &
  done
  wait %2 || { cat "$tmp"/err.*; fail "NEXAR_SEED=$name:$port: a rank failed"; }
  wait %3 || { cat "$tmp"/err.*; fail "NEXAR_SEED=$name:$port: a rank failed"; }
  wait "$seed_pid"
  seed_pid=
  for r in 0 1; do
    grep -q "world rank $r/2:.*world sum 1\$" "$tmp/out.$r" ||
      fail "NEXAR_SEED=$name:$port: rank $r: $(cat "$tmp/out.$r" "$tmp/err.$r")"
  done
  echo "NEXAR_SEED=$name:$port ($ip): both ranks got the world sum 1"
}

job localhost 127.0.0.1
name=$(hostname)
ip=$(getent ahostsv4 "$name" | awk 'NR == 1 { print $1 }')
if [ -n "$ip" ]; then
  job "$name" "$ip"
else
  echo "$name has no IPv4 address: the job by host name is skipped"
fi

t0=$SECONDS
NEXAR_SEED=no-such-host.invalid:1 timeout 30 "$prog" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "unresolvable seed: exit $rc"
grep -q "NEXAR_SEED='no-such-host.invalid:1'.*'no-such-host.invalid' does not resolve" \
  "$tmp/err" || fail "unresolvable seed: message"
[ $((SECONDS - t0)) -le 5 ] || fail "unresolvable seed: took $((SECONDS - t0)) s"
echo "NEXAR_SEED=no-such-host.invalid:1: $(cat "$tmp/err")"
echo "test_hostname: OK"
