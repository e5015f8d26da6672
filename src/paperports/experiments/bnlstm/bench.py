"""``paperports bench bnlstm``: BNLSTM against ``torch.nn.LSTM`` of the same size.

Batch 64, T = 100, input 64, hidden 256, one process, same thread count: a training step
(forward and backward) and an inference forward. The two are timed alternately (so drifts in
the machine's speed hit both); ratios are ours / nn.LSTM of medians.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from paperports.benchmarking import BenchResult, BenchRow, paired_median_times
from paperports.integrations.torch import BNLSTM
from paperports.registry import RunContext

BATCH, STEPS, INPUT, HIDDEN = 64, 100, 64, 256


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


def bench(ctx: RunContext) -> BenchResult:
    torch.manual_seed(ctx.seed)
    x = torch.randn(STEPS, BATCH, INPUT)
    ours, ref = BNLSTM(INPUT, HIDDEN, t_max=STEPS), nn.LSTM(INPUT, HIDDEN)
    _train_step(ours, x)()  # running statistics for the inference timing
    rows = []
    for name, make, goal in [
        ("training step (forward + backward)", _train_step, "ratio <= 2.0"),
        ("inference forward", _inference, "ratio <= 1.5"),
    ]:
        t_ours, t_ref = paired_median_times(make(ours, x), make(ref, x), repeats=15)
        ctx.log(f"  {name}: ours {t_ours * 1e3:.1f} ms, nn.LSTM {t_ref * 1e3:.1f} ms")
        rows.append(
            BenchRow(
                name,
                t_ours,
                t_ref,
                "s",
                goal,
                extra={"batch": BATCH, "steps": STEPS, "input": INPUT, "hidden": HIDDEN},
            )
        )
    return BenchResult("bnlstm", "torch.nn.LSTM (same sizes)", rows)
