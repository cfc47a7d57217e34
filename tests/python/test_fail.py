"""A peer killed mid-job (run under nexar-run -n 2 --tolerate-kill with
NEXAR_HEARTBEAT_MS=200 NEXAR_HEARTBEAT_TIMEOUT_MS=2000): rank 1 kills
itself with SIGKILL while rank 0 waits in Recv from it; rank 0 must get
nexar.PeerFailedError within the heartbeat timeout, its failure handler
must be called with the failed process, and nexar.failures lists it."""
import os
import signal
import sys
import threading
import time

import numpy as np

import nexar

TIMEOUT_S = int(os.environ["NEXAR_HEARTBEAT_TIMEOUT_MS"]) / 1000


def fail(msg):
    print("FAIL " + msg, file=sys.stderr, flush=True)
    os._exit(1)


ctx = nexar.init()
comm = ctx.world
if comm.size != 2:
    fail("run on 2 ranks")
events = []
seen = threading.Event()


def on_failure(f):
    events.append(f)
    seen.set()


ctx.set_failure_handler(on_failure)
comm.Barrier()
if comm.rank == 1:
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)

t0 = time.monotonic()
try:
    comm.Recv(np.zeros(4, np.float32), 1, 0)
    fail("Recv from a killed peer returned")
except nexar.PeerFailedError as e:
    took = time.monotonic() - t0
    print("PeerFailedError after %.2f s: %s" % (took, e), flush=True)
    if e.code != -5 or not str(e):
        fail("code %r, message %r" % (e.code, str(e)))
    if took > TIMEOUT_S + 1.0:
        fail("%.2f s, heartbeat timeout %.1f s" % (took, TIMEOUT_S))
if not seen.wait(TIMEOUT_S + 2):
    fail("the failure handler was not called")
f = events[0]
if f.id != 1 or f.reason not in (nexar.FAIL_HEARTBEAT, nexar.FAIL_CONNECTION,
                                 nexar.FAIL_REPORTED, nexar.FAIL_UNREACHABLE):
    fail("failure %r" % (f,))
if [x.id for x in ctx.failures()] != [1]:
    fail("failures() %r" % (ctx.failures(),))
# Under the default policy (abort) the world is revoked: calls fail at once.
try:
    comm.Barrier()
    fail("Barrier on a revoked world returned")
except (nexar.RevokedError, nexar.PeerFailedError):
    pass
ctx.finalize()
print("ok peer failure:", f, flush=True)
