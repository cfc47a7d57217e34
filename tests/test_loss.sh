#!/usr/bin/env bash
# test_loss: correct under loss (docs/testing.md, "Loss"). With the
# test-only injector NEXAR_TEST_LOSS in every process's UDP send path:
#   - a 64 MiB int32 allreduce on 4 ranks over QUIC at 2 % loss, 1 %
#     reordering and 1 % duplication is bit-correct (nexar-perf's check:
#     every element equal to the expected sum, #wrong 0), 2 starts;
#   - at 30 % loss the bootstrap completes and a barrier and finalize
#     follow, 3 starts.
# No timing is asserted; each start has a hard deadline (-t).
#
# usage: test_loss.sh NEXAR_RUN NEXAR_PERF
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 NEXAR_RUN NEXAR_PERF" >&2
  exit 2
fi
nexar_run=$1
nexar_perf=$2

. "$(dirname "$0")/lib.sh" test_loss
export NEXAR_TRANSPORT=quic

# start LOSS ARGS...: one job of 4 ranks under NEXAR_TEST_LOSS=LOSS that
# must exit 0 with the OK summary.
start() {
  local loss=$1
  shift
  NEXAR_TEST_LOSS=$loss "$nexar_run" -n 4 -t 150 -- "$nexar_perf" "$@" \
    >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "NEXAR_TEST_LOSS=$loss $*: exit $rc"
  grep -qF '[0] # #wrong total: 0 OK' "$tmp/out" ||
    fail "NEXAR_TEST_LOSS=$loss $*: no OK summary"
  grep -qF 'NEXAR_TEST_LOSS is set' "$tmp/err" ||
    fail "NEXAR_TEST_LOSS=$loss: the injector did not say it is on"
}

for seed in 1 2; do
  echo "== 64 MiB allreduce, drop 2 %, reorder 1 %, dup 1 %, seed $seed"
  start "drop=2%,reorder=1%,dup=1%,seed=$seed" allreduce -b 64M -n 1 -w 0 \
    -c 1 -d int32
done
for seed in 1 2 3; do
  echo "== bootstrap and barrier at drop 30 %, seed $seed"
  start "drop=30%,seed=$seed" barrier -n 2 -w 1
done

echo "== a bad NEXAR_TEST_LOSS is refused with its reason"
NEXAR_TEST_LOSS=drop=200% "$nexar_run" -n 2 -t 60 -- "$nexar_perf" barrier \
  >"$tmp/out" 2>"$tmp/err" && fail "drop=200% was accepted"
grep -qF "'drop=200%' is not" "$tmp/err" || fail "no reason for drop=200%"
echo "OK"
