from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from paperports import cli
from paperports.experiments.bnlstm.bench import bench
from paperports.experiments.bnlstm.reproduce import gradient_flow, train_classifier
from paperports.registry import RunContext


def test_both_models_learn_sequential_digits_in_three_epochs(tmp_path: Path) -> None:
    ctx = RunContext(out=tmp_path, quiet=True)
    for kind in ("LSTM", "BN-LSTM"):
        curve, seconds, ema = train_classifier(kind, "sequential", 0, 3, ctx)
        assert len(curve) == 3 and seconds > 0
        assert curve[-1] > 0.2  # chance: 0.1
        assert (ema is None) == (kind == "LSTM")


def test_language_models_train_with_trainer_and_beat_uniform(tmp_path: Path) -> None:
    from paperports.experiments.bnlstm.language_model import (
        bits_per_char,
        chunks,
        make_model,
        stdlib_bytes,
        train_lm,
    )

    train, held = stdlib_bytes()
    assert len(train) > 400_000 and len(held) > 40_000
    for kind in ("LSTM", "BN-LSTM"):
        torch.manual_seed(0)
        model = make_model(kind, 16, 32, 50)
        losses = train_lm(model, chunks(train, 50)[:2048], steps=100, batch=32, seed=0, quiet=True)
        assert losses[-1] < losses[0]
        assert bits_per_char(model, chunks(held, 50)[:64]) < 7.5  # uniform over bytes: 8


def test_gradient_flow_gives_a_finite_norm_per_step() -> None:
    norms = gradient_flow(0.1, steps=16)
    assert norms.shape == (16,)
    assert np.all(np.isfinite(norms)) and np.all(norms > 0)
    assert not np.allclose(norms, gradient_flow(1.0, steps=16))  # gamma matters


def test_bench_times_training_and_inference_against_nn_lstm(tmp_path: Path) -> None:
    result = bench(RunContext(out=tmp_path, quiet=True))
    assert [r.name for r in result.rows] == [
        "training step (forward + backward)",
        "inference forward",
    ]
    assert all(r.ours > 0 and r.anchor > 0 for r in result.rows)
    assert result.write(tmp_path).exists()


@pytest.mark.slow
def test_quick_reproduction_writes_the_report(tmp_path: Path) -> None:
    assert cli.main(["reproduce", "bnlstm", "--quick", "--quiet", "--out", str(tmp_path)]) == 0
    out = tmp_path / "bnlstm"
    md = (out / "report.md").read_text()
    assert "99.0" in md and "95.4" in md  # the paper's figures, beside ours
    assert (out / "learning_curves.png").exists() and (out / "gradient_flow.png").exists()
    res = json.loads((out / "results.json").read_text())
    assert set(res["curves"]) == {
        "sequential/LSTM",
        "sequential/BN-LSTM",
        "permuted/LSTM",
        "permuted/BN-LSTM",
    }
