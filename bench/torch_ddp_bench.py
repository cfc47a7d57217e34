"""torch_ddp_bench: the "nexar" torch.distributed backend against "gloo" in
one job: allreduce bus bandwidth from 1 to 64 MiB, and the step time of
DistributedDataParallel training. Not a test: it prints numbers
(docs/performance.md, "torch.distributed").

    PYTHONPATH=build/bindings/python build/tools/nexar-run -n 4 -- \\
        /usr/bin/python3 bench/torch_ddp_bench.py
    PYTHONPATH=build/bindings/python torchrun --standalone --nproc_per_node 4 \\
        --redirects 1 --tee 1 bench/torch_ddp_bench.py

Each backend gets its own process group over the same ranks; the two are
measured alternately, size by size, so that load from elsewhere on the
machine hits both alike. A time is the slowest rank's mean over --iters
calls after --warmup. busbw = bytes x 2 (n - 1) / n / time, the bandwidth
each link must carry in a ring allreduce (as nccl-tests define it).
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import nexar.torch

BACKENDS = ("nexar", "gloo")


def slowest(seconds, group):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def time_allreduce(group, nbytes, warmup, iters):
    x = torch.ones(nbytes // 4, dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(x, group=group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    return slowest((time.perf_counter() - t0) / iters, group)


def time_ddp(group, width, depth, batch, warmup, steps, seed):
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = DistributedDataParallel(nn.Sequential(*layers, nn.Linear(width, 10)),
                                    process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, width)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return slowest((time.perf_counter() - t0) / steps, group)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--min-mib", type=int, default=1)
    p.add_argument("--max-mib", type=int, default=64)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--width", type=int, default=1024, help="DDP model: hidden width")
    p.add_argument("--depth", type=int, default=4, help="DDP model: hidden layers")
    p.add_argument("--batch", type=int, default=32, help="DDP: samples per rank")
    p.add_argument("--steps", type=int, default=10, help="DDP: timed steps")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--json", help="write the results here (rank 0)")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    nexar.torch.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.new_group(backend="gloo"), "nexar": dist.new_group(backend="nexar")}
    out = {"world_size": n, "allreduce": [], "ddp": {}}
    if rank == 0:
        print("allreduce float32 SUM, %d ranks; busbw in MB/s (10^6 bytes/s)" % n)
        print("%10s %12s %12s %12s %12s %7s" % ("bytes", "nexar us", "gloo us",
                                                 "nexar busbw", "gloo busbw", "ratio"))
    mib = args.min_mib
    while mib <= args.max_mib:
        nbytes = mib << 20
        t = {b: time_allreduce(groups[b], nbytes, args.warmup, args.iters) for b in BACKENDS}
        bw = {b: nbytes * 2 * (n - 1) / n / t[b] / 1e6 for b in BACKENDS}
        out["allreduce"].append({"bytes": nbytes, "seconds": t, "busbw_MBps": bw})
        if rank == 0:
            print("%10d %12.0f %12.0f %12.1f %12.1f %7.2f" % (
                nbytes, t["nexar"] * 1e6, t["gloo"] * 1e6, bw["nexar"], bw["gloo"],
                bw["nexar"] / bw["gloo"]), flush=True)
        mib *= 2
    params = None
    for b in BACKENDS:
        out["ddp"][b] = time_ddp(groups[b], args.width, args.depth, args.batch, args.warmup,
                                 args.steps, seed=1)
    params = args.depth * (args.width * args.width + args.width) + args.width * 10 + 10
    if rank == 0:
        print("DDP step (MLP %d x %d, %.1f MB of float32 gradients, batch %d per rank): "
              "nexar %.1f ms, gloo %.1f ms, gloo/nexar %.2f" % (
                  args.depth, args.width, params * 4 / 1e6, args.batch,
                  out["ddp"]["nexar"] * 1e3, out["ddp"]["gloo"] * 1e3,
                  out["ddp"]["gloo"] / out["ddp"]["nexar"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
