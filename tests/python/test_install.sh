#!/usr/bin/env bash
# test_python_install: `cmake --install` puts the nexar package (extension,
# Python files, type stubs) under PREFIX/PYDIR; with PYTHONPATH set to that
# directory it imports from there (not from the build tree), finds the
# installed libnexar.so by its RPATH, and runs an allreduce on 2 ranks
# under the installed nexar-run.
#
# usage: test_install.sh CMAKE BUILD_DIR PYTHON PYDIR
set -u
if [ $# -ne 4 ]; then
  echo "usage: $0 CMAKE BUILD_DIR PYTHON PYDIR" >&2
  exit 2
fi
cmake=$1 build=$2 python=$3 pydir=$4
. "$(dirname "$0")/../lib.sh" test_python_install
unset LD_LIBRARY_PATH
p=$tmp/prefix
"$cmake" --install "$build" --prefix "$p" >"$tmp/out" 2>"$tmp/err" ||
  fail "cmake --install"
site=$p/$pydir
for f in __init__.py __init__.pyi _nexar.pyi py.typed; do
  [ -f "$site/nexar/$f" ] || fail "not installed: $pydir/nexar/$f"
done
ls "$site"/nexar/_nexar.cpython-*.so >/dev/null 2>&1 || fail "no extension in $site/nexar"
cat >"$tmp/job.py" <<'PY'
import sys
import numpy as np
import nexar
assert nexar.__file__.startswith(sys.argv[1]), nexar.__file__
with nexar.init() as ctx:
    x = np.array([ctx.world.rank + 1], np.int64)
    ctx.world.Allreduce(nexar.IN_PLACE, x)
    print("sum", int(x[0]), "from", nexar.__file__)
PY
PYTHONPATH=$site timeout 60 "$p/bin/nexar-run" -n 2 -t 40 -- "$python" "$tmp/job.py" "$site" \
  >"$tmp/out" 2>"$tmp/err" || fail "the job on the installed package"
for r in 0 1; do
  grep -q "^\[$r\] sum 3 from $site/nexar/__init__.py$" "$tmp/out" || fail "rank $r"
done
echo "test_python_install: OK ($site)"
