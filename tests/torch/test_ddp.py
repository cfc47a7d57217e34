"""test_torch_ddp: examples/torch_ddp.py on 4 ranks with backend "nexar"
under nexar-run and under torchrun, and with backend "gloo" under torchrun,
from the same seed. Checks: every rank of a run holds bit-identical
parameters, the loss falls, held-out accuracy >= 0.9, and the nexar and gloo
runs end within 1e-5 of each other (they sum gradients in different orders).

usage: test_ddp.py NEXAR_RUN EXAMPLE SCRATCH_DIR [EPOCHS]"""

import json
import os
import shutil
import subprocess
import sys

try:
    import torch
except ImportError:
    sys.exit(77)

nexar_run, example, scratch = sys.argv[1:4]
epochs = sys.argv[4] if len(sys.argv) > 4 else "5"
N = 4
shutil.rmtree(scratch, ignore_errors=True)
torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(N), "--redirects", "1", "--tee", "1"]
runs = {
    "nexar-run": [nexar_run, "-n", str(N), "-t", "240", "--", sys.executable],
    "torchrun": torchrun,
    "torchrun-gloo": torchrun,
}
params = {}
for name, launch in runs.items():
    out = os.path.join(scratch, name)
    backend = "gloo" if name.endswith("gloo") else "nexar"
    cmd = launch + [example, "--backend", backend, "--epochs", epochs, "--out", out]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, timeout=300)
    ranks = [torch.load(os.path.join(out, "params-rank%d.pt" % r)) for r in range(N)]
    for r in range(1, N):
        for k, v in ranks[0].items():
            assert torch.equal(v.view(-1).view(torch.int32), ranks[r][k].view(-1).view(torch.int32)), \
                "%s: rank %d's %s differs from rank 0's" % (name, r, k)
    with open(os.path.join(out, "metrics.json")) as f:
        m = json.load(f)
    assert m["backend"] == backend and m["world_size"] == N, m
    assert m["loss"][-1] < 0.5 * m["loss"][0], "%s: loss did not fall: %s" % (name, m["loss"])
    assert m["accuracy"][-1] >= 0.9, "%s: held-out accuracy %s" % (name, m["accuracy"])
    print("%s: %d ranks bit-identical, loss %.4f -> %.4f, held-out accuracy %.3f"
          % (name, N, m["loss"][0], m["loss"][-1], m["accuracy"][-1]), flush=True)
    params[name] = ranks[0]

for other in ("torchrun", "torchrun-gloo"):
    diff = max((params["nexar-run"][k] - params[other][k]).abs().max().item()
               for k in params["nexar-run"])
    print("nexar-run vs %s: max |difference| %.3g" % (other, diff))
    assert diff <= 1e-5, "nexar-run vs %s: parameters differ by %g" % (other, diff)
shutil.rmtree(scratch, ignore_errors=True)
print("test_torch_ddp OK")
