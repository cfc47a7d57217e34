#!/usr/bin/env bash
# The Debian package (docs/installing.md): cpack -G DEB from the build tree;
# the package holds the library (SONAME libnexar.so.0), headers, nexar.pc,
# the CMake package, tools and man pages; its dependencies resolve on this
# system (apt-get's simulation, nothing installed); the tools it holds run.
# Usage: test_deb.sh CPACK BUILD_DIR
set -euo pipefail
cpack=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_deb: $*" >&2; exit 1; }

(cd "$build" && timeout 480 "$cpack" -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$(ls "$tmp"/out/nexar_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack made no nexar_*.deb"
echo "package: $(basename "$deb")"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for d in libgnutls30 libngtcp2-9 libngtcp2-crypto-gnutls2 libc6; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d"
done

dpkg-deb -c "$deb" >"$tmp/contents"
for f in ./usr/include/nexar.h ./usr/include/nexar_version.h \
  ./usr/lib/libnexar.a ./usr/lib/pkgconfig/nexar.pc \
  ./usr/lib/cmake/nexar/nexarConfig.cmake ./usr/bin/nexar-run \
  ./usr/bin/nexar-seed ./usr/bin/nexar-perf ./usr/bin/nexar-trace \
  ./usr/bin/nexar-inspect \
  ./usr/share/man/man1/nexar-run.1; do
  grep -q " $f\$" "$tmp/contents" || grep -q " $f " "$tmp/contents" ||
    fail "the package lacks $f"
done

# Every dependency resolves (nothing is installed: -s simulates).
apt-get install -s "$deb" >"$tmp/apt.log" 2>&1 ||
  { cat "$tmp/apt.log" >&2; fail "apt-get cannot install it"; }
grep -q '^Inst nexar' "$tmp/apt.log" ||
  { cat "$tmp/apt.log" >&2; fail "apt-get's simulation does not install nexar"; }

dpkg-deb -x "$deb" "$tmp/root"
so=$(ls "$tmp"/root/usr/lib/libnexar.so.*.*.* | head -1)
readelf -d "$so" | grep -q 'SONAME.*libnexar.so.0' || fail "$so: SONAME is not libnexar.so.0"
v=$("$tmp/root/usr/bin/nexar-run" --version | head -1)
[[ $v == "nexar-run (nexar) "* ]] || fail "nexar-run --version printed '$v'"
# The Python package (docs/python.md), when the build has it: importable
# from the extracted tree, its extension finding the package's libnexar.so.
site=$(ls -d "$tmp"/root/usr/lib/python3*/dist-packages 2>/dev/null | head -1 || true)
if [ -n "$site" ]; then
  # shellcheck disable=SC2086 # NEXAR_TEST_PY_ENV is a list of VAR=value
  pv=$(env ${NEXAR_TEST_PY_ENV:-} PYTHONPATH=$site /usr/bin/python3 -c 'import nexar; print(nexar.version())') ||
    fail "import nexar from the package"
  [ "$pv" = "${v##* }" ] || fail "nexar.version() printed '$pv'"
  echo "python: import nexar $pv from ${site#"$tmp"/root}"
fi
echo "ok test_deb ($v; $(wc -l <"$tmp/contents") entries)"
