from __future__ import annotations

import pytest
import torch

from paperports.integrations.torch import RecurrentBatchNorm


def _steps_with_different_scales(t: int = 5, b: int = 64, f: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    shift = torch.arange(t, dtype=torch.float32)[:, None, None] * 10
    scale = 1 + torch.arange(t, dtype=torch.float32)[:, None, None]
    return shift + scale * torch.randn(t, b, f, generator=g)


def test_training_normalises_each_step_with_its_own_batch_statistics() -> None:
    bn = RecurrentBatchNorm(3, t_max=10, gamma_init=0.1)
    x = _steps_with_different_scales()
    y = bn(x)
    # every step: mean beta = 0, std gamma = 0.1, although the steps differ 10x in scale
    torch.testing.assert_close(y.mean(dim=1), torch.zeros(5, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        y.std(dim=1, unbiased=False), torch.full((5, 3), 0.1), atol=1e-4, rtol=0
    )


def test_each_step_keeps_its_own_running_statistics() -> None:
    bn = RecurrentBatchNorm(3, t_max=10, momentum=1.0)
    x = _steps_with_different_scales()
    bn(x)
    torch.testing.assert_close(bn.running_mean[:5], x.mean(dim=1))
    torch.testing.assert_close(bn.running_var[:5], x.var(dim=1, unbiased=True))
    assert bn.running_mean.shape == (5, 3)  # the steps trained, not t_max = 10
    assert int(bn.steps_tracked) == 5


def test_eval_is_the_per_step_affine_map_and_clamps_past_the_last_step() -> None:
    bn = RecurrentBatchNorm(3, t_max=4, momentum=1.0)
    x = _steps_with_different_scales(t=6)
    bn(x)  # steps 0..3 keep statistics; 4, 5 do not (t_max = 4)
    bn.eval()
    probe = torch.randn(1, 2, 3)
    for t in range(4):
        expected = (probe - bn.running_mean[t]) / torch.sqrt(bn.running_var[t] + bn.eps) * 0.1
        torch.testing.assert_close(bn(probe, start=t), expected)
    for late in (4, 9, 100):
        torch.testing.assert_close(bn(probe, start=late), bn(probe, start=3))


def test_eval_never_uses_statistics_of_steps_training_did_not_reach() -> None:
    bn = RecurrentBatchNorm(3, t_max=100)
    bn(_steps_with_different_scales(t=5))
    bn.eval()
    probe = torch.randn(1, 2, 3)
    torch.testing.assert_close(bn(probe, start=50), bn(probe, start=4))


def test_statistics_ignore_finished_sequences() -> None:
    bn = RecurrentBatchNorm(3, t_max=10, momentum=1.0)
    x = _steps_with_different_scales(t=2, b=8)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 4:] = False
    garbage = x.clone()
    garbage[1, 4:] = 1e6  # padding must not matter
    y = bn(garbage, mask=mask)
    ref = RecurrentBatchNorm(3, t_max=10, momentum=1.0)(x[1:, :4], start=1)
    torch.testing.assert_close(y[1, :4], ref[0])
    torch.testing.assert_close(bn.running_mean[1], x[1, :4].mean(0))


@pytest.mark.parametrize("x", [torch.ones(3, 2, 4), torch.full((3, 7, 4), 2.5)])
def test_zero_variance_gives_no_nan(x: torch.Tensor) -> None:
    bn = RecurrentBatchNorm(4, t_max=5)
    assert torch.isfinite(bn(x)).all()
    assert torch.isfinite(bn.running_var).all()
    bn.eval()
    assert torch.isfinite(bn(x)).all()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="t_max"):
        RecurrentBatchNorm(3, t_max=0)
    with pytest.raises(ValueError, match=r"\(T, B, 3\)"):
        RecurrentBatchNorm(3, t_max=2)(torch.zeros(2, 4))


def test_momentum_none_keeps_a_cumulative_average() -> None:
    bn = RecurrentBatchNorm(3, t_max=4, momentum=None)
    a, b = torch.randn(2, 16, 3), torch.randn(2, 16, 3) + 5
    bn(a)
    bn(b)
    torch.testing.assert_close(bn.running_mean[:2], (a.mean(1) + b.mean(1)) / 2)
    torch.testing.assert_close(bn.running_var[:2], (a.var(1) + b.var(1)) / 2)
    assert bn.batches_tracked[:2].tolist() == [2, 2] and bn.batches_tracked[2:].sum() == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eps": -1e-5}, "eps must be a finite number > 0"),
        ({"eps": 0.0}, "eps must be a finite number > 0"),
        ({"momentum": -0.1}, r"momentum must be a finite number in \[0.0, 1.0\]"),
        ({"momentum": 1.5}, r"momentum must be a finite number in \[0.0, 1.0\]"),
        ({"t_max": 2.5}, "t_max must be an integer"),
        ({"gamma_init": float("nan")}, "gamma_init must be a finite number"),
    ],
)
def test_bad_settings_are_refused_where_they_once_gave_nan(kwargs: dict, match: str) -> None:
    """Negative eps made every output NaN; momentum > 1 drove running_var negative."""
    settings = {"t_max": 4} | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        RecurrentBatchNorm(3, **settings)


def test_a_negative_step_is_refused() -> None:
    """start < 0 once evaluated with the last step's statistics and trained nothing."""
    bn = RecurrentBatchNorm(3, t_max=4)
    with pytest.raises(ValueError, match="start must be an integer >= 0"):
        bn(torch.randn(2, 4, 3), start=-1)
    with pytest.raises(ValueError, match="start must be an integer >= 0"):
        bn.eval()(torch.randn(2, 4, 3), start=-2)


def test_a_step_with_one_running_sequence_uses_the_running_statistics() -> None:
    """With a mask, a step where one sequence runs is normalised as in evaluation, and its
    statistics are left alone (one value is no variance estimate)."""
    bn = RecurrentBatchNorm(3, t_max=4, momentum=1.0)
    bn(_steps_with_different_scales(t=2, b=8))
    before = bn.running_mean.clone(), bn.running_var.clone()
    x = torch.randn(2, 8, 3)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 1:] = False  # step 1: one sequence
    y = bn(x, mask=mask)
    expected = (x[1, 0] - before[0][1]) / torch.sqrt(before[1][1] + bn.eps) * bn.weight
    torch.testing.assert_close(y[1, 0], expected)
    assert torch.equal(bn.running_mean[1], before[0][1])
    x2 = x.clone()
    x2[1, 0] += 1.0  # the output still depends on the input
    assert not torch.allclose(bn(x2, mask=mask)[1, 0], y[1, 0])
