#!/usr/bin/env bash
# test_perf: smoke test of nexar-perf. Runs every OP on 3 ranks under
# nexar-run at tiny sizes (8 B to 4 KiB) with the result check on, plus
# some dtype/redop/root variants, and checks that each run exits 0, prints
# one row per size with #wrong 0 and the "OK" summary, and writes a --json
# file that parses (python3 when present, else grep) and agrees with the
# rows; the rpc benchmark prints its idle and loaded rows and their ratio.
# Also checks that a usage error exits 2 and that a call the library
# rejects (bitwise op on floats) exits nonzero with the nexar error text.
# Takes about 15-30 s on a 2-core machine.
#
# usage: test_perf.sh NEXAR_RUN NEXAR_PERF
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 NEXAR_RUN NEXAR_PERF" >&2
  exit 2
fi
nexar_run=$1
nexar_perf=$2

. "$(dirname "$0")/lib.sh" test_perf

have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

# perf NPROCS OP ARGS...: runs nexar-perf under nexar-run (bounded by -t)
# with stdout and stderr in $tmp/out and $tmp/err; sets rc.
perf() {
  local np=$1
  shift
  "$nexar_run" -n "$np" -t 60 -- "$nexar_perf" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# check_json FILE OP ROWS: FILE is a JSON array of ROWS objects for OP, each
# with "wrong": 0.
check_json() {
  local file=$1 op=$2 rows=$3
  [ -s "$file" ] || fail "$op: no JSON file written"
  if [ "$have_python" = 1 ]; then
    python3 - "$file" "$op" "$rows" <<'EOF' || fail "$op: bad JSON in $file"
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list), "not an array"
assert len(rows) == int(sys.argv[3]), "%d rows" % len(rows)
for r in rows:
    assert r["op"] == sys.argv[2], r
    assert r["wrong"] == 0, r
    assert r["time_us"] > 0, r
    for k in ("size", "count", "type", "redop", "root", "time_min_us",
              "time_max_us", "algbw_GBps", "busbw_GBps"):
        assert k in r, (k, r)
EOF
  else
    head -c 1 "$file" | grep -q '\[' || fail "$op: JSON does not start with ["
    [ "$(grep -c '"wrong": 0[,}]' "$file")" -eq "$rows" ] ||
      fail "$op: JSON does not hold $rows rows with \"wrong\": 0"
  fi
}

# check_rows OP ROWS: $tmp/out holds ROWS result rows, each with #wrong 0
# (column 11 after the "[0]" prefix), and the OK summary.
check_rows() {
  local op=$1 want=$2 got
  got=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/' "$tmp/out" | wc -l)
  [ "$got" -eq "$want" ] || fail "$op: $got result rows, want $want"
  awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ && $12 != "0" { bad = 1 }
       END { exit bad }' "$tmp/out" || fail "$op: a row has #wrong != 0"
  grep -qF '[0] # #wrong total: 0 OK' "$tmp/out" || fail "$op: no OK summary"
}

sizes="-b 8 -e 4096 -f 8 -n 3 -w 1 -c 1"

echo "== every OP on 3 ranks, 8 B .. 4 KiB, checked"
for op in latency bw bibw allreduce iallreduce allreduce_topk allreduce_randk \
  bcast reduce allgather reduce_scatter alltoall gather scatter scan barrier \
  allreduce_multi; do
  rows=4
  [ "$op" = barrier ] && rows=1
  # shellcheck disable=SC2086
  perf 3 "$op" $sizes --json "$tmp/$op.json"
  [ "$rc" -eq 0 ] || fail "$op: exit status $rc, want 0"
  check_rows "$op" "$rows"
  check_json "$tmp/$op.json" "$op" "$rows"
  echo "  $op ok"
done

echo "== dtype, redop and root variants"
while read -r op args; do
  # shellcheck disable=SC2086
  perf 3 "$op" $sizes $args
  [ "$rc" -eq 0 ] || fail "$op $args: exit status $rc, want 0"
  check_rows "$op $args" 4
  echo "  $op $args ok"
done <<'EOF'
allreduce -d int8 -o bxor
allreduce -d half -o prod
allreduce -d bfloat16 -o avg
iallreduce -d uint64 -o max
allreduce_topk -R 1 -d half -o avg
allreduce_randk -R 1 -d bf16
reduce -d int32 -o min -r 2
reduce_scatter -d double -o avg
scan -d float16 -o avg
scan -d uint8 -o band
bcast -d int64 -r 2
gather -d bf16 -r 1
scatter -d uint32 -r 2
EOF

echo "== rpc on 3 ranks: idle and loaded rows and the ratio line"
perf 3 rpc -b 64 -n 20 -w 2 -W 4 -L 64K
[ "$rc" -eq 0 ] || fail "rpc: exit status $rc, want 0"
for row in idle loaded; do
  awk -v r="$row" '$1 == "[0]" && $2 == r && NF == 9 && $3 > 0 { ok = 1 }
       END { exit !ok }' "$tmp/out" || fail "rpc: no $row row"
done
grep -q '^\[0\] # loaded/idle: rtt median [0-9.]*,' "$tmp/out" ||
  fail "rpc: no loaded/idle line"
echo "  rpc ok"

echo "== -P: one percentile line per row, in order"
# 64 B and 512 B latency (a row's time is half a round trip) and allreduce:
# after each row rank 0 prints p10 <= p50 <= p90 <= p99 <= max, all > 0,
# scaled as the row's time (its p10 at most the row's mean).
for op in latency allreduce; do
  perf 3 "$op" -b 64 -e 512 -f 8 -n 50 -w 2 -c 1 -P
  [ "$rc" -eq 0 ] || fail "$op -P: exit status $rc, want 0"
  check_rows "$op -P" 2
  awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ { mean = $7; row++ }
       $1 == "[0]" && $2 == "#" && $3 == "per" {
         n++
         if ($9 != "p10" || $17 != "max") bad = 1
         if (!($10 > 0 && $10 <= $12 && $12 <= $14 && $14 <= $16 &&
               $16 <= $18 && $10 <= mean + 0.01)) bad = 1
         if (n != row) bad = 1
       }
       END { exit bad || n != 2 }' "$tmp/out" ||
    fail "$op -P: percentile lines wrong: $(grep -F 'per iteration' "$tmp/out")"
  echo "  $op -P ok"
done

echo "== usage errors exit 2"
for args in "" "nosuchop" "allreduce -d nosuchtype" "allreduce -o nosuchop" \
  "allreduce -b 1K -e 8" "allreduce -f 1" "latency -n 0" \
  "rpc -L 2" "rpc --json x.json" "rpc -P" "allreduce_topk -R 0"; do
  # shellcheck disable=SC2086
  "$nexar_perf" $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "'nexar-perf $args': exit status $rc, want 2"
  grep -q '^Usage: nexar-perf\|^nexar-perf: ' "$tmp/err" ||
    fail "'nexar-perf $args': no message"
done

echo "== a rejected call exits nonzero with the nexar error"
perf 2 allreduce -d float -o band -n 1 -w 0
[ "$rc" -ne 0 ] || fail "band on float: exit status 0"
grep -q 'NEXAR_ERR_UNSUPPORTED' "$tmp/err" ||
  fail "band on float: no NEXAR_ERR_UNSUPPORTED message"

perf 2 allreduce_topk -d int32 -n 1 -w 0
[ "$rc" -ne 0 ] || fail "allreduce_topk on int32: exit status 0"
grep -q 'NEXAR_ERR_UNSUPPORTED' "$tmp/err" ||
  fail "allreduce_topk on int32: no NEXAR_ERR_UNSUPPORTED message"

echo "PASS"
