# Shared by the shell tests: a scratch directory removed on exit ($tmp) and
# fail(), which prints the last command's captured output and exits 1.
# Usage: . "$(dirname "$0")/lib.sh" NAME

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/out "$tmp"/err; do
    [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
  done
  exit 1
}
