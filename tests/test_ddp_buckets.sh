#!/usr/bin/env bash
# test_ddp_buckets: ddp_digits --buckets (the gradient allreduced in buckets
# as the backward pass finishes each layer, nexar_multi_*). At world size 1
# the weights equal those of the plain run bit for bit (the layered backward
# sums in the same order and a one-rank allreduce changes nothing); at world
# size 3, with buckets of 2048 bytes (the output layer and hidden biases in
# one packed bucket, the hidden weights alone), the weights agree with the
# one-rank run to 1e-5 as in test_ddp, the held-out accuracy reaches 0.90,
# and every epoch reports the gradient's communication time with its
# exposed part no larger than the whole.
#
# usage: test_ddp_buckets.sh NEXAR_RUN DDP_DIGITS COMPARE_WEIGHTS
set -u

if [ $# -ne 3 ]; then
  echo "usage: $0 NEXAR_RUN DDP_DIGITS COMPARE_WEIGHTS" >&2
  exit 2
fi
nexar_run=$1
ddp_digits=$2
compare_weights=$3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_ddp_buckets.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run NAME N ARGS...: trains at world size N, weights in $tmp/w.NAME.
run() {
  local name=$1 n=$2 rc
  shift 2
  echo "== nexar-run -n $n ddp_digits --epochs 10 $*"
  timeout 150 "$nexar_run" -n "$n" -t 120 --no-prefix -- "$ddp_digits" \
    --epochs 10 --weights-out "$tmp/w.$name" "$@" >"$tmp/log.$name" 2>&1
  rc=$?
  cat "$tmp/log.$name"
  [ "$rc" -eq 0 ] || fail "$name: exit status $rc"
  [ -s "$tmp/w.$name" ] || fail "$name: no weights written"
}

run plain1 1
run buckets1 1 --buckets
cmp "$tmp/w.plain1" "$tmp/w.buckets1" ||
  fail "world 1: --buckets changed the weights"
NEXAR_BUCKET_BYTES=2048 run buckets3 3 --buckets
timeout 60 "$compare_weights" "$tmp/w.plain1" "$tmp/w.buckets3" 1e-5 ||
  fail "world 3 --buckets: weights differ from world 1"
acc=$(awk '/^final heldout_acc / && $5 == 3 { print $3 }' "$tmp/log.buckets3")
[ -n "$acc" ] || fail "world 3: no 'final heldout_acc ... world 3' line"
awk -v a="$acc" 'BEGIN { exit !(a + 0 >= 0.90) }' ||
  fail "world 3: held-out accuracy $acc < 0.90"
n=$(awk '/^epoch / {
       for (i = 1; i < NF; i++) {
         if ($i == "grad_comm_ms") t = $(i + 1)
         if ($i == "exposed_ms") e = $(i + 1)
       }
       if (t + 0 > 0 && e + 0 <= t + 0.05) ok++
     } END { print ok + 0 }' "$tmp/log.buckets3")
[ "$n" -eq 10 ] ||
  fail "world 3: $n of 10 epochs report grad_comm_ms > 0 >= exposed_ms"
echo "PASS"
