from __future__ import annotations

import numpy as np
import pytest
import torch

from paperports.experiments.jsma.common import AttackRun, all_other_targets


def test_every_image_is_paired_with_each_other_class() -> None:
    x = torch.arange(3.0).reshape(3, 1)
    y = torch.tensor([0, 1, 1])
    xs, src, dst = all_other_targets(x, y, num_classes=3)
    pairs = sorted(zip(xs.flatten().tolist(), src.tolist(), dst.tolist(), strict=True))
    assert pairs == [
        (0.0, 0, 1),
        (0.0, 0, 2),
        (1.0, 1, 0),
        (1.0, 1, 2),
        (2.0, 1, 0),
        (2.0, 1, 2),
    ]


def test_success_within_a_budget_counts_only_cheap_enough_successes() -> None:
    run = AttackRun(
        "r",
        torch.zeros(4),
        np.array([True, True, False, True]),
        np.array([0.01, 0.05, 0.145, 0.10]),
        1.0,
    )
    assert run.success_within(np.array([0.0, 0.01, 0.05, 0.145])).tolist() == [0, 0.25, 0.5, 0.75]
    assert run.mean_l0 == np.mean([0.01, 0.05, 0.10])


def test_a_run_at_exactly_the_budget_counts_as_within_it() -> None:
    from paperports.experiments.jsma.common import _outcome

    x = torch.zeros(1, 784)
    adv = x.clone()
    adv[0, :113] = 1.0  # floor(784 * 14.5%) features: the whole budget, not more
    model = torch.nn.Linear(784, 2)
    run = _outcome("r", model, x, adv, model(adv).argmax(1), 1.0)
    assert run.success_within(np.array([np.floor(784 * 0.145) / 784]))[0] == 1.0


def test_a_curve_from_one_call_with_epsilons_is_the_runs_own_success_within_each_budget() -> None:
    """foolbox's epsilons, judged in the same calls as the run, give the robustness curve
    that the run's L0s give: each budget is a prefix of the greedy run."""
    from paperports.adapters.digits import digits_classifier, load_digits_tensors
    from paperports.experiments.jsma.common import run_ours
    from paperports.integrations.foolbox import SaliencyMapAttack

    model = digits_classifier(8)
    x, y = load_digits_tensors(8, "test")
    xa, _, dst = all_other_targets(x[:6], y[:6])
    epsilons = [0, 2, 4, 6, 8, 12]
    attack = SaliencyMapAttack(variant="wjsma", max_perturbation=0.2)
    run = run_ours("r", model, xa, dst, attack, batch_size=16, epsilons=epsilons)
    assert run.curve is not None and run.curve.shape == (len(epsilons), len(xa))
    within = run.success_within(np.array(epsilons) / 64)
    np.testing.assert_array_equal(run.curve.mean(1), within)
    assert within[-1] > within[0] + 0.5 and (np.diff(within) >= 0).all()  # a rising curve
    assert run.summary()["curve"] == {"epsilons": epsilons, "success": within.tolist()}


def test_against_compares_the_mean_l0_over_the_inputs_both_runs_fooled() -> None:
    def run(name: str, success: list[bool], l0: list[float]) -> AttackRun:
        return AttackRun(name, torch.zeros(4), np.array(success), np.array(l0), 1.0)

    ours = run("pairs, probabilities", [True, True, True, False], [0.02, 0.04, 0.30, 0.5])
    art = run("ART SaliencyMapMethod", [True, True, False, True], [0.03, 0.05, 0.5, 0.06])
    got = ours.against(art)
    assert got["success"] == 0.75 and got["art_success"] == 0.75
    # each over its own successes: the hard third input raises ours above ART's
    assert got["mean_l0"] == pytest.approx(0.12) and got["art_mean_l0"] == pytest.approx(0.0466667)
    # over the two inputs both fooled, ours changes fewer features
    assert got["both_succeeded"] == 2
    assert got["mean_l0_both_succeeded"] == pytest.approx(0.03)
    assert got["art_mean_l0_both_succeeded"] == pytest.approx(0.04)
