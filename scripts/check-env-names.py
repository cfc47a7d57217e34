#!/usr/bin/python3
"""Checks that the list of NEXAR_* names nexar knows cannot drift from the
names the source tree reads (docs/configuration.md, "Unknown variables").

Known names: the env field of every X(...) row of NEXAR__PARAM_TABLE and
every X("NAME", ...) row of NEXAR__ENV_OTHER (src/base/param.h). Names
read or set:
  - C/C++: every string literal that is exactly "NEXAR_..." (getenv,
    setenv, env_int(...) and the like) under src, tools, mpi, bindings,
    examples, tests, bench;
  - shell: $NEXAR_... and ${NEXAR_... in *.sh;
  - Python: environ["NEXAR_..."] and environ.get("NEXAR_...");
  - CMake: $ENV{NEXAR_...}.
Fails on a name read but not known, and on a NEXAR__ENV_OTHER name read
nowhere. NOT_VARIABLES lists literals that are not variables.

Usage: check-env-names.py [repository root]; exit status 1 on a failure.
"""
import os
import re
import sys

NOT_VARIABLES = {
    "NEXAR_ERR_CANCELLED", "NEXAR_ERR_UNKNOWN",  # result code names
    "NEXAR_X",  # an arbitrary name in test_config's message checks
    "NEXAR_HEARTBEAT_TIMEOUT",  # the typo test_env_names sets
    "NEXAR_ERR_",  # a result code's prefix test_flight looks for in a dump
    "NEXAR_IOV_MAX",  # a constant test_p2pv looks for in a message
}
DIRS = ["src", "tools", "mpi", "bindings", "examples", "tests", "bench",
        "scripts"]
PATTERNS = [
    ((".c", ".h", ".cpp", ".cc"), re.compile(r'"(NEXAR_[A-Z0-9_]+)"')),
    ((".sh",), re.compile(r'\$\{?(NEXAR_[A-Z0-9_]+)')),
    ((".py",), re.compile(r'environ(?:\.get\(|\[)\s*[\'"](NEXAR_[A-Z0-9_]+)')),
    ((".cmake", "CMakeLists.txt"), re.compile(r'\$ENV\{(NEXAR_[A-Z0-9_]+)\}')),
]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(os.path.join(root, "src/base/param.h")) as f:
        hdr = f.read()
    table = set(re.findall(r'X\((?:INT|STR),\s*\w+,\s*"(NEXAR_[A-Z0-9_]+)"',
                           hdr))
    other = set(re.findall(r'X\("(NEXAR_[A-Z0-9_]+)",', hdr))
    if len(table) < 20 or len(other) < 5:
        print("check-env-names: cannot parse src/base/param.h")
        return 1
    used = {}
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for fn in files:
                path = os.path.join(dirpath, fn)
                if os.path.relpath(path, root) == "src/base/param.h":
                    continue  # the lists themselves
                for ends, pat in PATTERNS:
                    if not fn.endswith(ends):
                        continue
                    with open(path, errors="replace") as f:
                        for no, line in enumerate(f, 1):
                            for name in pat.findall(line):
                                rel = os.path.relpath(path, root)
                                used.setdefault(name, f"{rel}:{no}")
    bad = 0
    for name, where in sorted(used.items()):
        if name in NOT_VARIABLES or name in table or name in other:
            continue
        print(f"{where}: {name} is read but is neither in NEXAR__PARAM_TABLE "
              "nor in NEXAR__ENV_OTHER (src/base/param.h)")
        bad = 1
    for name in sorted(other - set(used)):
        print(f"src/base/param.h: {name} (NEXAR__ENV_OTHER) is read nowhere")
        bad = 1
    if not bad:
        print(f"check-env-names: {len(used)} names read, all known "
              f"({len(table)} settings, {len(other)} other names)")
    return bad


if __name__ == "__main__":
    sys.exit(main())
