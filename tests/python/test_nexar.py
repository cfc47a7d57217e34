"""The Python binding on real processes (run under nexar-run -n 1, 2, 4).

Every buffer collective and p2p call is checked bit for bit against numpy
on data every rank can recompute (values chosen so that any order of
combination gives the same bits), for several datatypes; then the pickled
object methods, Split/Dup/Free, requests, RPC to Python handlers, bad input
and the GIL. Exits non-zero at the first failed check (nexar-run then stops
the others).
"""
import os
import sys
import threading
import time
import weakref

import numpy as np

import nexar

DTYPES = [np.float16, np.int8, np.float64, np.float32, np.int32, np.uint64]


def fail(msg):
    """Ends this process at once: a finalize (collective) would wait for
    the other ranks; nexar-run stops them when one fails."""
    print("FAIL " + msg, file=sys.stderr, flush=True)
    os._exit(1)


def data(rank, n, dtype, salt=0):
    """Rank |rank|'s input: small integers, exact in every dtype."""
    rng = np.random.default_rng(1000 * salt + rank)
    lo = 0 if np.dtype(dtype).kind == "u" else -8
    return rng.integers(lo, 9, n).astype(dtype)


def expect(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape or \
            got.tobytes() != want.tobytes():
        fail("%s: got %r, want %r" % (what, got, want))


def wrap_sum(arrays, dtype):
    """Elementwise sum with the dtype's own arithmetic (int8 wraps)."""
    acc = np.zeros_like(arrays[0], dtype=np.float64 if np.dtype(dtype).kind == "f" else np.int64)
    for a in arrays:
        acc = acc + a
    return acc.astype(dtype)


def check_collectives(comm):
    r, p = comm.rank, comm.size
    n = 5
    for dt in DTYPES:
        name = np.dtype(dt).name
        mine = data(r, n, dt)
        alls = [data(q, n, dt) for q in range(p)]

        out = np.empty(n, dt)
        comm.Allreduce(mine, out, op=nexar.SUM)
        expect(out, wrap_sum(alls, dt), "Allreduce sum " + name)
        out = mine.copy()
        comm.Allreduce(nexar.IN_PLACE, out, op=nexar.MAX)
        expect(out, np.max(alls, axis=0).astype(dt), "Allreduce max in place " + name)
        comm.Allreduce(mine, out, op=nexar.MIN)
        expect(out, np.min(alls, axis=0).astype(dt), "Allreduce min " + name)

        root = p - 1
        buf = mine.copy() if r == root else np.zeros(n, dt)
        comm.Bcast(buf, root=root)
        expect(buf, alls[root], "Bcast " + name)

        out = np.zeros(n, dt) if r == 0 else None
        comm.Reduce(mine, out, op=nexar.SUM, root=0)
        if r == 0:
            expect(out, wrap_sum(alls, dt), "Reduce " + name)

        out = np.empty(n * p, dt)
        comm.Allgather(mine, out)
        expect(out, np.concatenate(alls), "Allgather " + name)

        counts = [q + 1 for q in range(p)]
        part = [data(q, q + 1, dt, 1) for q in range(p)]
        out = np.zeros(sum(counts) + 2, dt)
        displs = [sum(counts[:q]) + 2 for q in range(p)]
        comm.Allgatherv(part[r], out, counts, displs)
        expect(out, np.concatenate([np.zeros(2, dt)] + part), "Allgatherv " + name)

        big = [data(q, n * p, dt, 2) for q in range(p)]
        out = np.empty(n, dt)
        comm.Reduce_scatter(big[r], out, op=nexar.SUM)
        expect(out, wrap_sum(big, dt)[r * n:(r + 1) * n], "Reduce_scatter block " + name)
        total = sum(counts)
        big = [data(q, total, dt, 3) for q in range(p)]
        out = np.empty(counts[r], dt)
        comm.Reduce_scatter(big[r], out, recvcounts=counts, op=nexar.SUM)
        off = sum(counts[:r])
        expect(out, wrap_sum(big, dt)[off:off + counts[r]], "Reduce_scatter v " + name)

        send = [data(q, n * p, dt, 4) for q in range(p)]
        out = np.empty(n * p, dt)
        comm.Alltoall(send[r], out)
        expect(out, np.concatenate([send[q][r * n:(r + 1) * n] for q in range(p)]),
               "Alltoall " + name)

        # Alltoallv: rank q sends (q + j + 1) elements to rank j.
        sc = [[q + j + 1 for j in range(p)] for q in range(p)]
        sbufs = [data(q, sum(sc[q]), dt, 5) for q in range(p)]
        rc = [sc[q][r] for q in range(p)]
        out = np.empty(sum(rc), dt)
        comm.Alltoallv(sbufs[r], out, sc[r], rc)
        want = [sbufs[q][sum(sc[q][:r]):sum(sc[q][:r + 1])] for q in range(p)]
        expect(out, np.concatenate(want), "Alltoallv " + name)

        out = np.empty(n * p, dt) if r == root else None
        comm.Gather(mine, out, root=root)
        if r == root:
            expect(out, np.concatenate(alls), "Gather " + name)
        out = np.empty(total, dt) if r == 0 else None
        comm.Gatherv(part[r], out, counts if r == 0 else None, root=0)
        if r == 0:
            expect(out, np.concatenate(part), "Gatherv " + name)

        src = data(99, n * p, dt, 6)
        out = np.empty(n, dt)
        comm.Scatter(src if r == 0 else None, out, root=0)
        expect(out, src[r * n:(r + 1) * n], "Scatter " + name)
        src = data(98, total, dt, 7)
        out = np.empty(counts[r], dt)
        comm.Scatterv(src if r == root else None, out,
                      counts if r == root else None, root=root)
        expect(out, src[off:off + counts[r]], "Scatterv " + name)

        out = np.empty(n, dt)
        comm.Scan(mine, out, op=nexar.SUM)
        expect(out, wrap_sum(alls[:r + 1], dt), "Scan " + name)
        out = np.full(n, 7, dt)
        comm.Exscan(mine, out, op=nexar.MAX)
        want = np.full(n, 7, dt) if r == 0 else np.max(alls[:r], axis=0).astype(dt)
        expect(out, want, "Exscan " + name)
    comm.Barrier()


def check_bfloat16(comm):
    """numpy has no bfloat16: uint16 bits with dtype=nexar.BFLOAT16."""
    r, p = comm.rank, comm.size
    vals = [data(q, 6, np.float32) for q in range(p)]

    def bits(f32):
        return (f32.view(np.uint32) >> 16).astype(np.uint16)

    out = np.empty(6, np.uint16)
    comm.Allreduce(bits(vals[r]), out, op=nexar.SUM, dtype=nexar.BFLOAT16)
    expect(out, bits(np.sum(vals, axis=0).astype(np.float32)), "Allreduce bfloat16")
    out2 = np.empty(6, np.uint16)
    comm.Allreduce(bits(vals[r]), out2, op=nexar.SUM, dtype="bfloat16")
    expect(out2, out, "Allreduce dtype='bfloat16'")


def check_p2p(comm):
    r, p = comm.rank, comm.size
    right, left = (r + 1) % p, (r - 1) % p
    for dt in DTYPES:
        send = data(r, 9, dt, 8)
        out = np.empty(9, dt)
        rq = comm.Irecv(out, source=left, tag=5)
        comm.Send(send, right, tag=5)
        st = rq.wait()
        expect(out, data(left, 9, dt, 8), "Send/Irecv " + np.dtype(dt).name)
        if (st.source, st.tag, st.count, st.bytes) != (left, 5, 9, out.nbytes):
            fail("status %r" % (st,))
    # Isend + Recv into a bytearray and a memoryview, ANY_SOURCE.
    sq = comm.Isend(bytes([r]) * 3, right, tag=6)
    got = bytearray(3)
    st = comm.Recv(memoryview(got), nexar.ANY_SOURCE, 6)
    sq.wait()
    if got != bytes([left]) * 3 or st.source != left or st.count != 3:
        fail("Isend/Recv bytearray: %r %r" % (got, st))
    # A request keeps its buffer alive; test() then wait(); waitall.
    arr = np.zeros(4, np.int32)
    ref = weakref.ref(arr)
    rq = comm.Irecv(arr, left, 7)
    del arr
    if ref() is None:
        fail("the request let its buffer go")
    comm.Send(np.full(4, r, np.int32), right, 7)
    while not rq.test():
        time.sleep(0.001)
    if ref() is not None:
        fail("the completed request still holds its buffer")
    if rq.status.count != 4:
        fail("request status %r" % (rq.status,))
    bufs = [np.zeros(2, np.float64) for _ in range(3)]
    reqs = [comm.Irecv(b, left, 10 + i) for i, b in enumerate(bufs)]
    reqs += [comm.Isend(np.full(2, r + i, np.float64), right, 10 + i) for i in range(3)]
    sts = nexar.waitall(reqs)
    for i, b in enumerate(bufs):
        expect(b, np.full(2, left + i, np.float64), "waitall %d" % i)
    if len(sts) != 6 or sts[0].source != left:
        fail("waitall statuses %r" % (sts,))
    # Non-blocking collective.
    x = np.full(3, r + 1, np.int64)
    comm.Iallreduce(nexar.IN_PLACE, x).wait()
    expect(x, np.full(3, p * (p + 1) // 2, np.int64), "Iallreduce")
    comm.Ibarrier().wait()


def check_objects(comm):
    r, p = comm.rank, comm.size
    obj = {"rank": r, "list": list(range(r))}
    if comm.allgather(obj) != [{"rank": q, "list": list(range(q))} for q in range(p)]:
        fail("allgather")
    if comm.bcast(obj if r == 0 else None, root=0) != {"rank": 0, "list": []}:
        fail("bcast")
    g = comm.gather(("x", r), root=p - 1)
    if (r == p - 1 and g != [("x", q) for q in range(p)]) or (r != p - 1 and g is not None):
        fail("gather %r" % (g,))
    s = comm.scatter([q * 10 for q in range(p)] if r == 0 else None, root=0)
    if s != r * 10:
        fail("scatter %r" % (s,))
    if comm.allreduce(r + 1) != p * (p + 1) // 2 or comm.allreduce(r, op=nexar.MAX) != p - 1:
        fail("allreduce")
    if comm.allreduce([r], op=lambda a, b: a + b) != list(range(p)):
        fail("allreduce with a callable")
    if comm.alltoall([(r, q) for q in range(p)]) != [(q, r) for q in range(p)]:
        fail("alltoall")
    right, left = (r + 1) % p, (r - 1) % p
    comm.send({"from": r, "blob": b"z" * 70000}, right, tag=3)
    got = comm.recv(source=left, tag=3)
    if got != {"from": left, "blob": b"z" * 70000}:
        fail("send/recv object")
    comm.barrier()


def check_comms(comm):
    r, p = comm.rank, comm.size
    sub = comm.Split(r % 2, key=-r)
    members = [q for q in range(p) if q % 2 == r % 2]
    if sub.size != len(members) or sub.rank != len(members) - 1 - members.index(r):
        fail("Split rank/size %d/%d" % (sub.rank, sub.size))
    x = np.array([r], np.int32)
    sub.Allreduce(nexar.IN_PLACE, x)
    expect(x, np.array([sum(members)], np.int32), "Allreduce on a split")
    if type(sub) is not type(comm) or sub.allgather(r) != members[::-1]:
        fail("split's object methods")
    none = comm.Split(nexar.UNDEFINED if r == 0 else 0)
    if (r == 0) != (none is None):
        fail("Split UNDEFINED")
    if none is not None:
        none.Free()
    dup = comm.Dup()
    if (dup.rank, dup.size) != (r, p) or dup == comm:
        fail("Dup")
    dup.Barrier()
    dup.Free()
    sub.Free()
    try:
        dup.Barrier()
        fail("a freed communicator still works")
    except nexar.ClosedError:
        pass
    try:
        comm.Free()
        fail("the world was freed")
    except nexar.InvalidUsageError:
        pass


def check_rpc(comm):
    r, p = comm.rank, comm.size
    seen = []

    def echo(caller, fn_id, request):
        seen.append(caller)
        return bytes(reversed(request)) + bytes([r])

    def fails(caller, fn_id, request):
        if request == b"code":
            return -42
        raise RuntimeError("handler failure (expected by the test)")

    def finalize_inside(caller, fn_id, request):
        try:
            comm.context.finalize()
            return -1
        except nexar.InvalidUsageError:
            return b"refused"

    comm.rpc_register(7, echo)
    comm.rpc_register(8, fails)
    comm.rpc_register(11, finalize_inside)
    comm.Barrier()
    dest = (r + 1) % p
    resp = comm.rpc_call(dest, 7, b"abc")
    if resp != b"cba" + bytes([dest]):
        fail("rpc_call: %r" % (resp,))
    if comm.rpc_call(r, 7) != bytes([r]):
        fail("rpc_call to self")
    try:
        comm.rpc_call(dest, 8, b"code")
        fail("handler code")
    except nexar.RpcHandlerError as e:
        if e.rpc_code != -42 or e.code != -17:
            fail("rpc_code %r" % (e.rpc_code,))
    try:
        comm.rpc_call(dest, 9)
        fail("unknown function")
    except nexar.RpcUnknownFunctionError:
        pass
    try:
        comm.rpc_call(dest, 7, b"x" * 10, resp_cap=4)
        fail("truncation")
    except nexar.TruncateError:
        pass
    if comm.rpc_call(r, 11) != b"refused":
        fail("finalize from a handler")
    comm.Barrier()
    comm.rpc_unregister(11)
    comm.rpc_unregister(7)
    comm.rpc_unregister(8)
    if len(seen) < 2:
        fail("handler saw %r" % (seen,))


def check_bad_input(comm):
    r, p = comm.rank, comm.size
    f32 = np.zeros(4 * p, np.float32)

    def bad(exc, fn, *args, **kw):
        try:
            fn(*args, **kw)
        except exc as e:
            if not str(e):
                fail("empty message for %s" % exc.__name__)
            return
        fail("%s%r did not raise %s" % (fn.__name__, args, exc.__name__))

    bad(nexar.InvalidArgError, comm.Allreduce, f32[::2], np.zeros(2 * p, np.float32))
    bad(nexar.InvalidArgError, comm.Recv, b"read-only", 0)
    bad(nexar.InvalidArgError, comm.Allreduce, f32, np.zeros(3, np.float32))
    bad(nexar.InvalidArgError, comm.Allreduce, f32, np.zeros(4 * p, np.float64))
    bad(nexar.InvalidArgError, comm.Allreduce, np.zeros(2, np.int16), np.zeros(2, np.int16))
    bad(nexar.InvalidArgError, comm.Allreduce, np.zeros(2, ">f4"), np.zeros(2, ">f4"))
    bad(ValueError, comm.Allgather, f32, np.zeros(4 * p + 1, np.float32))
    bad(nexar.InvalidArgError, comm.Allgatherv, f32[:1], f32, [1] * (p + 1))
    bad(nexar.InvalidArgError, comm.Allgatherv, f32[:1], f32, [5 * p] * p)
    bad(nexar.InvalidArgError, comm.Allgatherv, f32[:1], f32, [-1] * p)
    bad(nexar.InvalidArgError, comm.Allreduce, f32, f32.copy(), dtype="complex")
    bad(nexar.InvalidArgError, comm.Allreduce, np.zeros(3, np.uint8), np.zeros(3, np.uint8),
        dtype=nexar.FLOAT32)
    bad(TypeError, comm.Allreduce, 3, f32)
    bad(nexar.InvalidArgError, comm.Alltoallv, f32, f32, [1] * p, None)
    bad(nexar.InvalidArgError, comm.Reduce_scatter, f32, f32[:4], [4] * (p - 1) + [2**62])
    bad(nexar.InvalidArgError, comm.rpc_call, 0, 70000)
    bad(nexar.UnsupportedError, comm.Allreduce, f32, f32.copy(), op=nexar.BAND)
    bad(nexar.InvalidArgError, comm.Send, f32, p)
    bad(nexar.InvalidArgError, comm.Bcast, f32, root=-1)
    bad(nexar.InvalidArgError, comm.id_of, p)
    comm.rpc_register(12, lambda *a: None)
    bad(nexar.InvalidUsageError, comm.rpc_register, 12, lambda *a: None)
    comm.rpc_unregister(12)
    bad(nexar.InvalidArgError, comm.rpc_unregister, 12)
    # Truncation: 8 elements into room for 4.
    dest = (r + 1) % p
    sq = comm.Isend(np.arange(8, dtype=np.int32), dest, 20)
    bad(nexar.TruncateError, comm.Recv, np.zeros(4, np.int32), (r - 1) % p, 20)
    sq.wait()
    if p > 1:
        # Different collectives on one communicator: MismatchError.
        dup = comm.Dup()
        x = np.zeros(4, np.float32)
        # The root of a bcast may finish before it hears of the mismatch;
        # the other ranks cannot.
        try:
            if r == 0:
                dup.Bcast(x, root=0)
            else:
                dup.Allreduce(nexar.IN_PLACE, x)
                fail("no MismatchError")
        except nexar.MismatchError as e:
            if e.code != -7 or "bcast" not in str(e):
                fail("MismatchError %r %s" % (e.code, e))
    comm.Barrier()


def check_gil(comm):
    """A blocking Recv lets other Python threads run: the message it waits
    for is sent (to this rank itself) by a Python thread, once a third
    thread, counting in pure Python, has counted 10000 more while the main
    thread is in Recv. With the GIL held in Recv neither could run, and
    Recv would end at the op timeout."""
    r = comm.rank
    ticks = [0]
    stop = threading.Event()
    waiting = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks[0] += 1

    def sender():
        waiting.wait()
        start, deadline = ticks[0], time.monotonic() + 30
        while ticks[0] - start < 10000 and time.monotonic() < deadline:
            time.sleep(0.001)
        comm.Send(np.array([r], np.int32), r, 30)

    threads = [threading.Thread(target=f, daemon=True) for f in (ticker, sender)]
    for t in threads:
        t.start()
    out = np.zeros(1, np.int32)
    before = ticks[0]
    waiting.set()
    try:
        comm.Recv(out, r, 30)
    except nexar.Error as e:
        fail("GIL: Recv raised %s: %s" % (type(e).__name__, e))
    during = ticks[0] - before
    stop.set()
    for t in threads:
        t.join()
    if out[0] != r or during < 10000:
        fail("GIL: %d ticks while Recv waited" % during)
    comm.Barrier()


def check_elastic(comm):
    """An elastic checkpoint with nobody joining or leaving: a barrier that
    returns the Membership; failures() is empty on a healthy job."""
    r, p = comm.rank, comm.size
    ctx = comm.context
    m = ctx.elastic_checkpoint()
    if (m.old_rank, m.old_size, m.new_rank, m.new_size, m.joined, m.left) != \
            (r, p, r, p, 0, 0) or m.epoch != comm.epoch:
        fail("elastic_checkpoint %r (epoch %d)" % (m, comm.epoch))
    if ctx.failures() != [] or not 0 <= ctx.local_rank < ctx.local_size:
        fail("failures %r, local %d/%d" % (ctx.failures(), ctx.local_rank, ctx.local_size))
    if [comm.id_of(q) for q in range(p)] != list(range(p)):
        fail("id_of")


def main():
    # A healthy run needs well under a second per call; a broken one (say
    # the GIL held in Recv) fails after 60 s rather than at the deadline.
    with nexar.init(op_timeout_ms=60000) as ctx:
        comm = ctx.world
        if nexar.COMM_WORLD != comm:
            fail("COMM_WORLD")
        for check in (check_collectives, check_bfloat16, check_p2p, check_objects,
                      check_comms, check_rpc, check_bad_input, check_gil,
                      check_elastic):
            check(comm)
            if comm.rank == 0:
                print("ok", check.__name__, "np", comm.size, flush=True)
    if not ctx.closed:
        fail("not finalized")
    try:
        comm.Barrier()
        fail("a call after finalize")
    except nexar.ClosedError:
        pass


if __name__ == "__main__":
    main()
