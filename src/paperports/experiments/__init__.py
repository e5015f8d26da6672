"""The experiments behind ``paperports reproduce`` and ``paperports bench``, one per method,
and :func:`experiment_main`, the command line of the experiments run as
``python -m paperports.experiments.<method>.<experiment>``."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from paperports.registry import RunContext

__all__ = ["experiment_main"]


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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    if configure is not None:
        configure(parser)
    args = parser.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    command = f"python -m {module} " + shlex.join(words)
    ctx = RunContext(args.out, quick=args.quick, seed=args.seed, quiet=args.quiet, command=command)
    print(run(ctx, args))
    return 0
