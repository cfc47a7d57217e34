"""Every operation of the "nexar" torch.distributed backend, bit-exact
against values each rank computes locally, plus bad input. Run under
nexar-run -n N or torchrun --nproc_per_node N (tests/torch/tests.cmake).
--keep-groups: exit without destroy_process_group."""

import sys
import warnings

try:
    import torch
    import torch.distributed as dist
except ImportError:
    sys.exit(77)

import nexar.torch

warnings.filterwarnings("ignore", category=UserWarning)  # deprecations of the _base calls
torch.set_num_threads(1)
nexar.torch.init_process_group("nexar")
rank, size = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "nexar"

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "prod",
       dist.ReduceOp.MIN: "min", dist.ReduceOp.MAX: "max",
       dist.ReduceOp.AVG: "avg"}
N = 37  # odd, so no algorithm splits it evenly


def data(r, dtype, op="sum", n=N):
    # Small integers, exact in every dtype and for every op's result.
    base = torch.arange(n, dtype=torch.int64)
    v = (base % 2 + 1) if op == "prod" else (base * 7 + 3 * r) % 11 - (r % 2) * 2
    if dtype == torch.uint8:
        v = v.abs()
    return v.to(dtype)


def expect(dtype, op, n=N):
    xs = torch.stack([data(r, dtype, op, n).to(torch.float64) for r in range(size)])
    if op == "sum":
        y = xs.sum(0)
    elif op == "prod":
        y = xs.prod(0)
    elif op == "min":
        y = xs.min(0).values
    elif op == "max":
        y = xs.max(0).values
    else:
        y = xs.sum(0) / size
        if not dtype.is_floating_point:
            y = torch.trunc(y)
    return y.to(dtype)


def same(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a, b)
    ok = torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
    assert ok, "rank %d: %s: got %s expected %s" % (rank, what, a, b)


# allreduce, every op and dtype; async with the future as DDP uses it
for dtype in DTYPES:
    for rop, name in OPS.items():
        t = data(rank, dtype, name)
        dist.all_reduce(t, op=rop)
        same(t, expect(dtype, name), "allreduce %s %s" % (dtype, name))
    t = data(rank, dtype)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future().then(lambda f: f.value()[0] * 1)
    same(fut.wait(), expect(dtype, "sum"), "allreduce future %s" % dtype)
    assert w.is_completed()
for dtype in (torch.int32, torch.uint8):
    for rop, fn in ((dist.ReduceOp.BAND, torch.bitwise_and), (dist.ReduceOp.BOR, torch.bitwise_or),
                    (dist.ReduceOp.BXOR, torch.bitwise_xor)):
        t = data(rank, dtype)
        dist.all_reduce(t, op=rop)
        want = data(0, dtype)
        for r in range(1, size):
            want = fn(want, data(r, dtype))
        same(t, want, "allreduce %s %s" % (dtype, rop))

# allreduce_coalesced
ts = [data(rank, torch.float32, n=5), data(rank, torch.float32, n=9)]
dist.all_reduce_coalesced(ts)
same(ts[0], expect(torch.float32, "sum", 5), "allreduce_coalesced 0")
same(ts[1], expect(torch.float32, "sum", 9), "allreduce_coalesced 1")

# broadcast (also a dtype nexar cannot reduce, moved as bytes), reduce
for root in range(size):
    for dtype in (torch.float32, torch.int16, torch.bool, torch.complex64):
        t = data(rank, torch.int64).to(dtype) if rank == root else torch.zeros(N, dtype=dtype)
        dist.broadcast(t, src=root)
        same(t, data(root, torch.int64).to(dtype), "broadcast root %d %s" % (root, dtype))
    t = data(rank, torch.float64)
    dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
    same(t, expect(torch.float64, "max") if rank == root else data(rank, torch.float64),
         "reduce root %d" % root)

# allgather, _allgather_base
for dtype in (torch.bfloat16, torch.int64):
    outs = [torch.empty(N, dtype=dtype) for _ in range(size)]
    dist.all_gather(outs, data(rank, dtype))
    for r in range(size):
        same(outs[r], data(r, dtype), "allgather block %d" % r)
out = torch.empty(size * N, dtype=torch.float16)
dist._all_gather_base(out, data(rank, torch.float16))
same(out, torch.cat([data(r, torch.float16) for r in range(size)]), "_allgather_base")

# reduce_scatter, _reduce_scatter_base
ins = [data(rank + r, torch.float32) for r in range(size)]
out = torch.empty(N, dtype=torch.float32)
dist.reduce_scatter(out, ins)
same(out, sum(data(q + rank, torch.float64) for q in range(size)).to(torch.float32), "reduce_scatter")
inp = torch.cat([data(rank + r, torch.int32) for r in range(size)])
out = torch.empty(N, dtype=torch.int32)
dist._reduce_scatter_base(out, inp)
same(out, sum(data(q + rank, torch.int64) for q in range(size)).to(torch.int32), "_reduce_scatter_base")

# alltoall_base: equal and split sizes (rows of 3 elements)
inp = torch.arange(size * 4, dtype=torch.float32) + 100 * rank
out = torch.empty(size * 4)
dist.all_to_all_single(out, inp)
same(out, torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float32) + 100 * r
                     for r in range(size)]), "alltoall equal")
# rank r sends r + j + 1 rows to rank j
in_splits = [rank + j + 1 for j in range(size)]
out_splits = [r + rank + 1 for r in range(size)]
inp = torch.cat([torch.full((rank + j + 1, 3), 10 * rank + j, dtype=torch.int64) for j in range(size)])
out = torch.empty(sum(out_splits), 3, dtype=torch.int64)
dist.all_to_all_single(out, inp, out_splits, in_splits)
same(out, torch.cat([torch.full((r + rank + 1, 3), 10 * r + rank, dtype=torch.int64)
                     for r in range(size)]), "alltoall split")

# alltoall (lists): rank r sends r + j + 1 elements to rank j
ins = [torch.full((rank + j + 1,), 10 * rank + j, dtype=torch.bfloat16) for j in range(size)]
outs = [torch.empty(r + rank + 1, dtype=torch.bfloat16) for r in range(size)]
dist.all_to_all(outs, ins)
for r in range(size):
    same(outs[r], torch.full((r + rank + 1,), 10 * r + rank, dtype=torch.bfloat16), "alltoall from %d" % r)

# gather, scatter
for root in (0, size - 1):
    outs = [torch.empty(N, dtype=torch.float64) for _ in range(size)] if rank == root else None
    dist.gather(data(rank, torch.float64), outs, dst=root)
    if rank == root:
        for r in range(size):
            same(outs[r], data(r, torch.float64), "gather root %d block %d" % (root, r))
    ins = [data(r + 5, torch.int8) for r in range(size)] if rank == root else None
    out = torch.empty(N, dtype=torch.int8)
    dist.scatter(out, ins, src=root)
    same(out, data(rank + 5, torch.int8), "scatter root %d" % root)

dist.barrier()

# send / recv, irecv from any source, the source rank of the work
nxt, prv = (rank + 1) % size, (rank - 1) % size
recv = torch.empty(N, dtype=torch.float32)
rw = dist.irecv(recv, src=prv, tag=7)
sw = dist.isend(data(rank, torch.float32), dst=nxt, tag=7)
sw.wait()
rw.wait()
same(recv, data(prv, torch.float32), "send/recv")
if rank == 0:
    got = set()
    for _ in range(size - 1):
        t = torch.empty(N, dtype=torch.float32)
        src = dist.recv(t, tag=9)  # any source
        same(t, data(src, torch.float32), "recv any source from %d" % src)
        got.add(src)
    assert got == set(range(1, size)), got
else:
    dist.send(data(rank, torch.float32), dst=0, tag=9)

# Bad input: an exception naming the rank, the op and the tensor, at once.
def refused(fn, *words):
    try:
        fn()
    except (RuntimeError, ValueError, TypeError) as e:
        msg = str(e)
        for w in ("rank %d" % rank,) + words:
            assert w in msg, "%r not in %r" % (w, msg)
        return
    raise AssertionError("accepted: %s" % (words,))


refused(lambda: dist.all_reduce(torch.zeros(4, 4).t()), "allreduce", "tensors[0]", "not contiguous")
refused(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int16)), "allreduce", "Short")
refused(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.bool)), "allreduce", "Bool")
refused(lambda: dist.all_reduce(torch.zeros(4).to_sparse()), "allreduce", "tensors[0]", "Sparse")
refused(lambda: dist.all_gather([torch.zeros(3)] * size, torch.zeros(4)), "allgather", "outputs[0][0]")
refused(lambda: dist._reduce_scatter_base(torch.zeros(3), torch.zeros(5)), "_reduce_scatter_base", "input")
refused(lambda: dist.all_to_all_single(torch.zeros(size), torch.zeros(size), [1] * size, [2] * size),
        "alltoall_base", "input")

# Sizes that differ across ranks: every rank gets an error (no hang). On a
# group of its own, since the world communicator stays failed afterwards.
g = dist.new_group(list(range(size)))
t = torch.zeros(4 + rank)
refused(lambda: dist.all_reduce(t, group=g), "allreduce", "tensors[0]", "MISMATCH")

# Rank 0 hosts torch's TCPStore under torchrun: nobody leaves while
# another rank may still poll it (new_group's store-based barrier).
dist.barrier()
if "--keep-groups" not in sys.argv:
    dist.destroy_process_group()
# else: the groups end at exit (nexar.torch's atexit hook, then Python).
print("rank %d of %d: torch backend OK" % (rank, size))
