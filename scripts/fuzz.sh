#!/bin/bash
# Runs each libFuzzer harness (tests/fuzz_*.c, built with CC=clang
# -DNEXAR_FUZZ=ON) for FUZZ_SECONDS on a copy of its corpus, then merges
# what it found back into tests/corpus/<name>/grown (libFuzzer -merge=1:
# only inputs that add coverage). One harness at a time; a crash stops the
# run with the input kept under $WORK/<name>/ (docs/testing.md).
#
#   scripts/fuzz.sh BUILD_DIR [harness...]      (default: every fuzz_*)
#   FUZZ_SECONDS (600), FUZZ_WORK (a temporary folder)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:?usage: fuzz.sh BUILD_DIR [harness...]}
shift
secs=${FUZZ_SECONDS:-600}
work=${FUZZ_WORK:-$(mktemp -d /tmp/nexar-fuzz.XXXXXX)}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$src"/tests/fuzz_*.c; do
    n=$(basename "$f" .c)
    names+=("${n#fuzz_}")
  done
fi
status=0
for n in "${names[@]}"; do
  exe=$bdir/tests/fuzz_$n
  corpus=$src/tests/corpus/$n
  mkdir -p "$work/$n/run" "$corpus/grown"
  cp -r "$corpus"/. "$work/$n/seed"
  echo "== fuzz_$n: $secs s on a copy of tests/corpus/$n"
  if ! "$exe" -max_total_time="$secs" -print_final_stats=1 \
      -artifact_prefix="$work/$n/" "$work/$n/run" "$work/$n/seed" \
      >"$work/$n/log" 2>&1; then
    echo "fuzz_$n FAILED: see $work/$n/log and $work/$n/crash-*"
    tail -40 "$work/$n/log"
    status=1
    continue
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' \
    "$work/$n/log" || true
  # Merge into a copy of the whole corpus, so that only inputs adding
  # coverage beyond it are kept; those go to tests/corpus/<name>/grown.
  mkdir -p "$work/$n/merged"
  find "$corpus" -type f -exec cp {} "$work/$n/merged/" \;
  ls "$work/$n/merged" | sort >"$work/$n/before"
  "$exe" -merge=1 "$work/$n/merged" "$work/$n/run" >"$work/$n/merge.log" 2>&1
  ls "$work/$n/merged" | sort | comm -13 "$work/$n/before" - |
    while read -r f; do cp "$work/$n/merged/$f" "$corpus/grown/"; done
  echo "fuzz_$n: $(ls "$corpus/grown" | wc -l) inputs in tests/corpus/$n/grown"
done
exit $status
