"""DistributedDataParallel training over nexar (docs/torch.md).

A multilayer perceptron 64 -> 64 (tanh) -> 10 learns the UCI handwritten
digits (data/digits.csv.gz): 1500 samples to train on, 297 held out. Every
rank draws the same initial weights and the same order from --seed; rank r
of n takes the samples at positions r, r + n, ... of each global batch and
DDP averages the gradients (one allreduce per bucket per step).

    nexar-run -n 4 /usr/bin/python3 examples/torch_ddp.py
    torchrun --nproc_per_node 4 --redirects 1 --tee 1 examples/torch_ddp.py
    ... examples/torch_ddp.py --backend gloo          # the same with Gloo

(With the build tree: PYTHONPATH=build/bindings/python, and build/tools/nexar-run.)
--out DIR saves each rank's parameters (DIR/params-rank<r>.pt) and rank 0's
losses and accuracy (DIR/metrics.json), which tests/torch/test_ddp.py checks.
"""

import argparse
import gzip
import json
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import nexar.torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits(path):
    with gzip.open(path, "rt") as f:
        rows = [[int(v) for v in line.split(",")] for line in f if line.strip()]
    t = torch.tensor(rows, dtype=torch.int64)
    assert t.shape == (1797, 65), "%s: expected 1797 rows of 65 values" % path
    return t[:, :64].to(torch.float32) / 16, t[:, 64]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="nexar")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch", type=int, default=60, help="global batch size")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=os.path.join(HERE, "..", "data", "digits.csv.gz"))
    p.add_argument("--out", help="directory for parameters and metrics")
    args = p.parse_args()

    torch.set_num_threads(1)
    nexar.torch.init_process_group(args.backend)  # torchrun or nexar-run
    rank, size = dist.get_rank(), dist.get_world_size()

    x, y = load_digits(args.data)
    gen = torch.Generator().manual_seed(args.seed)
    perm = torch.randperm(len(y), generator=gen)
    test, train = perm[:297], perm[297:]

    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    losses, accuracies = [], []
    for epoch in range(args.epochs):
        order = train[torch.randperm(len(train), generator=gen)]
        total = torch.zeros(2, dtype=torch.float64)  # loss sum, samples
        for b in range(0, len(order), args.batch):
            mine = order[b:b + args.batch][rank::size]
            out = ddp(x[mine])
            loss = loss_fn(out, y[mine])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(mine), len(mine)], dtype=torch.float64)
        dist.all_reduce(total)
        losses.append((total[0] / total[1]).item())
        with torch.no_grad():
            acc = (model(x[test]).argmax(1) == y[test]).double().mean().item()
        accuracies.append(acc)
        if rank == 0:
            print("epoch %2d  loss %.4f  held-out accuracy %.3f" % (epoch, losses[-1], acc),
                  flush=True)

    if args.out:
        os.makedirs(args.out, exist_ok=True)
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()},
                   os.path.join(args.out, "params-rank%d.pt" % rank))
        if rank == 0:
            with open(os.path.join(args.out, "metrics.json"), "w") as f:
                json.dump({"backend": args.backend, "world_size": size, "loss": losses,
                           "accuracy": accuracies}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
