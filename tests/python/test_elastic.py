"""Elastic membership from Python (run under nexar-run -n 2 --max-world 3):
rank 0 starts a third process with NEXAR_JOIN=1; the members call
ctx.elastic_checkpoint() until it is admitted (its nexar.init returns at
that point), the three check an Allreduce, then rank 1 leaves at a second
checkpoint and the other two check an Allreduce on the world of 2."""
import os
import subprocess
import sys
import time

import numpy as np

import nexar

JOINER = len(sys.argv) > 1 and sys.argv[1] == "--joiner"


def fail(msg):
    print("FAIL " + msg, file=sys.stderr, flush=True)
    os._exit(1)


def allreduce_check(comm, want_size):
    x = np.array([comm.rank + 1], np.int64)
    comm.Allreduce(nexar.IN_PLACE, x)
    if comm.size != want_size or x[0] != want_size * (want_size + 1) // 2:
        fail("allreduce on %d ranks: %d" % (comm.size, x[0]))


ctx = nexar.init()
comm = ctx.world
joiner = None
if JOINER:
    if (comm.rank, comm.size) != (2, 3):
        fail("joiner is rank %d of %d" % (comm.rank, comm.size))
else:
    if comm.rank == 0:
        env = dict(os.environ, NEXAR_JOIN="1")
        env.pop("NEXAR_RANK", None)
        joiner = subprocess.Popen([sys.executable, __file__, "--joiner"], env=env)
    for attempt in range(100):
        m = ctx.elastic_checkpoint()
        if m.joined:
            break
        time.sleep(0.1)
    if (m.joined, m.new_size, m.new_rank, m.old_size) != (1, 3, comm.rank, 2):
        fail("membership %r" % (m,))
allreduce_check(comm, 3)
leaving = comm.rank == 1
m = ctx.elastic_checkpoint(leave=leaving)
if m.left != 1 or leaving != (m.new_rank == -1):
    fail("leave: %r" % (m,))
if m.new_rank >= 0:
    allreduce_check(comm, 2)
ctx.finalize()
if joiner is not None and joiner.wait(timeout=60) != 0:
    fail("the joiner exited with %d" % joiner.returncode)
print("ok elastic", "joiner" if JOINER else "member", m, flush=True)
