"""The shared command line of ``python -m paperports.experiments.<method>.<experiment>``."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paperports.experiments import experiment_main
from paperports.registry import RunContext


def test_the_options_reach_the_run_and_the_command_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[RunContext, argparse.Namespace]] = []

    def run(ctx: RunContext, args: argparse.Namespace) -> Path:
        seen.append((ctx, args))
        return ctx.out / "report.md"

    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--generations", type=int, default=None)

    argv = ["--quick", "--seed", "3", "--out", str(tmp_path), "--generations", "7"]
    assert experiment_main("paperports.experiments.x.y", "doc", run, "runs/y", argv, extra) == 0
    ((ctx, args),) = seen
    assert (ctx.out, ctx.quick, ctx.seed, ctx.quiet) == (tmp_path, True, 3, False)
    assert args.generations == 7
    assert ctx.command == "python -m paperports.experiments.x.y " + " ".join(argv)
    assert capsys.readouterr().out.strip() == str(tmp_path / "report.md")
    seen.clear()
    experiment_main("paperports.experiments.x.y", "doc", run, "runs/y", [])
    assert seen[0][0].out == Path("runs/y") and not seen[0][0].quick
    for seed in ("one", "-1"):  # numpy's generators take no negative seed
        with pytest.raises(SystemExit):
            experiment_main("paperports.experiments.x.y", "doc", run, "runs/y", ["--seed", seed])
        assert f"argument --seed: expected a whole number >= 0, got '{seed}'" in (
            capsys.readouterr().err
        )


def _square_on_one_thread(x: int) -> tuple[int, int]:
    import torch

    from paperports.experiments import one_torch_thread

    if x < 0:
        raise ValueError(f"negative: {x}")
    with one_torch_thread():
        return x * x, torch.get_num_threads()


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_in_workers_gives_every_result_its_index(jobs: int, tmp_path: Path) -> None:
    import torch

    from paperports.experiments import each_in_workers

    threads = torch.get_num_threads()
    got: dict[int, tuple[int, int]] = {}
    ctx = RunContext(tmp_path, quiet=True)
    each_in_workers(_square_on_one_thread, [(3,), (4,), (5,)], jobs, got.__setitem__, ctx, "x")
    assert got == {0: (9, 1), 1: (16, 1), 2: (25, 1)}
    assert torch.get_num_threads() == threads  # restored
    with pytest.raises(ValueError, match="negative: -1"):
        each_in_workers(_square_on_one_thread, [(2,), (-1,)], jobs, got.__setitem__, ctx, "x")


def _sleep(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


SCRIPT = """
import multiprocessing, sys, threading, time
from pathlib import Path
from paperports.experiments import each_in_workers
from paperports.registry import RunContext
sys.path.insert(0, {tests!r})
from test_experiment_main import _sleep

def report():  # the workers' pids, once both run
    while len(multiprocessing.active_children()) < 2:
        time.sleep(0.1)
    print(" ".join(str(k.pid) for k in multiprocessing.active_children()), flush=True)

threading.Thread(target=report, daemon=True).start()
ctx = RunContext(Path({out!r}), quiet=True)
each_in_workers(_sleep, [(600,), (600,)], 2, lambda i, r: None, ctx, "x")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")
def test_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    """A run stopped by ``kill`` (SIGTERM, no clean-up) does not leave its workers training."""
    script = SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        assert parent.stdout is not None
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in workers)
    finally:
        parent.kill()
        for pid in workers:  # a failure leaves no sleeping workers behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")  # a zombie has ended, its parent gone
    return not (status.exists() and status.read_text().split()[2] == "Z")
