"""nexar.torch: nexar as a torch.distributed backend (docs/torch.md).

Importing this module registers the backend "nexar"::

    import nexar.torch
    torch.distributed.init_process_group("nexar")     # torchrun / env://

or, under torchrun as well as under ``nexar-run``::

    nexar.torch.init_process_group("nexar")
"""

import atexit
import hashlib
import os
import sys
import tempfile

import torch.distributed as _dist

from . import _nexar_torch

BACKEND = "nexar"


def _create(store, rank, size, timeout):
    # The creator torch calls with the group's (prefixed) c10d store.
    return _nexar_torch.create_process_group(store, rank, size, timeout)


def abort():
    """nexar_abort on every nexar process group of this process: the peers
    fail at once (PEER_FAILED) instead of waiting for this rank until the
    op timeout. Only destroying the groups may follow."""
    _nexar_torch.abort()


def _excepthook(kind, value, tb, _previous=sys.excepthook):
    # An uncaught exception ends this rank: tell the others now.
    abort()
    _previous(kind, value, tb)


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create)
    sys.excepthook = _excepthook
    # Before Python finalizes: no progress thread may then free a tensor
    # that has a Python object (it would need the GIL).
    atexit.register(_nexar_torch.shutdown)


def _nexar_run_store(rank, size):
    # nexar-run starts every rank on this host with NEXAR_SEED, NEXAR_SECRET,
    # NEXAR_RANK and NEXAR_WORLD_SIZE: a FileStore whose name is unique to
    # the job (a hash of its seed address and secret) serves torch's store.
    job = (os.environ["NEXAR_SEED"] + "\0" + os.environ.get("NEXAR_SECRET", "")
           + os.environ.get("NEXAR_SECRET_FILE", ""))
    key = hashlib.sha256(b"nexar.torch store\0" + job.encode()).hexdigest()[:24]
    path = os.path.join(tempfile.gettempdir(), "nexar-torch-%d-%s" % (os.getuid(), key))
    return _dist.FileStore(path, size)


def init_process_group(backend=BACKEND, **kwargs):
    """torch.distributed.init_process_group for torchrun and nexar-run.

    With ``init_method`` or ``store`` given, or torch's variables set
    (torchrun, env://: ``MASTER_ADDR``, ``RANK``), it is
    torch.distributed.init_process_group(backend, **kwargs). Under
    ``nexar-run`` (``NEXAR_SEED``, ``NEXAR_RANK``, ``NEXAR_WORLD_SIZE``) the
    rank and world size come from nexar-run and torch's store is a FileStore
    private to the job (nexar-run runs on one host)."""
    env = os.environ
    if ("init_method" in kwargs or "store" in kwargs
            or ("MASTER_ADDR" in env and "RANK" in env)):
        return _dist.init_process_group(backend, **kwargs)
    if "NEXAR_SEED" in env and "NEXAR_RANK" in env and "NEXAR_WORLD_SIZE" in env:
        rank, size = int(env["NEXAR_RANK"]), int(env["NEXAR_WORLD_SIZE"])
        return _dist.init_process_group(backend, store=_nexar_run_store(rank, size),
                                        rank=rank, world_size=size, **kwargs)
    raise RuntimeError("nexar.torch.init_process_group: no launcher found: run under "
                       "torchrun (MASTER_ADDR, RANK) or nexar-run (NEXAR_SEED, NEXAR_RANK), "
                       "or pass init_method= or store=")
