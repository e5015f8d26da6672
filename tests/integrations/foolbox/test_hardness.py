from __future__ import annotations

import numpy as np
import pytest
import torch

from paperports.integrations.foolbox import (
    adversarial_distance,
    adversarial_distance_matrix,
    hardness_matrix,
    saliency_map,
)

from .conftest import TinyNet, fmodel


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
def test_adversarial_distance_is_the_fraction_of_zero_saliency(tiny: TinyNet, outputs: str) -> None:
    x = torch.rand(6, 6, dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 3, 0, 1])
    s = saliency_map(fmodel(tiny), x, t, outputs=outputs)
    expected = 1 - (s > 0).double().mean(1)
    a = adversarial_distance(fmodel(tiny), x, t, outputs=outputs)
    torch.testing.assert_close(a, expected)
    assert ((a > 0) & (a < 1)).any(), "all-0 or all-1 distances would make this vacuous"


def test_adversarial_distance_matrix_averages_per_source_class(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    m = adversarial_distance_matrix(fmodel(model), x, y)
    assert m.shape == (10, 10)
    assert np.isnan(np.diag(m)).all()
    off = m[~np.eye(10, dtype=bool)]
    present = off[~np.isnan(off)]
    assert ((present >= 0) & (present <= 1)).all()
    # one entry against a direct computation
    s, t = int(y[0]), (int(y[0]) + 1) % 10
    rows = y == s
    direct = adversarial_distance(fmodel(model), x[rows], torch.full((int(rows.sum()),), t))
    assert m[s, t] == pytest.approx(float(direct.mean()))


def test_hardness_is_the_normalised_area_under_the_distortion_curve() -> None:
    # two samples 0 -> 1: one needed 2% of the features, one failed at 20%
    h = hardness_matrix([0.02, 0.2], [0, 0], [1, 1], num_classes=3, max_perturbations=[0.01, 0.1])
    # distortion at 1%: (0.01 + 0.01) / 2; at 10%: (0.02 + 0.1) / 2; trapezoid / width
    assert h[0, 1] == pytest.approx((0.01 + 0.06) / 2)
    assert np.isnan(h[1, 0]) and np.isnan(h[0, 0])


def test_needing_more_features_is_harder() -> None:
    d = np.array([0.01, 0.02, 0.08, 0.12])
    h = hardness_matrix(d, [0, 0, 1, 1], [1, 1, 0, 0], num_classes=2)
    assert h[1, 0] > h[0, 1]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.1], [2], [2]), "target equals the true class"),
        (([0.1, 0.2], [0], [1]), "same length"),
        (([0.1], [0], [5]), r"\[0, 3\)"),
    ],
)
def test_hardness_rejects_bad_input(
    args: tuple[list[float], list[int], list[int]], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        hardness_matrix(*args, num_classes=3)


def test_hardness_rejects_a_bad_grid() -> None:
    with pytest.raises(ValueError, match="increasing"):
        hardness_matrix([0.1], [0], [1], num_classes=2, max_perturbations=[0.1, 0.05])


@pytest.mark.parametrize("targets", [[-1, 0, 1, 2, 3, 0], [0, 1, 2, 4, 0, 1]])
def test_a_target_outside_the_classes_is_refused(tiny: TinyNet, targets: list[int]) -> None:
    """-1 silently meant the last class."""
    x = torch.rand(6, 6, dtype=torch.float64)
    t = torch.tensor(targets)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 4\)"):
        adversarial_distance(fmodel(tiny), x, t)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 4\)"):
        saliency_map(fmodel(tiny), x, t)


@pytest.mark.parametrize(
    ("l0", "match"),
    [([float("nan")], "l0_fraction must hold"), ([-0.1], "l0_fraction"), ([1.5], "l0_fraction")],
)
def test_hardness_refuses_fractions_outside_0_1(l0: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        hardness_matrix(l0, [0], [1], num_classes=3)


def test_hardness_refuses_a_fractional_label() -> None:
    """A label of 1.5 matched no class and was dropped from the matrix."""
    with pytest.raises(ValueError, match="whole class numbers"):
        hardness_matrix([0.1, 0.2], [0, 1.5], [1, 0], num_classes=3)
