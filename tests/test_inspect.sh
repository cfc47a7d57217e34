#!/usr/bin/env bash
# test_inspect: live inspection (docs/debugging.md "Live inspection").
# 4 ranks of inspect_hang: after one allreduce rank 2 sleeps while ranks 0,
# 1 and 3 wait for it in the second (allreduce #1) until the test lets it
# go. While the job hangs:
#   - nexar-inspect (right secret) prints the table: ranks 0, 1, 3 waiting
#     in allreduce #1, rank 2 in no operation, and names rank 2 as the one
#     not in allreduce #1;
#   - the same, dialling one rank at a time (NEXAR_MESH_DIALS=1), and so
#     with rank 0 stopped: it does not keep the others from answering;
#   - a wrong secret gets nothing: nexar-inspect stops at the seed's proof,
#     a client proving a wrong secret to the seed gets no byte after the
#     seed's proof, and one proving it to the ranks gets no byte from any;
#   - 5 observers that never prove anything: every rank takes 4, closes
#     them at their deadline and refuses the fifth;
# then the job finishes with the right sums. Last, nexar-run -t 3 on a job
# whose rank 2 sleeps longer prints the same table before it stops it.
#
# usage: test_inspect.sh NEXAR_SEED NEXAR_INSPECT NEXAR_RUN INSPECT_HANG \
#                        INSPECT_PROBE
set -u
if [ $# -ne 5 ]; then
  echo "usage: $0 NEXAR_SEED NEXAR_INSPECT NEXAR_RUN INSPECT_HANG INSPECT_PROBE" >&2
  exit 2
fi
seed_bin=$1 inspect=$2 run=$3 hang=$4 probe=$5
. "$(dirname "$0")/lib.sh" test_inspect
export NEXAR_SECRET=test-inspect-secret NEXAR_WORLD_SIZE=4
export NEXAR_BOOTSTRAP_TIMEOUT_MS=20000
seed_pid=
trap '[ -n "$seed_pid" ] && kill "$seed_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

"$seed_bin" --listen 127.0.0.1:0 --world-size 4 --stay 2>"$tmp/seed" &
seed_pid=$!
port=$(seed_port "$tmp/seed")
[ -n "$port" ] || fail "nexar-seed printed no port: $(cat "$tmp/seed")"
for r in 0 1 2 3; do
  NEXAR_RANK=$r NEXAR_SEED=127.0.0.1:$port timeout 40 "$hang" 2 25 "$tmp/go" \
    >"$tmp/out.$r" 2>"$tmp/err.$r" &
done
for _ in $(seq 150); do
  [ "$(cat "$tmp"/out.? | grep -c ready)" -eq 4 ] && break
  sleep 0.1
done
[ "$(cat "$tmp"/out.? | grep -c ready)" -eq 4 ] ||
  { cat "$tmp"/err.?; fail "the ranks did not get through the first allreduce"; }
sleep 1 # ranks 0, 1 and 3 are inside allreduce #1 now

"$inspect" --seed 127.0.0.1:$port >"$tmp/out" 2>"$tmp/err" ||
  fail "nexar-inspect failed"
cat "$tmp/out"
for r in 0 1 3; do
  grep -q "^$r .* waiting in allreduce #1 for " "$tmp/out" ||
    fail "rank $r is not shown waiting in allreduce #1"
done
grep "^2 " "$tmp/out" | grep -q "idle (in no nexar operation)" ||
  fail "rank 2 is not shown outside any operation"
grep -q "^allreduce #1: ranks 0, 1, 3 in it; not in it: rank 2 (idle" \
  "$tmp/out" || fail "the summary does not name rank 2"
# One handshake at a time (NEXAR_MESH_DIALS=1): the same four rows.
NEXAR_MESH_DIALS=1 "$inspect" --seed 127.0.0.1:$port >"$tmp/out1" \
  2>"$tmp/err" || fail "nexar-inspect with NEXAR_MESH_DIALS=1 failed"
[ "$(grep -c -E "^[0-3] .*(waiting in allreduce #1 for |idle \(in no)" \
  "$tmp/out1")" -eq 4 ] ||
  fail "NEXAR_MESH_DIALS=1: not every rank answered: $(cat "$tmp/out1")"
# Rank 0 stopped (1.5 s, under the 5 s heartbeat timeout): it holds the
# one dial slot only for an eighth of --timeout-ms, then the others are
# dialled and answer.
pid0=$(pgrep -P "$(jobs -p %2)") # under timeout
[ -n "$pid0" ] || fail "no pid for rank 0"
kill -STOP "$pid0"
NEXAR_MESH_DIALS=1 "$inspect" --seed 127.0.0.1:$port --timeout-ms 1500 \
  >"$tmp/out1" 2>"$tmp/err"
kill -CONT "$pid0"
cat "$tmp/out1"
grep -q "^0 .*no answer" "$tmp/out1" || fail "stopped rank 0 answered?"
[ "$(grep -c -E "^[1-3] .*(waiting in allreduce #1 for |idle \(in no)" \
  "$tmp/out1")" -eq 3 ] ||
  fail "rank 0 stopped, NEXAR_MESH_DIALS=1: ranks 1-3 did not all answer"

NEXAR_SECRET=wrong-secret "$inspect" --seed 127.0.0.1:$port \
  >"$tmp/out" 2>"$tmp/err" && fail "nexar-inspect with a wrong secret: exit 0"
[ -s "$tmp/out" ] && fail "nexar-inspect with a wrong secret printed a table"
grep -q "the seed did not prove the cluster secret" "$tmp/err" ||
  fail "nexar-inspect with a wrong secret: no refusal"
echo "wrong secret: $(cat "$tmp/err")"

"$probe" 127.0.0.1:$port 1 >"$tmp/out" 2>"$tmp/err" || fail "inspect_probe 1: exit $?"
grep -q "^rc NEXAR_ERR_AUTH: .*not authenticated (0 bytes received after its proof)" \
  "$tmp/out" || fail "a wrong proof to the seed got something"
grep -q "RANK" "$tmp/out" && fail "a wrong proof to the seed got a roster"
echo "wrong proof to the seed: $(cat "$tmp/out")"

"$probe" 127.0.0.1:$port 2 >"$tmp/out" 2>"$tmp/err" || fail "inspect_probe 2: exit $?"
cat "$tmp/out"
[ "$(grep -c "no answer: not authenticated (0 bytes received)" "$tmp/out")" \
  -eq 4 ] || fail "a wrong proof to the ranks got something"
grep -q "waiting in\|allreduce" "$tmp/out" &&
  fail "a wrong proof to the ranks saw their state"

# 5 observers at once that never prove anything: each rank takes 4 (and
# closes them at their 3 s deadline), and refuses the fifth in the TLS
# handshake.
for k in 1 2 3 4 5; do
  "$probe" 127.0.0.1:$port 3 >"$tmp/silent.$k" 2>&1 &
done
wait %6 %7 %8 %9 %10
late=$(cat "$tmp"/silent.? | grep -c "no answer: observer time is up (0 bytes")
refused=$(cat "$tmp"/silent.? | grep -c "no answer: TLS handshake failed")
echo "5 silent observers x 4 ranks: $late closed at the deadline, $refused refused"
[ "$late" -eq 16 ] && [ "$refused" -eq 4 ] ||
  { cat "$tmp"/silent.?; fail "observer bound or deadline"; }
# Their slots are free again: the state still comes.
"$inspect" --seed 127.0.0.1:$port >"$tmp/out" 2>"$tmp/err" ||
  fail "nexar-inspect after the silent observers"
[ "$(grep -c " waiting in allreduce #1 for " "$tmp/out")" -eq 3 ] ||
  fail "nexar-inspect after the silent observers: $(cat "$tmp/out")"

touch "$tmp/go" # rank 2 joins allreduce #1
for r in 0 1 2 3; do
  wait %$((r + 2)) || { cat "$tmp"/err.?; fail "rank $r failed"; }
  grep -q "rank $r: ok sum 6" "$tmp/out.$r" || fail "rank $r: wrong sum"
done
kill "$seed_pid"
wait "$seed_pid"
seed_pid=

env -u NEXAR_WORLD_SIZE "$run" -n 4 -t 3 "$hang" 2 30 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 124 ] || fail "nexar-run -t 3: exit $rc, not 124"
grep -q "timed out after 3000 ms; what the ranks are doing" "$tmp/err" ||
  fail "nexar-run printed no table"
grep -q "^allreduce #1: ranks 0, 1, 3 in it; not in it: rank 2 (idle" \
  "$tmp/err" || fail "nexar-run's table does not name rank 2"
sed -n '/what the ranks are doing/,/^allreduce/p' "$tmp/err"
echo "test_inspect: OK"
