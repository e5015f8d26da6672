"""Timing helpers for ``paperports bench``: medians of repeated runs, as ratios to an anchor.

Benchmarks time *ours* and *the anchor* in one process, on the same inputs, with the same
thread count, and report ``ours / anchor``. Tests never assert on times.
"""

from __future__ import annotations

import json
import multiprocessing
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

import paperports
from paperports.reporting import provenance

__all__ = [
    "BenchResult",
    "BenchRow",
    "machine_info",
    "median_time",
    "paired_median_times",
    "peak_memory_mb",
]


def median_time(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs, after ``warmup`` runs."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired_median_times(
    ours: Callable[[], Any], anchor: Callable[[], Any], *, repeats: int = 11, warmup: int = 1
) -> tuple[float, float]:
    """Median wall times of ``ours()`` and ``anchor()``, timed alternately.

    Alternating the runs spreads any drift of the machine (another process, thermal
    throttling) over both sides, instead of over whichever ran second.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        ours()
        anchor()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, bucket in ((ours, times[0]), (anchor, times[1])):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def peak_memory_mb(setup: Callable[..., Callable[[], Any]], *args: Any) -> float:
    """MB that some work adds to the peak resident memory of a fresh process (Linux).

    ``setup(*args)`` runs in a spawned process, builds the inputs and returns the work; the
    result is the process's peak resident set during the work (``VmHWM``, reset after the
    setup) minus its resident set before it. (Not ``getrusage``'s ``ru_maxrss``: it keeps
    the peak across ``exec``, so a spawned child starts from its parent's resident set.)
    ``setup`` and ``args`` must be picklable (``setup`` a module-level function)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return float(pool.apply(_peak_in_fresh_process, (setup, *args)))


def _peak_in_fresh_process(setup: Callable[..., Callable[[], Any]], *args: Any) -> float:
    work = setup(*args)
    try:
        with open("/proc/self/clear_refs", "w") as clear:  # reset VmHWM to the current VmRSS
            clear.write("5")
    except OSError as err:
        raise RuntimeError(
            f"peak_memory_mb reads Linux's /proc/self (VmRSS, VmHWM); here it could not: {err}"
        ) from err
    before = _status_kb("VmRSS")
    work()
    return (_status_kb("VmHWM") - before) / 1024


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "paperports": paperports.__version__,
    }


@dataclass
class BenchRow:
    """One comparison: ``value`` of ours against ``anchor_value`` of the anchor."""

    name: str
    ours: float
    anchor: float
    unit: str
    goal: str
    """The goal as text, e.g. ``"ratio <= 1.0"``."""
    higher_is_better: bool = False
    """For throughputs (images/s) the ratio ours / anchor should be high, for times low."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.ours / self.anchor if self.anchor else float("inf")


@dataclass
class BenchResult:
    """All rows of one method's benchmark, with the anchor's name and the machine."""

    method: str
    anchor: str
    rows: list[BenchRow]
    machine: dict[str, Any] = field(default_factory=machine_info)
    command: str = ""
    """The command that ran the benchmark (default: ``paperports bench <method>``)."""

    def table(self) -> str:
        """A plain-text table of the rows."""
        header = f"{'benchmark':44} {'ours':>12} {'anchor':>12} {'ours/anchor':>12}  goal"
        lines = [f"{self.method}: against {self.anchor}", header, "-" * len(header)]
        for r in self.rows:
            lines.append(
                f"{r.name:44} {r.ours:12.4g} {r.anchor:12.4g} {r.ratio:12.3f}  {r.goal} ({r.unit})"
            )
        return "\n".join(lines)

    def write(self, folder: Path) -> Path:
        """Write ``<folder>/<method>.json`` and return its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.method}.json"
        data = {
            "method": self.method,
            "anchor": self.anchor,
            "provenance": provenance(self.command or f"paperports bench {self.method}"),
            "machine": self.machine,
            "rows": [asdict(r) | {"ratio": r.ratio} for r in self.rows],
        }
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path
