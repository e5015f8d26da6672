"""Trainer runs in the reproductions show one progress bar each, never the raw log lines."""

from __future__ import annotations

import pytest
import torch

from paperports.experiments.bnlstm.language_model import make_model, train_lm
from paperports.experiments.trainer_runs import TrainerProgress


@pytest.mark.parametrize("quiet", [False, True])
def test_a_trainer_run_prints_no_log_dictionaries(
    quiet: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    model = make_model("LSTM", 8, 8, 12)
    pieces = torch.randint(0, 256, (64, 12))
    losses = train_lm(model, pieces, steps=6, batch=8, seed=0, quiet=quiet).losses
    out, err = capsys.readouterr()
    # the history is kept (every step logged: steps // 25 rounds up to 1) ...
    assert len(losses) == 6 and all(loss == loss for loss in losses)
    # ... but Trainer's own printers are gone: no "{'loss': ...}" lines anywhere
    assert "'loss'" not in out + err and "train_runtime" not in out + err
    # our bar instead, unless quiet
    assert ("LstmLM" in err) is not quiet


def test_the_progress_bar_follows_the_steps_and_the_loss() -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    bar = TrainerProgress("run")
    state = TrainerState(max_steps=10)
    args = TrainingArguments(output_dir="unused", report_to=[])
    control = TrainerControl()
    bar.on_train_begin(args, state, control)
    assert bar.bar is not None and bar.bar.total == 10
    state.global_step = 3
    bar.on_step_end(args, state, control)
    bar.on_log(args, state, control, logs={"loss": 1.23456, "grad_norm": 2.0})
    assert bar.bar.n == 3 and bar.bar.postfix == "loss=1.235"
    bar.on_train_end(args, state, control)
    assert bar.bar is None
