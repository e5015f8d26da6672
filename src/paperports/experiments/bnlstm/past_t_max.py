"""Past the trained length: why the BN-LSTM's last-step statistics lose to ``nn.LSTM`` on
tasks whose statistics drift with time, and what recovers it (issue 24, item 4).

    python -m paperports.experiments.bnlstm.past_t_max --out docs/reports/bnlstm-past-t-max

Three tasks of our own, each a label per step that depends on the whole prefix: the sign of
a running sum of Gaussian inputs, which of two symbols has been counted more often so far
(among three), and the parity of a running count. The models (``nn.LSTM`` from the
BN-LSTM's initial weights, as in ``paperports reproduce bnlstm``) train on sequences of
``T`` steps and are tested on sequences of ``4 T``; the score is the accuracy over the
steps past ``T``. All start with a forget-gate bias of 3, a common choice for long
memories (the ``forget bias 1`` columns are a BN-LSTM from the default of 1).
The BN-LSTM trained as in the paper is evaluated with each way of normalising those steps:

* ``last``: the statistics of the last trained step (the paper's rule);
* ``trend``: each statistic extrapolated from its trend over the last trained steps (the
  drift of three consecutive blocks, continued geometrically: a candidate fix);
* ``update_bn (longer)``: the population statistics recomputed by :func:`update_bn` over
  unlabelled sequences of the test length (the statistics grow to cover them);
* ``batch (diagnostic)``: the test batch's own statistics at every step, which needs a
  batch and makes each output depend on the others; it shows what exact statistics give.

and ``random_t_max: last`` is a BN-LSTM trained with ``BNLSTM(random_t_max=0.5)`` (half the
batches normalised from a random step of their second half on with the statistics of the
step before, as evaluation past ``t_max`` normalises), evaluated by the paper's rule;
``random_t_max 1: last`` the same with every batch so normalised (``random_t_max=1``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperports.experiments import experiment_main
from paperports.integrations.torch import BNLSTM, RecurrentBatchNorm, update_bn
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

__all__ = [
    "RULES",
    "TASKS",
    "TaskRun",
    "extrapolate_statistics",
    "reproduce_past_t_max",
    "run_task",
]

T_TRAIN, FACTOR, HIDDEN, BATCH = 25, 4, 32, 64
FORGET_BIAS = 3.0
RANDOM_T_MAX = 0.5
RANDOM_T_MAX_ALWAYS = 1.0  # every batch normalised from a random step on with stale statistics
RULES = ("last", "trend", "update_bn (longer)", "batch (diagnostic)")
VARIANTS = (
    "random_t_max: last",
    "random_t_max: update_bn (longer)",
    "random_t_max 1: update_bn (longer)",
    "forget bias 1: last",
    "forget bias 1: batch (diagnostic)",
)
GOAL_POINTS = 3.0  # the goal: no worse than nn.LSTM minus 3 points


def _running_sum(n: int, steps: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
    x = torch.randn(n, steps, 1, generator=g)
    return x, (x.cumsum(1)[..., 0] > 0).long()


def _counting(n: int, steps: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
    s = torch.randint(0, 3, (n, steps), generator=g)
    more_a = (s == 0).long().cumsum(1) >= (s == 1).long().cumsum(1)
    return F.one_hot(s, 3).float(), more_a.long()


def _parity(n: int, steps: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
    s = (torch.rand(n, steps, generator=g) < 0.3).long()
    return F.one_hot(s, 2).float(), s.cumsum(1) % 2


TASKS: dict[str, Callable[[int, int, torch.Generator], tuple[Tensor, Tensor]]] = {
    "running sum": _running_sum,
    "counting": _counting,
    "parity": _parity,
}
"""Each ``(n, steps, generator) -> (x (n, steps, d), labels (n, steps))``."""


class _Tagger(nn.Module):
    """A recurrent core and a linear head on every step's state."""

    def __init__(self, core: nn.Module) -> None:
        super().__init__()
        self.core = core
        self.head = nn.Linear(HIDDEN, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.core(x)[0])  # type: ignore[no-any-return]


def _models(features: int, seed: int) -> dict[str, _Tagger]:
    """The LSTM and the BN-LSTMs (as in the paper, with ``random_t_max``, and with the
    default forget bias of 1), all from the same initial weights and head (the forget bias
    apart)."""
    torch.manual_seed(seed)
    bn = _Tagger(BNLSTM(features, HIDDEN, batch_first=True, forget_bias=FORGET_BIAS))
    lstm = _Tagger(nn.LSTM(features, HIDDEN, batch_first=True))
    shared = {k: v for k, v in bn.state_dict().items() if ".bn_" not in k}
    lstm.load_state_dict(shared)
    random_t_max = copy.deepcopy(bn)
    random_t_max.core.random_t_max = RANDOM_T_MAX  # type: ignore[assignment]
    always = copy.deepcopy(bn)
    always.core.random_t_max = RANDOM_T_MAX_ALWAYS  # type: ignore[assignment]
    forget_bias_1 = copy.deepcopy(bn)
    with torch.no_grad():
        bias: Tensor = forget_bias_1.core.bias_ih_l0  # type: ignore[assignment]
        bias[HIDDEN : 2 * HIDDEN] = 1.0  # as BNLSTM(forget_bias=1.0) initialises it
    return {
        "LSTM": lstm,
        "BN-LSTM": bn,
        "random_t_max": random_t_max,
        "random_t_max 1": always,
        "forget bias 1": forget_bias_1,
    }


def _train(model: _Tagger, task: str, seed: int, steps: int) -> None:
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        x, y = TASKS[task](BATCH, T_TRAIN, g)
        loss = F.cross_entropy(model(x).reshape(-1, 2), y.reshape(-1))
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


@torch.no_grad()
def _per_step_accuracy(
    model: nn.Module, x: Tensor, y: Tensor, *, batch_stats: bool = False
) -> Tensor:
    model = copy.deepcopy(model)
    if batch_stats:  # training-mode normalisation that updates nothing
        for norm in model.modules():
            if isinstance(norm, RecurrentBatchNorm):
                norm.momentum = 0.0
        model.train()
    else:
        model.eval()
    correct: Tensor = model(x).argmax(-1) == y
    return correct.float().mean(0)


@torch.no_grad()
def extrapolate_statistics(model: nn.Module, steps: int) -> nn.Module:
    """A copy of ``model`` whose recurrent batch norms hold statistics for ``steps`` steps:
    past the last tracked step, each mean and standard deviation continues its drift over
    the last trained steps. The last ``3 w`` tracked steps (``w`` a fifth of them) make three
    blocks with means ``M1, M2, M3``; the drift ``M3 - M2`` shrinks by ``q = sum|M3 - M2| /
    sum|M2 - M1|`` (at most 0.95) per block, so ``j`` blocks on a statistic is
    ``M3 + (M3 - M2)(q + ... + q^j)``: a linear trend for ``q`` near 1, a level that
    settles for smaller ``q``."""
    model = copy.deepcopy(model)
    for norm in model.modules():
        if not isinstance(norm, RecurrentBatchNorm):
            continue
        tracked = int(norm.steps_tracked)
        w = tracked // 5
        norm.reserve_steps(steps)
        if w < 1 or steps <= tracked:
            continue
        ahead = torch.arange(tracked, norm.allocated_steps, dtype=norm.running_mean.dtype)
        blocks_ahead = (ahead - (tracked - w / 2)) / w
        for buffer, as_std in ((norm.running_mean, False), (norm.running_var, True)):
            rows = (
                buffer[tracked - 3 * w : tracked].sqrt()
                if as_std
                else buffer[tracked - 3 * w : tracked]
            )
            m1, m2, m3 = (rows[k * w : (k + 1) * w].mean(0) for k in range(3))
            q = ((m3 - m2).abs().sum() / (m2 - m1).abs().sum().clamp(min=1e-12)).clamp(max=0.95)
            geometric = q * (1 - q**blocks_ahead) / (1 - q)
            values = m3 + (m3 - m2) * geometric[:, None]
            buffer[tracked:] = values.clamp(min=1e-6).square() if as_std else values
        norm.steps_tracked.fill_(norm.allocated_steps)
    return model


def _drift(trained: nn.Module, recomputed: nn.Module) -> dict[str, float]:
    """Per norm of the first layer: how far the last trained step's mean is from each later
    step's population mean, in that step's standard deviations (mean over features and the
    steps past training), and the ratio of the standard deviations."""
    out: dict[str, float] = {}
    for name in ("bn_ih_l0", "bn_hh_l0", "bn_c_l0"):
        a: RecurrentBatchNorm = trained.get_submodule(f"core.{name}")  # type: ignore[assignment]
        b: RecurrentBatchNorm = recomputed.get_submodule(f"core.{name}")  # type: ignore[assignment]
        last = int(a.steps_tracked) - 1
        mean, var = b.running_mean[last + 1 :], b.running_var[last + 1 :]
        std = var.sqrt().clamp(min=1e-6)
        out[f"{name} mean shift (std)"] = float(((mean - a.running_mean[last]).abs() / std).mean())
        out[f"{name} std ratio"] = float((std / a.running_var[last].sqrt().clamp(min=1e-6)).mean())
    return out


@dataclass
class TaskRun:
    """One task and seed: the accuracy of the LSTM and of each BN-LSTM rule."""

    past: dict[str, float]
    """Accuracy over the steps past the trained length."""
    within: dict[str, float]
    """Accuracy over the trained length."""
    curves: dict[str, list[float]]
    """Accuracy at each step."""
    drift: dict[str, float]
    """See :func:`_drift`."""
    seconds: float


def run_task(task: str, seed: int, steps: int) -> TaskRun:
    """One task and seed: accuracies per step for the LSTM and each BN-LSTM rule."""
    t_test = FACTOR * T_TRAIN
    features = TASKS[task](1, 1, torch.Generator().manual_seed(0))[0].shape[-1]
    models = _models(features, seed)
    start = time.perf_counter()
    for model in models.values():
        torch.manual_seed(seed)  # random_t_max draws from torch's generator
        _train(model, task, seed, steps)
    g = torch.Generator().manual_seed(10_000 + seed)
    train_batches = [TASKS[task](BATCH, T_TRAIN, g)[0] for _ in range(8)]
    longer_batches = [TASKS[task](BATCH, t_test, g)[0] for _ in range(8)]  # unlabelled
    x, y = TASKS[task](2000, t_test, g)
    bns = [models[k] for k in ("BN-LSTM", "random_t_max", "random_t_max 1", "forget bias 1")]
    for bn in bns:
        update_bn(train_batches, bn)  # as users are told to, on the training length
    bn, random_t_max, always, forget_bias_1 = bns
    recomputed, random_recomputed = copy.deepcopy(bn), copy.deepcopy(random_t_max)
    always_recomputed = copy.deepcopy(always)
    for model in (recomputed, random_recomputed, always_recomputed):
        update_bn(longer_batches, model)
    curves = {
        "LSTM": _per_step_accuracy(models["LSTM"], x, y),
        "last": _per_step_accuracy(bn, x, y),
        "trend": _per_step_accuracy(extrapolate_statistics(bn, t_test), x, y),
        "update_bn (longer)": _per_step_accuracy(recomputed, x, y),
        "batch (diagnostic)": _per_step_accuracy(bn, x, y, batch_stats=True),
        "random_t_max: last": _per_step_accuracy(random_t_max, x, y),
        "random_t_max: update_bn (longer)": _per_step_accuracy(random_recomputed, x, y),
        "random_t_max 1: last": _per_step_accuracy(always, x, y),
        "random_t_max 1: update_bn (longer)": _per_step_accuracy(always_recomputed, x, y),
        "forget bias 1: last": _per_step_accuracy(forget_bias_1, x, y),
        "forget bias 1: batch (diagnostic)": _per_step_accuracy(
            forget_bias_1, x, y, batch_stats=True
        ),
    }
    return TaskRun(
        past={k: float(v[T_TRAIN:].mean()) for k, v in curves.items()},
        within={k: float(v[:T_TRAIN].mean()) for k, v in curves.items()},
        curves={k: [float(a) for a in v] for k, v in curves.items()},
        drift=_drift(bn, recomputed),
        seconds=time.perf_counter() - start,
    )


def reproduce_past_t_max(ctx: RunContext) -> Path:
    """Run every task and seed and write the report."""
    report = Report(METHODS["bnlstm"], ctx.out, ctx.command)
    seeds = [ctx.seed] if ctx.quick else [ctx.seed + k for k in range(3)]
    steps = 300 if ctx.quick else 3000
    runs = {
        task: [run_task(task, s, steps) for s in ctx.progress(seeds, desc=task)] for task in TASKS
    }
    columns = ("LSTM", *RULES, "random_t_max 1: last", *VARIANTS)
    main = ("LSTM", "last", "update_bn (longer)", "random_t_max: last", "random_t_max 1: last")
    diagnostics = tuple(k for k in columns if k not in main)

    def mean_std(task: str, key: str) -> tuple[float, float]:
        values = [100 * r.past[key] for r in runs[task]]
        return float(np.mean(values)), float(np.std(values))

    report.section("Past the trained length")
    report.text(
        f"Trained on sequences of {T_TRAIN} steps, tested on {FACTOR * T_TRAIN}: accuracy "
        f"(%) over the steps past {T_TRAIN}, mean ± standard deviation over {len(seeds)} "
        f"seed(s). Hidden size {HIDDEN}, batch {BATCH}, {steps} Adam steps (lr 3e-3, "
        "clipping at 1); the LSTM starts from the BN-LSTM's initial weights, forget-gate "
        f"bias {FORGET_BIAS:g} for all. The BN-LSTMs' statistics were recomputed with "
        "`update_bn` on the training length first. `last`, `update_bn (longer)`: the "
        "BN-LSTM trained as in the paper, evaluated with the last trained step's statistics "
        "past it (the paper's rule) or with statistics recomputed over unlabelled sequences "
        f"of the test length; `random_t_max: last`: trained with `random_t_max={RANDOM_T_MAX:g}`"
        f", evaluated by the paper's rule; `random_t_max 1: last`: the same with "
        f"`random_t_max={RANDOM_T_MAX_ALWAYS:g}`. Goal: no worse than the LSTM minus "
        f"{GOAL_POINTS:g} points."
    )

    def table(keys: Sequence[str]) -> None:
        rows = []
        for task in TASKS:
            cells = [task]
            for key in keys:
                m, s = mean_std(task, key)
                cells.append(f"{m:.1f} ± {s:.1f}")
            rows.append(cells)
        report.table(["task", *keys], rows)

    table(main)
    within = (
        ("LSTM", "LSTM"),
        ("BN-LSTM", "last"),
        ("random_t_max", "random_t_max: last"),
        ("random_t_max 1", "random_t_max 1: last"),
    )
    report.text(
        "Within the trained length (accuracy over the first "
        f"{T_TRAIN} steps: "
        + "; ".join(
            f"{task} "
            + ", ".join(
                f"{name} {100 * np.mean([r.within[key] for r in runs[task]]):.1f}"
                for name, key in within
            )
            for task in TASKS
        )
        + ")."
    )
    report.section("Diagnostics")
    report.text(
        "`trend`: the paper-trained BN-LSTM with each statistic extrapolated from its drift "
        "over the last trained steps; `batch (diagnostic)`: with the test batch's own "
        "statistics at every step (exact statistics, but each output depends on the batch); "
        "`forget bias 1`: a BN-LSTM trained as in the paper from the default forget-gate bias "
        "of 1, all else equal."
    )
    table(diagnostics)
    report.section("Why the last step's statistics fall short")
    drift_rows = []
    for task in TASKS:
        keys = list(runs[task][0].drift)
        drift_rows.append(
            [task] + [f"{np.mean([r.drift[k] for r in runs[task]]):.3f}" for k in keys]
        )
    report.text(
        "The population statistics past the trained length (recomputed over longer "
        "unlabelled sequences) against the last trained step's: the mean's shift in "
        "standard deviations, and the ratio of standard deviations, averaged over features "
        "and the steps past training (first layer)."
    )
    report.table(["task", *runs["running sum"][0].drift], drift_rows)
    report.results["past_t_max"] = {
        "t_train": T_TRAIN,
        "t_test": FACTOR * T_TRAIN,
        "hidden": HIDDEN,
        "steps": steps,
        "seeds": seeds,
        "goal_points": GOAL_POINTS,
        "tasks": {
            task: {
                "past": {k: [r.past[k] for r in runs[task]] for k in columns},
                "within": {k: [r.within[k] for r in runs[task]] for k in columns},
                "drift": {k: [r.drift[k] for r in runs[task]] for k in runs[task][0].drift},
                "curves": [r.curves for r in runs[task]],
                "seconds": [r.seconds for r in runs[task]],
            }
            for task in TASKS
        },
    }
    for task in TASKS:
        lstm = mean_std(task, "LSTM")[0]
        report.finding(
            f"{task}, accuracy past {T_TRAIN} steps at {FACTOR * T_TRAIN}: LSTM / BN-LSTM "
            "last / update_bn (longer) / random_t_max last / random_t_max 1 last",
            " / ".join(f"{mean_std(task, k)[0]:.1f}" for k in main),
            f"goal: >= {lstm - GOAL_POINTS:.1f}",
        )
    return report.write()


def main(argv: Sequence[str] | None = None) -> int:
    return experiment_main(
        "paperports.experiments.bnlstm.past_t_max",
        __doc__,
        lambda ctx, args: reproduce_past_t_max(ctx),
        "runs/bnlstm-past-t-max",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
