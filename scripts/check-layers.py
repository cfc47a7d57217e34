#!/usr/bin/python3
"""Checks nexar's layering (docs/architecture.md): every part of src/ may use
its own part and the parts below it, never one above or beside it.

  wire < base < device < transport < core < p2p < {coll, rpc, cluster} < api

Rules, each failure listed as file:line:
  1. An `#include "..."` of a part that is not below the includer's part
     (coll, rpc and cluster are beside each other), or of the retired
     nexar_int.h. EXCEPTIONS (file, part) lift rules 1 and 3 for one file.
  2. No import circle between parts (over the includes, exceptions too).
  3. A call of a function defined in a part that the caller may not
     include (a name defined at the start of a line in that part's .c files).
  4. An exception that nothing needs any more is a failure too.
  5. No `ngtcp2_` name outside src/transport/quic*.{c,h} and
     src/transport/tls.c; no `nexar__conn_` anywhere.

Usage: check-layers.py [repository root]; exit status 1 on any failure.
"""
import os
import re
import sys

LEVEL = {"wire": 0, "base": 1, "device": 2, "transport": 3, "core": 4,
         "p2p": 5, "coll": 6, "rpc": 6, "cluster": 6, "api": 7}

# (file, part it may use although it is not below, why). Keep this short.
EXCEPTIONS = [
    ("src/cluster/elastic.c", "coll",
     "a checkpoint agrees on the new world with public collectives "
     "(nexar_barrier, nexar_bcast, nexar_allgather) on a user thread"),
]

NGTCP2_OK = re.compile(r"^src/transport/(quic[^/]*\.[ch]|tls\.c)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
DEF = re.compile(r"^[A-Za-z][^;=(]*?\b(nexar_\w+)\s*\(")
CALL = re.compile(r"\b(nexar_\w+)\s*\(")


def part_of(path):
    """The part of a repository path under src/, or None."""
    bits = path.split("/")
    if len(bits) >= 3 and bits[0] == "src" and bits[1] in LEVEL:
        return bits[1]
    return None


USED = set()


def allowed(src_file, src, dst):
    if dst is None or dst == src:
        return True
    if LEVEL[dst] < LEVEL[src]:
        return True
    if (src_file, dst) in {(f, p) for f, p, _ in EXCEPTIONS}:
        USED.add((src_file, dst))
        return True
    return False


def strip_code(text):
    """|text| with comments and string/char literals blanked (lines kept)."""
    out = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()),
                 text, flags=re.S)
    out = re.sub(r"//[^\n]*", "", out)
    return re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', out)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = []
    for d, _, names in os.walk(os.path.join(root, "src")):
        for n in names:
            if n.endswith((".c", ".h")):
                files.append(os.path.relpath(os.path.join(d, n), root))
    files.sort()
    texts = {f: open(os.path.join(root, f), encoding="utf-8").read()
             for f in files}
    bad = []
    edges = {}
    defined = {}  # function name -> part
    for f in files:
        if f.endswith(".c") and part_of(f):
            for line in strip_code(texts[f]).split("\n"):
                m = DEF.match(line)
                if m and not line.startswith(("static", "typedef", "struct")):
                    defined.setdefault(m.group(1), part_of(f))
    for f in files:
        src = part_of(f)
        code = strip_code(texts[f])
        for no, line in enumerate(texts[f].split("\n"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            if os.path.basename(inc) == "nexar_int.h":
                bad.append(f"{f}:{no}: includes the retired {inc}")
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(f), inc))
            if not os.path.exists(os.path.join(root, target)):
                target = os.path.normpath(os.path.join("src", inc))
            dst = part_of(target)
            if src and dst and dst != src:
                edges.setdefault(src, set()).add(dst)
            if src and not allowed(f, src, dst):
                bad.append(f"{f}:{no}: {src} includes {inc} ({dst}), "
                           f"which is not below it")
        for no, line in enumerate(code.split("\n"), 1):
            if src:
                for name in CALL.findall(line):
                    dst = defined.get(name)
                    if dst and not allowed(f, src, dst) and \
                            not DEF.match(line):
                        bad.append(f"{f}:{no}: {src} calls {name} ({dst}), "
                                   f"which is not below it")
            if "ngtcp2_" in line and not NGTCP2_OK.match(f):
                bad.append(f"{f}:{no}: ngtcp2_ name outside the QUIC "
                           f"transport")
            if "nexar__conn_" in line:
                bad.append(f"{f}:{no}: nexar__conn_ name")
    for f, p, _ in EXCEPTIONS:
        if (f, p) not in USED:
            bad.append(f"{f}: exception for {p} is no longer needed")
    # Circles among the parts.
    state = {}

    def visit(p, stack):
        state[p] = 1
        for q in sorted(edges.get(p, ())):
            if state.get(q) == 1:
                bad.append("import circle: " +
                           " -> ".join(stack[stack.index(q):] + [q]))
            elif not state.get(q):
                visit(q, stack + [q])
        state[p] = 2

    for p in sorted(edges):
        if not state.get(p):
            visit(p, [p])
    for b in bad:
        print(b)
    if bad:
        print(f"check-layers: {len(bad)} failure(s); the order is "
              "wire < base < device < transport < core < p2p < "
              "{coll, rpc, cluster} < api (docs/architecture.md)")
        return 1
    print(f"check-layers: {len(files)} files, {len(defined)} functions: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
