"""Two CPU processes for the scale-out tests: a gloo group per worker, a free port."""

from __future__ import annotations

import gc
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp


@contextmanager
def gloo_group(rank: int, port: int, world_size: int = 2) -> Iterator[None]:
    """This process as ``rank`` of a gloo group on ``port``; a collective that waits over
    60 s fails (a failing peer fails the test rather than hangs it)."""
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=60),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def settle() -> None:
    """Let gloo's worker threads finish before the process group can be destroyed.

    When a DDP wrapper outlives ``destroy_process_group``, its reducer can hold the last
    reference to the gloo group; the group's destructor then joins gloo's threads while
    holding the GIL, and a thread that still has to release a finished all-reduce (which
    needs the GIL) never ends: the worker hangs (in about half of the runs here). Call this,
    then drop the wrapper, inside :func:`gloo_group`."""
    dist.barrier()
    time.sleep(0.2)  # with the GIL released, gloo's threads free their finished work
    gc.collect()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(worker: Callable[..., None], *args: Any, nprocs: int = 2) -> None:
    """``worker(rank, port, *args)`` in ``nprocs`` processes; raises what one raised."""
    mp.spawn(worker, args=(free_port(), *args), nprocs=nprocs, join=True)
