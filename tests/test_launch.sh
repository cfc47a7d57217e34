#!/usr/bin/env bash
# The programs below are single-quoted on purpose: $NEXAR_RANK and friends
# are expanded by each worker's shell, not by this one.
# shellcheck disable=SC2016
#
# test_launch: the process management of nexar-run, with tiny shell programs
# that make no nexar calls (so the seed never forms a cluster, which must not
# fail a job whose processes all exit 0). Checks the rank prefixes, partial
# lines, stderr forwarding, the environment given to each process, that a
# failing rank makes nexar-run exit with its status and stops a sleeping
# sibling quickly, the -t timeout, and the usage errors (exit 2).
#
# usage: test_launch.sh NEXAR_RUN
set -u

if [ $# -ne 1 ]; then
  echo "usage: $0 NEXAR_RUN" >&2
  exit 2
fi
nexar_run=$1

. "$(dirname "$0")/lib.sh" test_launch

# run ARGS...: runs nexar-run (bounded by timeout(1), in case it hangs) with
# stdout and stderr in $tmp/out and $tmp/err; sets rc and secs (wall time).
run() {
  local t0=$SECONDS
  timeout 30 "$nexar_run" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  secs=$((SECONDS - t0))
}

expect_line() { # FILE LINE: FILE has exactly LINE as a line
  grep -qxF -- "$2" "$1" || fail "missing line '$2' in $1"
}

echo "== prefixes"
run -n 3 -- sh -c 'echo "hello from $NEXAR_RANK"'
[ "$rc" -eq 0 ] || fail "echo job: exit status $rc, want 0"
for r in 0 1 2; do expect_line "$tmp/out" "[$r] hello from $r"; done
[ "$(wc -l <"$tmp/out")" -eq 3 ] || fail "echo job: want 3 lines of output"

echo "== stderr, partial lines, last line without newline"
run -n 2 sh -c 'printf "part1"; sleep 0.2; printf "part2\nnext\nnoeol"
  echo "to stderr $NEXAR_RANK" >&2'
[ "$rc" -eq 0 ] || fail "partial-line job: exit status $rc"
for r in 0 1; do
  expect_line "$tmp/out" "[$r] part1part2"
  expect_line "$tmp/out" "[$r] next"
  expect_line "$tmp/out" "[$r] noeol"
  expect_line "$tmp/err" "[$r] to stderr $r"
done

echo "== --no-prefix"
run -n 2 --no-prefix sh -c 'echo "plain $NEXAR_RANK"'
[ "$rc" -eq 0 ] || fail "--no-prefix job: exit status $rc"
expect_line "$tmp/out" "plain 0"
expect_line "$tmp/out" "plain 1"

echo "== environment"
run -n 2 sh -c \
  'echo "$NEXAR_WORLD_SIZE $NEXAR_SEED ${#NEXAR_SECRET} $NEXAR_SECRET"'
[ "$rc" -eq 0 ] || fail "env job: exit status $rc"
grep -qE '^\[0\] 2 127\.0\.0\.1:[0-9]+ 64 [0-9a-f]{64}$' "$tmp/out" ||
  fail "rank 0 environment is wrong"
s0=$(sed -n 's/^\[0\] .* //p' "$tmp/out")
s1=$(sed -n 's/^\[1\] .* //p' "$tmp/out")
if [ -z "$s0" ] || [ "$s0" != "$s1" ]; then
  fail "ranks got different secrets"
fi
grep -qF -- "$s0" "$tmp/err" && fail "the secret appears on nexar-run's stderr"
first=$s0
run -n 1 sh -c 'echo "$NEXAR_SECRET"'
[ "$(sed -n 's/^\[0\] //p' "$tmp/out")" != "$first" ] ||
  fail "two jobs got the same secret"

echo "== failing rank stops a sleeping sibling"
run -n 3 sh -c 'test "$NEXAR_RANK" = 1 && exit 3
  echo "rank $NEXAR_RANK sleeping"; sleep 30'
[ "$rc" -eq 3 ] || fail "failing job: exit status $rc, want 3"
[ "$secs" -lt 10 ] || fail "failing job took ${secs}s; siblings not stopped"
grep -q 'worker 1 failed (exited with status 3)' "$tmp/err" ||
  fail "no report of the failing worker"

echo "== a rank killed by a signal"
run -n 2 sh -c 'test "$NEXAR_RANK" = 0 && kill -KILL $$; sleep 30'
[ "$rc" -eq 137 ] || fail "signal job: exit status $rc, want 137"
[ "$secs" -lt 10 ] || fail "signal job took ${secs}s"

echo "== -t timeout"
run -n 2 -t 1 sleep 30
[ "$rc" -eq 124 ] || fail "timeout job: exit status $rc, want 124"
[ "$secs" -lt 10 ] || fail "timeout job took ${secs}s"

echo "== program not found"
run -n 2 /nonexistent/program
[ "$rc" -eq 127 ] || fail "missing program: exit status $rc, want 127"

echo "== usage errors"
for args in "-n 0 true" "-n 2" "true" "-n x true" "-n 010 true" "-n 0x2 true" \
  "-t -1 -n 1 true" \
  "--bogus -n 1 true"; do
  # shellcheck disable=SC2086
  run $args
  [ "$rc" -eq 2 ] || fail "'nexar-run $args': exit status $rc, want 2"
  grep -q '^Usage: nexar-run' "$tmp/err" || fail "'$args': no usage printed"
done

echo "PASS"
