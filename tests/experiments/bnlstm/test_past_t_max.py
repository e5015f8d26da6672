"""The past-t_max comparison (issue 24, item 4): the candidate extrapolation of the
statistics, and one task's run end to end on a tiny budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from paperports.experiments.bnlstm.past_t_max import (
    RULES,
    TASKS,
    VARIANTS,
    extrapolate_statistics,
    run_task,
)
from paperports.integrations.torch import RecurrentBatchNorm
from paperports.registry import RunContext


def _norm_with(mean: torch.Tensor, std: torch.Tensor) -> torch.nn.Module:
    model = torch.nn.Module()
    norm = RecurrentBatchNorm(mean.shape[1], t_max=1000)
    norm.reserve_steps(mean.shape[0])
    with torch.no_grad():
        norm.running_mean.copy_(mean)
        norm.running_var.copy_(std.square())
        norm.steps_tracked.fill_(mean.shape[0])
    model.norm = norm
    return model


def test_constant_statistics_stay_constant() -> None:
    model = _norm_with(torch.full((20, 3), 0.5), torch.full((20, 3), 2.0))
    extended = extrapolate_statistics(model, 80).norm
    assert extended.allocated_steps == 80 and int(extended.steps_tracked) == 80
    torch.testing.assert_close(extended.running_mean[20:], torch.full((60, 3), 0.5))
    torch.testing.assert_close(extended.running_var[20:], torch.full((60, 3), 4.0))
    assert model.norm.allocated_steps == 20  # the model itself is not changed


def test_settling_statistics_continue_towards_their_level_without_passing_it() -> None:
    """A mean that settles geometrically (1 - 0.9^t) keeps rising past the trained steps,
    stays below its level 1, and rises less than a straight line would."""
    t = torch.arange(30, dtype=torch.float32)[:, None]
    mean = 1 - 0.9**t
    extended = extrapolate_statistics(_norm_with(mean, torch.ones(30, 1)), 120).norm
    ahead = extended.running_mean[30:, 0]
    assert bool((ahead[1:] >= ahead[:-1]).all()) and float(ahead[0]) > float(mean[-1, 0])
    assert float(ahead[-1]) < 1.0
    slope = float(mean[-1, 0] - mean[-2, 0])
    assert float(ahead[-1]) < float(mean[-1, 0]) + slope * 90
    torch.testing.assert_close(extended.running_var[30:], torch.ones(90, 1))


def test_a_task_runs_every_rule_on_a_tiny_budget() -> None:
    torch.manual_seed(0)
    run = run_task("counting", seed=0, steps=3)
    assert set(run.past) == {"LSTM", *RULES, "random_t_max 1: last", *VARIANTS}
    assert all(len(curve) == 100 for curve in run.curves.values())
    assert all(0.0 <= v <= 1.0 for v in run.past.values())
    assert set(run.drift) >= {"bn_c_l0 mean shift (std)", "bn_c_l0 std ratio"}


def test_the_tasks_labels_follow_their_definitions() -> None:
    g = torch.Generator().manual_seed(0)
    x, y = TASKS["parity"](4, 30, g)
    torch.testing.assert_close(y, x[..., 1].long().cumsum(1) % 2)
    x, y = TASKS["running sum"](4, 30, g)
    torch.testing.assert_close(y, (x[..., 0].cumsum(1) > 0).long())
    x, y = TASKS["counting"](4, 30, g)
    counts = x.cumsum(1)
    torch.testing.assert_close(y, (counts[..., 0] >= counts[..., 1]).long())


def test_the_report_names_each_models_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's tables and its within-the-trained-length line read each column by its
    name from the runs (on a budget of 3 steps per model, one seed)."""
    from paperports.experiments.bnlstm import past_t_max

    runs: dict[str, past_t_max.TaskRun] = {}

    def keep(task: str, seed: int, steps: int) -> past_t_max.TaskRun:
        runs[task] = run_task(task, seed, 3)
        return runs[task]

    monkeypatch.setattr(past_t_max, "run_task", keep)
    path = past_t_max.reproduce_past_t_max(RunContext(out=tmp_path, quick=True, quiet=True))
    md = path.read_text()
    within = md.split("Within the trained length")[1].split("\n")[0]
    for task in TASKS:
        r = runs[task].within
        assert (
            f"{task} LSTM {100 * r['LSTM']:.1f}, BN-LSTM {100 * r['last']:.1f}, "
            f"random_t_max {100 * r['random_t_max: last']:.1f}, "
            f"random_t_max 1 {100 * r['random_t_max 1: last']:.1f}"
        ) in within
        row = next(line for line in md.splitlines() if line.startswith(f"| {task} | "))
        assert f"| {100 * runs[task].past['random_t_max 1: last']:.1f} ± 0.0 |" in row
