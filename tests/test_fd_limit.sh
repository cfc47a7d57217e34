#!/usr/bin/env bash
# test_fd_limit: 48 ranks on one host need links to 47 neighbours, about 316
# descriptors per process (4 per shared-memory link and a margin). With the
# soft RLIMIT_NOFILE at 128 and a higher hard one, nexar raises the soft
# limit and the job runs (it failed in mesh formation before); with the hard
# limit at 128 too, every rank warns naming the limit and the job fails with
# an error, not a hang (docs/launching.md, "Many ranks on one host").
#
# usage: test_fd_limit.sh NEXAR_RUN NEXAR_PERF
set -u
run=$1 perf=$2
export NEXAR_BOOTSTRAP_TIMEOUT_MS=30000
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; tail -5 "$out"; exit 1; }

(ulimit -Sn 128 && timeout 120 "$run" -n 48 -- "$perf" barrier -n 1 -w 0) \
  >"$out" 2>&1 || fail "soft limit 128: the job failed"
grep -qF '[0] # #wrong total: 0 OK' "$out" || fail "soft limit 128: no result"
echo "ok soft limit 128, hard $(ulimit -Hn): raised, 48 ranks ran"

(ulimit -n 128 && timeout 120 "$run" -n 48 -- "$perf" barrier -n 1 -w 0) \
  >"$out" 2>&1 && fail "hard limit 128: the job succeeded"
[ $? -ne 124 ] || fail "hard limit 128: the job hung until the timeout"
grep -q "RLIMIT_NOFILE's hard limit is 128" "$out" ||
  fail "hard limit 128: no warning naming the limit"
echo "ok hard limit 128: warned and failed"
