"""Allreduce from Python (docs/python.md): every rank contributes a numpy
array, all get the sum; then the same with a Python object.

    cmake -S . -B build && cmake --build build -j2
    PYTHONPATH=build/bindings/python build/tools/nexar-run -n 4 -- \\
        /usr/bin/python3 examples/python_allreduce.py
"""
import numpy as np

import nexar

with nexar.init() as ctx:
    comm = ctx.world
    x = np.arange(8, dtype=np.float32) * (comm.rank + 1)
    total = np.empty_like(x)
    comm.Allreduce(x, total, op=nexar.SUM)  # GIL released while it runs
    # Every rank holds sum over r of (r + 1) * i = i * size * (size + 1) / 2.
    want = np.arange(8, dtype=np.float32) * (comm.size * (comm.size + 1) // 2)
    assert total.tobytes() == want.tobytes()
    counts = comm.allreduce(comm.rank + 1)  # a Python object, pickled
    print("rank %d of %d: %s, object sum %d" % (comm.rank, comm.size, total, counts))
