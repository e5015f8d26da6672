"""``paperports bench bnlstm``: BNLSTM against ``torch.nn.LSTM`` of the same size.

A training step (forward and backward) and an inference forward, one process, same thread
count, at two sizes: batch 64, T = 100, input 64, hidden 256; and the paper's
character-model width, hidden 1000 (batch 32, T = 50, input 64). Beside ours, at the
first size, the straightforward per-step computation (``per_step_computation()``: the three
batch norms applied step by step, as the public ports do), so the speed-up of the
restructured computation shows. Each pair is timed alternately (so
drifts in the machine's speed hit both), medians of 15 pairs; the whole table is measured
in three rounds, one after the other, and each time is the median of its rounds (the
speed of this shared 2-core machine changes over minutes, and with it the ratios: each
row keeps its rounds' ratios in ``ratio_by_round``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
from torch import nn

from paperports.benchmarking import BenchResult, BenchRow, paired_median_times
from paperports.integrations.torch import BNLSTM
from paperports.integrations.torch.bn_lstm import per_step_computation
from paperports.registry import RunContext

BATCH, STEPS, INPUT, HIDDEN = 64, 100, 64, 256
ROUNDS = 3


def _train_step(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        model.train()
        model.zero_grad(set_to_none=True)
        out, _ = model(x)
        out.sum().backward()

    return run


def _inference(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        model.eval()
        with torch.no_grad():
            model(x)

    return run


def _per_step(
    make: Callable[[nn.Module, torch.Tensor], Callable[[], None]],
) -> Callable[[nn.Module, torch.Tensor], Callable[[], None]]:
    def made(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
        run = make(model, x)

        def in_context() -> None:
            with per_step_computation():
                run()

        return in_context

    return made


# (row name, model, timing, batch, steps, hidden, goal)
_ROWS = [
    (
        "training step (forward + backward)",
        "ours",
        _train_step,
        BATCH,
        STEPS,
        HIDDEN,
        "ratio <= 1.5",
    ),
    ("inference forward", "ours", _inference, BATCH, STEPS, HIDDEN, "ratio <= 1.25"),
    (
        "per-step computation: training step",
        "per-step",
        _train_step,
        BATCH,
        STEPS,
        HIDDEN,
        "reference",
    ),
    (
        "per-step computation: inference forward",
        "per-step",
        _inference,
        BATCH,
        STEPS,
        HIDDEN,
        "reference",
    ),
    ("training step, hidden 1000", "ours", _train_step, 32, 50, 1000, "ratio <= 1.2"),
    ("inference forward, hidden 1000", "ours", _inference, 32, 50, 1000, "ratio <= 1.2"),
]


def bench(ctx: RunContext) -> BenchResult:
    models: dict[int, tuple[torch.Tensor, BNLSTM, nn.LSTM]] = {}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in _ROWS}
    for round_ in range(ROUNDS):
        for name, which, make, batch, steps, hidden, _ in _ROWS:
            if hidden not in models:
                torch.manual_seed(ctx.seed)
                x = torch.randn(steps, batch, INPUT)
                ours, ref = BNLSTM(INPUT, hidden, t_max=steps), nn.LSTM(INPUT, hidden)
                _train_step(ours, x)()  # running statistics for the inference timing
                models[hidden] = (x, ours, ref)
            x, ours, ref = models[hidden]
            timed = make if which == "ours" else _per_step(make)
            t_ours, t_ref = paired_median_times(timed(ours, x), make(ref, x), repeats=15)
            times[name].append((t_ours, t_ref))
            ctx.log(
                f"  round {round_ + 1}, {name}: {which} {t_ours * 1e3:.1f} ms, "
                f"nn.LSTM {t_ref * 1e3:.1f} ms"
            )
    rows = []
    for name, which, _, batch, steps, hidden, goal in _ROWS:
        extra = {
            "batch": batch,
            "steps": steps,
            "input": INPUT,
            "hidden": hidden,
            "model": which,
            "ratio_by_round": [a / b for a, b in times[name]],
        }
        t_ours = statistics.median(a for a, _ in times[name])
        t_ref = statistics.median(b for _, b in times[name])
        rows.append(BenchRow(name, t_ours, t_ref, "s", goal, extra=extra))
    return BenchResult("bnlstm", "torch.nn.LSTM (same sizes)", rows)
