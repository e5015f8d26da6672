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
    assert torch.equal(bn.running_mean[5:], torch.zeros(5, 3))
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


@pytest.mark.parametrize("x", [torch.ones(3, 1, 4), torch.full((3, 7, 4), 2.5)])
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
