#!/usr/bin/env bash
# osu.sh: the OSU Micro-Benchmarks 7.4 as an unmodified MPI client. Unpacks
# the upstream tarball into WORKDIR, configures it with the given mpicc
# (`./configure CC=MPICC CXX=...`: OSU links with its C++ compiler, so CXX
# is the MPI's mpicxx when it has one, else MPICC itself), builds it with a
# plain top-level `make`, then runs with validation (-c) at np 2 and 4
# (point-to-point: np 2, which is all they take):
#   pt2pt/standard: osu_latency osu_bw osu_bibw
#   collective/blocking: every benchmark (osu_allreduce ... osu_barrier)
#   collective/non_blocking: every osu_i* benchmark
#   collective/neighborhood: every osu_(i)neighbor_* benchmark
# with small size and iteration limits. A validated run passes when it
# exits 0, prints data rows and every row says Pass (no "Fail", no "DATA
# VALIDATION ERROR"); osu_barrier and osu_ibarrier have no -c and pass on
# exit 0 with a latency row. The reductions also run with -T mpi_int
# (OSU's default type is MPI_CHAR). The neighbourhood
# benchmarks use OSU's default topology (a torus of radius 1, which needs
# 3 ranks or more) at np 4 and a ring of two (-N graph:FILE) at np 2.
#
# usage: osu.sh [--build-only] MPICC MPIEXEC WORKDIR [MPIEXEC ARGS...]
#   (--build-only: unpack, configure and make, run nothing; bench/compare
#   uses it for its OSU-client table)
#   e.g. osu.sh build/mpi/bin/mpicc build/mpi/bin/mpiexec build/osu
#        osu.sh mpicc.openmpi mpirun.openmpi /tmp/osu-ompi --oversubscribe \
#               --allow-run-as-root --mca op ^avx
#        osu.sh mpicc.mpich mpiexec.mpich /tmp/osu-mpich
# env:  NEXAR_OSU_TARBALL  the tarball (default: <repo>/../shared/thirdparty/
#                          osu-micro-benchmarks-7.4.tar.gz, also looked for
#                          beside the main checkout of a git worktree)
#       NEXAR_OSU_NP       process counts for collectives (default "2 4")
#       NEXAR_OSU_TIMEOUT  seconds per run (default 120)
#       NEXAR_OSU_ONLY     run only these benchmarks (names, space separated)
#       MPICXX             the C++ wrapper to configure OSU with
# The build is kept in WORKDIR and reused while MPICC, its -show output and
# its mpi.h stay the same. Exit status: 0 all passed, 1 a failure, 2 bad
# usage, 77 no tarball or no MPICC/MPIEXEC (a skip for ctest).
set -euo pipefail

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
if [ $# -lt 3 ]; then
  sed -n '2,/^set -e/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2
  exit 2
fi
mpicc=$1 mpiexec=$2 work=$3
shift 3
extra=("$@")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nps=${NEXAR_OSU_NP:-2 4}
tmo=${NEXAR_OSU_TIMEOUT:-120}
name=osu-micro-benchmarks-7.4
T0=$(date +%s)
log() { printf '[osu %4ds] %s\n' "$(($(date +%s) - T0))" "$*"; }

# ---- the tarball ---------------------------------------------------------------
tarball=${NEXAR_OSU_TARBALL:-}
if [ -z "$tarball" ]; then
  for d in "$repo/../shared/thirdparty" \
           "$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo /nonexistent)/../../shared/thirdparty"; do
    if [ -f "$d/$name.tar.gz" ]; then
      tarball=$d/$name.tar.gz
      break
    fi
  done
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
  echo "osu: $name.tar.gz not found (looked in $repo/../shared/thirdparty; set NEXAR_OSU_TARBALL): skipped" >&2
  exit 77
fi
if ! command -v "$mpicc" >/dev/null || ! command -v "$mpiexec" >/dev/null; then
  echo "osu: no $mpicc or $mpiexec (MPI not built or not installed): skipped" >&2
  exit 77
fi
mpicc=$(command -v "$mpicc")

# the C++ wrapper: MPICXX, else mpicc's sibling (mpicc.openmpi ->
# mpicxx.openmpi), else mpicc itself (OSU's C objects link fine with it)
mpicxx=${MPICXX:-}
if [ -z "$mpicxx" ]; then
  sib=$(dirname "$mpicc")/$(basename "$mpicc" | sed 's/mpicc/mpicxx/')
  if [ "$sib" != "$mpicc" ] && [ -x "$sib" ]; then mpicxx=$sib; else mpicxx=$mpicc; fi
fi

# ---- build (reused while the MPI is the same) ------------------------------------
mkdir -p "$work"
work=$(cd "$work" && pwd)
src=$work/$name
show=$(timeout 30 "$mpicc" -show 2>/dev/null || true)
stamp=$({
  echo "$mpicc $mpicxx $(sha256sum "$tarball" | cut -c1-16)"
  echo "$show"
  for inc in $(echo "$show" | tr ' ' '\n' | sed -n 's/^-I//p'); do
    if [ -f "$inc/mpi.h" ]; then sha256sum "$inc/mpi.h"; fi
  done
} | sha256sum | cut -c1-16)
if [ ! -f "$src/.nexar-built" ] || [ "$(cat "$src/.nexar-built")" != "$stamp" ]; then
  log "unpacking $tarball into $work"
  rm -rf "$src"
  tar -xzf "$tarball" -C "$work"
  log "configure CC=$mpicc CXX=$mpicxx"
  (cd "$src" && timeout 600 ./configure CC="$mpicc" CXX="$mpicxx" >"$work/configure.log" 2>&1) ||
    { tail -n 30 "$work/configure.log" >&2; echo "osu: configure failed ($work/configure.log)" >&2; exit 1; }
  log "make"
  (cd "$src" && timeout 1200 make >"$work/make.log" 2>&1) ||
    { grep -n -i -B2 -A3 "error" "$work/make.log" | tail -n 40 >&2; echo "osu: make failed ($work/make.log)" >&2; exit 1; }
  echo "$stamp" >"$src/.nexar-built"
  log "built"
else
  log "reusing the build in $src"
fi
[ "$build_only" = 1 ] && exit 0
mpi=$src/c/mpi

# ---- the plan: benchmark directory, np list and options ---------------------------
COLL="-m 1:16384 -i 20 -x 2"
plan() {
  echo "pt2pt/standard/osu_latency|2|-m 1:1048576 -i 10 -x 2"
  for b in osu_bw osu_bibw; do
    echo "pt2pt/standard/$b|2|-m 1:262144 -i 10 -x 2"
  done
  local d b
  for d in blocking non_blocking neighborhood; do
    for f in "$mpi/collective/$d"/osu_*.c; do
      b=$(basename "$f" .c)
      case $b in
        osu_barrier | osu_ibarrier) # no sizes, no validation
          echo "collective/$d/$b|$nps|-i 20 -x 2"
          continue ;;
      esac
      echo "collective/$d/$b|$nps|$COLL"
      case $b in
        *reduce*) # OSU's default MPI_CHAR, then int
          echo "collective/$d/$b|$nps|$COLL -T mpi_int" ;;
      esac
    done
  done
}

# ---- runs ----------------------------------------------------------------------------
pass=0 fail=0 failed=()
results=$work/results.txt
: >"$results"
mkdir -p "$work/logs"
adj=$work/ring2.adj
printf '# osu.sh: a ring of two ranks (source, destination)\n0, 1\n1, 0\n' >"$adj"
while IFS='|' read -r path np_list opts; do
  b=$(basename "$path")
  if [ -n "${NEXAR_OSU_ONLY:-}" ] && ! echo " $NEXAR_OSU_ONLY " | grep -q " $b "; then continue; fi
  exe=$mpi/$path
  for np in $np_list; do
    case $opts in *-T*) tag="$b np $np ${opts##*-T }" ;; *) tag="$b np $np" ;; esac
    out=$work/logs/$(echo "$tag" | tr ' ' '_').log
    if [ ! -x "$exe" ]; then
      fail=$((fail + 1)) failed+=("$tag")
      printf '%-45s FAIL (not built)\n' "$tag" | tee -a "$results"
      continue
    fi
    check=(-c) nhbr=()
    case $b in osu_barrier | osu_ibarrier) check=() ;; esac
    # OSU's default neighbourhood, a 1-D torus of radius 1, needs 3 ranks
    # or more: np 2 runs on a ring of two from an adjacency file instead
    case $path in */neighborhood/*) [ "$np" -lt 3 ] && nhbr=(-N "graph:$adj") ;; esac
    t0=$(date +%s.%N)
    rc=0
    # shellcheck disable=SC2086
    timeout -k 10 "$tmo" "$mpiexec" "${extra[@]}" -n "$np" "$exe" "${check[@]}" "${nhbr[@]}" $opts </dev/null >"$out" 2>&1 || rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    rows=$(grep -c -E '^ *[0-9]+(\.[0-9]+)? ' "$out" || true)
    [ "$rows" -gt 0 ] || rows=$(grep -c -E '^ *[0-9]+\.[0-9]+ *$' "$out" || true)
    why=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then why="timeout after ${tmo}s"
    elif [ "$rc" -ne 0 ]; then why="exit $rc"
    elif [ "$rows" -eq 0 ]; then why="no data rows"
    elif grep -q -E 'Fail|DATA VALIDATION ERROR' "$out"; then why="validation failed"
    elif [ ${#check[@]} -gt 0 ] && [ "$(grep -c -E '^ *[0-9].* Pass *$' "$out")" -ne "$rows" ]; then
      why="rows without Pass"
    fi
    if [ -z "$why" ]; then
      pass=$((pass + 1))
      printf '%-45s PASS %5ss %3s rows%s\n' "$tag" "$dt" "$rows" "${check[*]:+ validated}" | tee -a "$results"
    else
      fail=$((fail + 1)) failed+=("$tag")
      printf '%-45s FAIL %5ss %s (%s)\n' "$tag" "$dt" "$why" "$out" | tee -a "$results"
      tail -n 15 "$out" | sed 's/^/    | /'
    fi
  done
done < <(plan)

log "$pass passed, $fail failed; table in $results, logs in $work/logs"
[ "$fail" -eq 0 ] || { echo "osu: failed: ${failed[*]}"; exit 1; }
exit 0
