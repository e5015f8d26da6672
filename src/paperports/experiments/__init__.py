"""The experiments behind ``paperports reproduce`` and ``paperports bench``, one per method,
and :func:`experiment_main`, the command line of the experiments run as
``python -m paperports.experiments.<method>.<experiment>``."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch

from paperports._checks import whole_number
from paperports.registry import RunContext

__all__ = ["each_in_workers", "experiment_main", "one_torch_thread"]

R = TypeVar("R")


def experiment_main(
    module: str,
    description: str | None,
    run: Callable[[RunContext, argparse.Namespace], Path],
    default_out: str,
    argv: Sequence[str] | None = None,
    configure: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse ``--out`` (default ``default_out``), ``--quick``, ``--seed``, ``--quiet`` (and
    what ``configure`` adds), run the experiment with a :class:`RunContext` that records the
    command line, and print the report's path."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=whole_number(0), default=0)
    parser.add_argument("--quiet", action="store_true")
    if configure is not None:
        configure(parser)
    args = parser.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    command = f"python -m {module} " + shlex.join(words)
    ctx = RunContext(args.out, quick=args.quick, seed=args.seed, quiet=args.quiet, command=command)
    print(run(ctx, args))
    return 0


def _die_with_parent() -> None:
    """In a worker: end when the process that started it ends. A parent stopped by a
    signal (``kill``, a scheduler's ``SIGTERM``) runs no clean-up, and its workers would
    otherwise go on training for as long as their runs last, holding the cores (Linux's
    parent-death signal; elsewhere nothing is done)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() == 1:  # the parent ended before the signal was asked for
        os._exit(1)


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch thread, restoring the caller's count after: what an
    experiment whose runs go to worker processes does in this process too, so its numbers
    do not depend on how many workers there are."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def each_in_workers(
    fn: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    jobs: int,
    done: Callable[[int, R], None],
    ctx: RunContext,
    desc: str,
) -> None:
    """``fn(*calls[i])`` for every ``i``, in this process if ``jobs`` is 1, else in ``jobs``
    worker processes; ``done(i, result)`` as each finishes, with ``ctx``'s progress bar. A
    failed call raises as soon as it fails, cancelling the calls not yet started, not after
    hours of the others. ``fn`` must be a module-level function (the workers import it).
    Workers end with this process, even when a signal stops it."""
    if jobs == 1:
        for i in ctx.progress(range(len(calls)), desc, len(calls)):
            done(i, fn(*calls[i]))
        return
    # spawned, not forked: a child forked from a process whose thread pool runs can hang
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=spawn, initializer=_die_with_parent) as pool:
        futures = {pool.submit(fn, *call): i for i, call in enumerate(calls)}
        try:
            for future in ctx.progress(as_completed(futures), desc, len(calls)):
                done(futures[future], future.result())
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
