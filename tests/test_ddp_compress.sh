#!/usr/bin/env bash
# test_ddp_compress: the digits training with a compressed gradient
# allreduce (ddp_digits --compress topk:0.01, docs/compression.md) at world
# sizes 3 and 4 reaches held-out accuracy within 1 point of dense training
# at the same world size: the final accuracy and the mean over the last 5
# epochs are each at least the dense figure minus 0.01. Rank 0's payload
# bytes (bytes_sent on the final line) must be at most a tenth of dense.
# The runs are deterministic (seeded, bit-exact collectives).
#
# usage: test_ddp_compress.sh NEXAR_RUN DDP_DIGITS
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 NEXAR_RUN DDP_DIGITS" >&2
  exit 2
fi
nexar_run=$1
ddp_digits=$2
. "$(dirname "$0")/lib.sh" test_ddp_compress

# train N ARGS...: runs ddp_digits on N ranks; sets final, last5 and bytes.
train() {
  local n=$1 log="$tmp/log"
  shift
  timeout 150 "$nexar_run" -n "$n" -t 120 --no-prefix -- "$ddp_digits" "$@" \
    >"$log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || {
    cat "$log"
    fail "world $n $*: exit status $rc"
  }
  final=$(awk '/^final heldout_acc / && $5 == '"$n"' { print $3 }' "$log")
  bytes=$(awk '/^final heldout_acc / { print $13 }' "$log")
  last5=$(awk '/^epoch / { a[++n] = $8 }
    END { for (i = n - 4; i <= n; i++) s += a[i]; printf "%.4f", s / 5 }' \
    "$log")
  [ -n "$final" ] && [ -n "$bytes" ] || {
    cat "$log"
    fail "world $n $*: no final line"
  }
  echo "world $n ${*:-dense}: final $final, last 5 epochs $last5, rank 0 sent $bytes bytes"
}

for n in 3 4; do
  train "$n"
  d_final=$final d_last5=$last5 d_bytes=$bytes
  train "$n" --compress topk:0.01
  awk -v c="$final" -v d="$d_final" 'BEGIN { exit !(c + 0.01 >= d) }' ||
    fail "world $n: topk:0.01 final accuracy $final, dense $d_final"
  awk -v c="$last5" -v d="$d_last5" 'BEGIN { exit !(c + 0.01 >= d) }' ||
    fail "world $n: topk:0.01 last-5 accuracy $last5, dense $d_last5"
  [ "$((bytes * 10))" -le "$d_bytes" ] ||
    fail "world $n: topk:0.01 sent $bytes bytes, dense $d_bytes"
done
echo "PASS"
