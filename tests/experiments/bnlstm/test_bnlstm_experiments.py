from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from paperports import cli
from paperports.experiments.bnlstm.bench import bench
from paperports.experiments.bnlstm.reproduce import KINDS, gradient_flow, train_classifier
from paperports.integrations.torch import BNLSTM, BNLSTMCell
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
        pieces = chunks(held, 50)[:64]
        run = train_lm(
            model, chunks(train, 50)[:2048], steps=100, batch=32, seed=0, quiet=True,
            held_out=pieces,
        )  # fmt: skip
        # the held-out curve: every 100 // 25 = 4 steps, falling, and the model handed back
        # in training mode after each measurement (Trainer would not set it again)
        assert model.training
        assert [step for step, _ in run.held_out] == list(range(4, 101, 4))
        assert run.held_out[-1][1] < run.held_out[0][1] < 8
        assert run.losses[-1] < run.losses[0]
        assert bits_per_char(model, pieces) < 7.5  # uniform over bytes: 8


def test_gradient_flow_is_the_norm_of_the_loss_gradient_per_step() -> None:
    """At the last step dL/dh_T = W^T (softmax(W h_T + b) - onehot(y)) / B in closed form;
    the probe's value there must be its mean norm, and earlier steps' come through time."""
    from paperports.experiments.bnlstm.reproduce import _PERMUTATION, _pixel_sequences

    steps = 16
    x, y = _pixel_sequences("train", _PERMUTATION)
    x, y = x[:steps, :128], y[:128]
    for model in ("tanh RNN", "BN-LSTM"):
        norms = gradient_flow(0.1, steps=steps, model=model)
        assert norms.shape == (steps,) and np.all(np.isfinite(norms)) and np.all(norms > 0)
        torch.manual_seed(0)  # the probe's own construction, to recompute its last step
        h = c = torch.zeros(x.shape[1], 64)
        with torch.no_grad():
            if model == "BN-LSTM":
                cell = BNLSTMCell(1, 64, t_max=steps, gamma_init=0.1)
                head = torch.nn.Linear(64, 10)
                for t in range(steps):
                    h, c = cell(x[t], (h, c), t=t)
            else:  # h_t = tanh(BN(W_h h_{t-1}) + BN(W_x x_t)), batch statistics per step
                w_h = torch.nn.init.orthogonal_(torch.empty(64, 64))
                w_x = torch.nn.init.xavier_uniform_(torch.empty(64, 1))
                head = torch.nn.Linear(64, 10)

                def bn(a: torch.Tensor) -> torch.Tensor:
                    z = (a - a.mean(0)) / torch.sqrt(a.var(0, unbiased=False) + 1e-5)
                    return 0.1 * z  # gamma 0.1; beta starts at 0

                for t in range(steps):
                    h = torch.tanh(bn(h @ w_h.T) + bn(x[t] @ w_x.T))
            probs = torch.softmax(head(h), dim=-1)
            grad = (probs - torch.nn.functional.one_hot(y, 10)) @ head.weight / len(y)
        assert norms[-1] == pytest.approx(float(grad.norm(dim=1).mean()), rel=1e-4), model
        assert not np.allclose(norms, gradient_flow(1.0, steps=steps, model=model))  # gamma


def test_the_lstm_baseline_starts_from_the_bn_lstms_weights() -> None:
    """The comparison isolates batch normalisation: the nn.LSTM of a seed starts from the
    BN-LSTM's initial weights (and head) of the same seed; the reference row does not."""
    from paperports.experiments.bnlstm.reproduce import TORCH_INIT, _make

    torch.manual_seed(5)
    bn = _make("BN-LSTM").state_dict()
    torch.manual_seed(5)
    lstm = _make("LSTM").state_dict()
    torch.manual_seed(5)
    reference = _make(TORCH_INIT).state_dict()
    assert set(lstm) == {k for k in bn if ".bn_" not in k}
    for key, value in lstm.items():
        torch.testing.assert_close(value, bn[key], msg=key)
    assert not torch.equal(reference["core.weight_hh_l0"], bn["core.weight_hh_l0"])


def test_bench_times_a_training_step_and_an_inference_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The training row runs forward and backward in training mode; the inference row a
    forward pass in evaluation, without gradients; both models see the same input; the
    per-step rows run the per-step computation, the others the fast paths. (At tiny
    sizes: the real ones are what ``paperports bench bnlstm`` measures.)"""
    import importlib

    bench_module = importlib.import_module("paperports.experiments.bnlstm.bench")  # not the
    # package's `bench`, the function of the same name
    from paperports.experiments.bnlstm.bench import _inference, _train_step
    from paperports.integrations.torch import bn_lstm

    x = torch.randn(5, 4, 3)
    for model in (BNLSTM(3, 8, t_max=5), torch.nn.LSTM(3, 8)):
        _train_step(model, x)()
        assert model.training and all(p.grad is not None for p in model.parameters())
        model.zero_grad(set_to_none=True)
        _inference(model, x)()
        assert not model.training and all(p.grad is None for p in model.parameters())
    names_and_goals = [(row[0], row[1], row[-1]) for row in bench_module._ROWS]
    assert names_and_goals == [
        ("training step (forward + backward)", "ours", "ratio <= 1.5"),
        ("inference forward", "ours", "ratio <= 1.25"),
        ("per-step computation: training step", "per-step", "reference"),
        ("per-step computation: inference forward", "per-step", "reference"),
        ("training step, hidden 1000", "ours", "ratio <= 1.2"),
        ("inference forward, hidden 1000", "ours", "ratio <= 1.2"),
    ]
    tiny = [(n, w, f, 4, 5, 8 if h == 256 else 12, g) for n, w, f, _, _, h, g in bench_module._ROWS]
    monkeypatch.setattr(bench_module, "_ROWS", tiny)
    calls: list[bool] = []
    real = bn_lstm._sequence_stepwise

    def counted(*args: object) -> object:
        calls.append(True)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(bn_lstm, "_sequence_stepwise", counted)
    result = bench(RunContext(out=tmp_path, quiet=True))
    assert [r.name for r in result.rows] == [row[0] for row in tiny]
    assert calls  # the per-step rows ran it ...
    per_step_calls = len(calls)
    calls.clear()
    monkeypatch.setattr(bench_module, "_ROWS", [row for row in tiny if row[1] == "ours"])
    bench(RunContext(out=tmp_path, quiet=True))
    assert not calls and per_step_calls > 0  # ... and only they did
    for r, row in zip(result.rows, tiny, strict=True):
        rounds = r.extra.pop("ratio_by_round")
        assert r.extra == {"batch": 4, "steps": 5, "input": 64, "hidden": row[5], "model": row[1]}
        assert r.ratio == r.ours / r.anchor
        # each round measured the row; the reported times are medians over the rounds, so
        # the reported ratio lies within the rounds' ratios
        assert len(rounds) == bench_module.ROUNDS == 3
        assert min(rounds) * 0.999 <= r.ratio <= max(rounds) * 1.001
    assert (
        json.loads(result.write(tmp_path).read_text())["rows"][0]["ratio"] == result.rows[0].ratio
    )


@pytest.mark.slow
def test_quick_reproduction_writes_the_report(tmp_path: Path) -> None:
    assert cli.main(["reproduce", "bnlstm", "--quick", "--quiet", "--out", str(tmp_path)]) == 0
    out = tmp_path / "bnlstm"
    md = (out / "report.md").read_text()
    res = json.loads((out / "results.json").read_text())
    # each table row puts our accuracy (the seeds' final test accuracy) beside the paper's
    for task in ("sequential", "permuted"):
        for kind in ("LSTM", "BN-LSTM"):
            ours = 100 * np.mean([curve[-1] for curve in res["curves"][f"{task}/{kind}"]])
            row = next(line for line in md.splitlines() if line.startswith(f"| {task} | {kind} |"))
            assert f"| {ours:.1f} ± " in row and f"| {res['paper'][task][kind]:.1f} |" in row
    assert (out / "learning_curves.png").exists() and (out / "gradient_flow.png").exists()
    # the summary's rows, from the same results
    summary = {row["claim"]: row for row in res["summary"]}
    bpc = res["language_model"]["bpc"]
    assert summary["bits per character, LSTM / BN-LSTM"]["ours"] == (
        f"{bpc['LSTM']:.3f} / {bpc['BN-LSTM']:.3f}"
    )
    low = res["language_model"]["lowest_held_out"]
    early = "bits per character at the lowest held-out point (early stopping), LSTM / BN-LSTM"
    assert summary[early]["ours"] == f"{low['LSTM']['bpc']:.3f} / {low['BN-LSTM']['bpc']:.3f}"
    # the held-out curve's lowest point, mean over seeds, with its step
    lm = res["language_model"]
    header = next(line for line in md.splitlines() if line.startswith("| model | held-out bpc"))
    column = [c.strip() for c in header.split("|")[1:-1]].index("lowest along training (step)")
    for kind, low in lm["lowest_held_out"].items():
        curve = lm["held_out_curve"][kind]
        assert low["bpc"] == min(curve)
        assert low["step"] == lm["held_out_curve"]["steps"][curve.index(low["bpc"])]
        row = next(line for line in md.splitlines() if line.startswith(f"| {kind} | "))
        assert [c.strip() for c in row.split("|")[1:-1]][column] == (
            f"{low['bpc']:.3f} ({low['step']})"
        )
    finals = [100 * np.mean([c[-1] for c in res["curves"][f"permuted/{k}"]]) for k in KINDS]
    assert summary["permuted digits %, LSTM / BN-LSTM"]["ours"] == "{:.1f} / {:.1f}".format(*finals)
    assert set(res["curves"]) == {
        f"{task}/{kind}"
        for task in ("sequential", "permuted")
        for kind in ("LSTM", "BN-LSTM", "LSTM (torch init)")
    }


def test_language_model_runs_resume_from_their_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished language-model run is written as it ends and read back by a later
    reproduction into the same folder instead of training again; the random_t_max kind
    trains with BnLstmConfig(random_t_max=RANDOM_T_MAX), 1."""
    # the module, not the package's `reproduce` function of the same name
    bnlstm_reproduce = importlib.import_module("paperports.experiments.bnlstm.reproduce")
    ctx = RunContext(out=tmp_path, quiet=True)
    sizes = {"embedding": 8, "hidden": 8, "seq_len": 20, "batch": 8}
    made: list[float] = []
    real_make = bnlstm_reproduce.make_model

    def spy(*args: object, **kwargs: object) -> torch.nn.Module:
        model = real_make(*args, **kwargs)  # type: ignore[arg-type]
        made.append(float(getattr(getattr(model, "config", None), "random_t_max", -1.0)))
        return model

    monkeypatch.setattr(bnlstm_reproduce, "make_model", spy)
    kind = bnlstm_reproduce.RANDOM_T_MAX_KIND
    first = bnlstm_reproduce._lm_run(kind, 0, sizes, 4, ctx)
    assert made == [bnlstm_reproduce.RANDOM_T_MAX] == [1.0]
    assert set(first) == {"losses", "held_out_curve", "seconds", "bpc", "bpc_by_length"}
    assert [step for step, _ in first["held_out_curve"]] == [1, 2, 3, 4]
    assert 0 < first["bpc"] < 9  # bits per byte, below uniform's 8 plus slack
    assert list(first["bpc_by_length"]) == ["20", "40", "100", "200"]
    again = bnlstm_reproduce._lm_run(kind, 0, sizes, 4, ctx)
    assert again == first and made == [bnlstm_reproduce.RANDOM_T_MAX]  # read back, not trained
    bnlstm_reproduce._lm_run(kind, 1, sizes, 4, ctx)  # another seed is another run
    assert len(made) == 2
    assert len(list((tmp_path / "lm_runs").glob("*.json"))) == 2


def test_the_language_model_section_names_the_lowest_points_and_the_overfitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full budget's prose, from the runs' records: which model reaches the lower
    held-out bpc along training, and which rise after their lowest point."""
    bnlstm_reproduce = importlib.import_module("paperports.experiments.bnlstm.reproduce")
    curves = {  # held-out bpc at steps 1, 2, 3; the last is the bpc after training
        "LSTM": [1.9, 1.7, 1.96],
        "BN-LSTM": [1.68, 1.8, 2.13],
        bnlstm_reproduce.RANDOM_T_MAX_KIND: [1.9, 1.77, 1.8],
    }

    def record(kind: str, seed: int, sizes: dict[str, int], steps: int, ctx: RunContext) -> dict:
        t = sizes["seq_len"]
        return {
            "losses": [2.0, 1.5],
            "held_out_curve": [[step + 1, b] for step, b in enumerate(curves[kind])],
            "seconds": 1.0,
            "bpc": curves[kind][-1],
            "bpc_by_length": {
                str(f * t): curves[kind][-1] for f in bnlstm_reproduce.LENGTH_FACTORS
            },
        }

    monkeypatch.setattr(bnlstm_reproduce, "_lm_run", record)
    report = bnlstm_reproduce.Report(
        bnlstm_reproduce.METHODS["bnlstm"], tmp_path, "paperports reproduce bnlstm"
    )
    bpc, lowest = bnlstm_reproduce._language_model(report, RunContext(out=tmp_path, quiet=True))
    assert bpc["LSTM"] == pytest.approx(1.96)
    assert lowest["BN-LSTM"] == (pytest.approx(1.68), 1) and lowest["LSTM"][1] == 2
    md = "\n".join(report.parts)
    assert "the LSTM reaches the lower held-out bpc after training (1.960)" in md
    assert (
        "at the lowest point along training, the BN-LSTM is lower (1.680 at step 1, the LSTM "
        "1.700 at "
        "step 2)" in md
    )
    # not the third (+0.03); all three: "every model"
    assert "after its lowest point for the LSTM and the BN-LSTM: on this" in md
    assert bnlstm_reproduce._which(list(bnlstm_reproduce.LM_KINDS)) == "every model"
    assert bnlstm_reproduce._which(["BN-LSTM"]) == "the BN-LSTM"
    assert report.results["language_model"]["seeds"] == [0, 1, 2]
