"""nexar: Python binding of the nexar communication runtime (docs/python.md).

    import numpy as np, nexar
    with nexar.init() as ctx:
        comm = ctx.world
        x = np.full(4, comm.rank, dtype=np.float32)
        comm.Allreduce(nexar.IN_PLACE, x, op=nexar.SUM)

Buffer methods (capitalised, as in mpi4py) take anything with the buffer
protocol; lowercase methods move any picklable Python object.
"""
import atexit
import functools
import operator
import pickle
import struct

from . import _nexar
from ._nexar import *  # noqa: F401,F403  constants, exceptions, types
from ._nexar import ANY_SOURCE, ANY_TAG, Error, InvalidArgError, InvalidUsageError

__version__ = _nexar.version()

_OBJ_OPS = {
    _nexar.SUM: operator.add,
    _nexar.PROD: operator.mul,
    _nexar.MAX: max,
    _nexar.MIN: min,
    _nexar.BAND: operator.and_,
    _nexar.BOR: operator.or_,
    _nexar.BXOR: operator.xor,
}


def _dumps(obj):
    return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


def _lengths(n):
    """A writable int64 buffer of n zeros."""
    return memoryview(bytearray(8 * n)).cast("q")


class Comm(_nexar.Comm):
    """A communicator: buffer methods from the extension, object methods
    (pickle) here. Objects received are unpickled: the peers are the
    authenticated members of the cluster, trusted as in mpi4py."""

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def barrier(self):
        self.Barrier()

    def send(self, obj, dest, tag=0):
        data = _dumps(obj)
        self.Send(struct.pack("<q", len(data)), dest, tag)
        self.Send(data, dest, tag)

    def recv(self, source=ANY_SOURCE, tag=ANY_TAG):
        head = bytearray(8)
        st = self.Recv(head, source, tag)
        data = bytearray(struct.unpack("<q", head)[0])
        # The payload follows its length on the same (source, tag).
        self.Recv(data, st.source, st.tag)
        return pickle.loads(data)

    def bcast(self, obj=None, root=0):
        n = _lengths(1)
        data = bytearray(_dumps(obj)) if self.rank == root else None
        if data is not None:
            n[0] = len(data)
        self.Bcast(n, root)
        if data is None:
            data = bytearray(n[0])
        self.Bcast(data, root)
        return pickle.loads(data)

    def gather(self, obj, root=0):
        data = _dumps(obj)
        n = _lengths(1)
        n[0] = len(data)
        if self.rank != root:
            self.Gather(n, None, root)
            self.Gatherv(data, None, root=root)
            return None
        counts = _lengths(self.size)
        self.Gather(n, counts, root)
        out = bytearray(sum(counts))
        self.Gatherv(data, out, list(counts), root=root)
        return _split(out, counts)

    def allgather(self, obj):
        data = _dumps(obj)
        n = _lengths(1)
        n[0] = len(data)
        counts = _lengths(self.size)
        self.Allgather(n, counts)
        out = bytearray(sum(counts))
        self.Allgatherv(data, out, list(counts))
        return _split(out, counts)

    def scatter(self, objs=None, root=0):
        n = _lengths(1)
        if self.rank != root:
            self.Scatter(None, n, root)
            data = bytearray(n[0])
            self.Scatterv(None, data, root=root)
            return pickle.loads(data)
        data, counts = _pack(objs, self.size, "scatter")
        self.Scatter(counts, n, root)
        out = bytearray(n[0])
        self.Scatterv(data, out, list(counts), root=root)
        return pickle.loads(out)

    def alltoall(self, objs):
        data, scounts = _pack(objs, self.size, "alltoall")
        rcounts = _lengths(self.size)
        self.Alltoall(scounts, rcounts)
        out = bytearray(sum(rcounts))
        self.Alltoallv(data, out, list(scounts), list(rcounts))
        return _split(out, rcounts)

    def reduce(self, obj, op=_nexar.SUM, root=0):
        objs = self.gather(obj, root)
        return None if objs is None else _reduce(objs, op)

    def allreduce(self, obj, op=_nexar.SUM):
        return _reduce(self.allgather(obj), op)


def _pack(objs, size, what):
    """One pickle per rank, concatenated, and their lengths."""
    if objs is None or len(objs) != size:
        raise InvalidArgError(
            "%s: needs a sequence of %d objects" % (what, size))
    parts = [_dumps(o) for o in objs]
    counts = _lengths(size)
    for i, p in enumerate(parts):
        counts[i] = len(p)
    return b"".join(parts), counts


def _split(buf, counts):
    out, at = [], 0
    for n in counts:
        out.append(pickle.loads(buf[at:at + n]))
        at += n
    return out


def _reduce(objs, op):
    """Combines objs in rank order with a nexar op or a callable f(a, b)."""
    if op == _nexar.AVG:
        return functools.reduce(operator.add, objs) / len(objs)
    fn = _OBJ_OPS.get(op, op) if isinstance(op, int) else op
    if not callable(fn):
        raise InvalidArgError("unknown reduction op %r" % (op,))
    return functools.reduce(fn, objs)


# Every context made (a context lives until the process ends anyway).
_contexts = []


def init(**config):
    """Joins the cluster (nexar_init) and returns a Context.

    Settings not given come from the NEXAR_* environment (nexar-run sets
    them): seed_addr, secret, secret_file, world_size, rank, bind_addr,
    advertise_addr, bootstrap_timeout_ms, op_timeout_ms, topology.
    The GIL is released while it waits for the other ranks."""
    ctx = _nexar.init(Comm, **config)
    _contexts.append(ctx)
    return ctx


def waitall(requests):
    """Waits for every request; returns their Status list, or raises the
    first error once all have completed."""
    statuses, first = [], None
    for r in requests:
        try:
            statuses.append(r.wait())
        except Error as e:
            statuses.append(None)
            first = first or e
    if first is not None:
        raise first
    return statuses


def __getattr__(name):
    # nexar.COMM_WORLD: the world of the live context (as in mpi4py).
    if name == "COMM_WORLD":
        live = [c for c in _contexts if not c.closed]
        if len(live) != 1:
            raise InvalidUsageError(
                "nexar.COMM_WORLD needs exactly one live context "
                "(call nexar.init()); there are %d" % len(live))
        return live[0].world
    raise AttributeError("module 'nexar' has no attribute %r" % name)


@atexit.register
def _finalize_at_exit():
    # Finalize before the interpreter goes, so that no library thread
    # (RPC or failure handler) reaches for the GIL afterwards.
    for ctx in _contexts:
        try:
            ctx.finalize()
        except Error:
            # Say, a daemon thread still inside a call: end its operations.
            try:
                ctx.abort()
            except Error:
                pass
