#!/usr/bin/env bash
# test_scale: a job of N ranks on this host starts STARTS times in a row
# with 0 failures (docs/topology.md, "Forming the mesh"): each start runs
# `nexar-run -n N -- nexar-perf barrier` (the full topology unless
# NEXAR_TOPOLOGY is set) and must exit 0 with the OK summary. On a crowded
# host (N processes on 2 cores) a rank forming its mesh may not run for
# seconds: it must not be declared failed meanwhile, and the handshakes
# are staged (NEXAR_MESH_DIALS), not all started at once. No timing is
# asserted; each start has a hard deadline (-t), long enough for a loaded
# 2-core machine.
#
# usage: test_scale.sh NEXAR_RUN NEXAR_PERF N STARTS [TRANSPORT]
#   TRANSPORT: NEXAR_TRANSPORT for the job (default auto; quic makes every
#   link a QUIC connection with its TLS handshake, as between machines).
set -u

if [ $# -lt 4 ] || [ $# -gt 5 ]; then
  echo "usage: $0 NEXAR_RUN NEXAR_PERF N STARTS [TRANSPORT]" >&2
  exit 2
fi
nexar_run=$1
nexar_perf=$2
n=$3
starts=$4
export NEXAR_TRANSPORT=${5:-auto}

. "$(dirname "$0")/lib.sh" test_scale

failed=0
for i in $(seq "$starts"); do
  "$nexar_run" -n "$n" -t 150 -- "$nexar_perf" barrier -n 2 -w 1 \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -qF '[0] # #wrong total: 0 OK' "$tmp/out"; then
    echo "start $i of $starts ($n ranks, NEXAR_TRANSPORT=$NEXAR_TRANSPORT):" \
      "exit $rc" >&2
    grep -m 5 -i 'error\|fail' "$tmp/out" "$tmp/err" >&2
    failed=$((failed + 1))
  fi
done
echo "$n ranks, $starts starts, NEXAR_TRANSPORT=$NEXAR_TRANSPORT" \
  "NEXAR_MESH_LAZY_MIN=${NEXAR_MESH_LAZY_MIN:-default}: $failed failed"
[ "$failed" -eq 0 ] || fail "$failed of $starts starts of $n ranks failed"
