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

# seed_port FILE: the port nexar-seed says in FILE (its stderr) that it
# listens on, waiting up to 10 s for it; empty if it never says.
seed_port() {
  local port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on .*:\([0-9]*\), waiting.*/\1/p' "$1")
    [ -n "$port" ] && break
    sleep 0.1
  done
  echo "$port"
}
