from __future__ import annotations

import torch

from paperports.integrations.torch import BNLSTM, RecurrentBatchNorm, update_bn


def test_update_bn_makes_evaluation_match_training_normalisation() -> None:
    torch.manual_seed(0)
    lstm = BNLSTM(3, 8, num_layers=2)
    for shift in range(5):  # statistics from drifting data, as during training
        lstm(torch.randn(6, 32, 3) + shift)
    data = torch.randn(6, 512, 3)
    lstm.eval()
    stale, _ = lstm(data)
    lstm.train()
    with torch.no_grad():
        reference, _ = lstm(data)  # batch statistics of `data` at every step
    params = {k: v.clone() for k, v in lstm.named_parameters()}
    lstm.eval()
    update_bn([data], lstm)
    assert not lstm.training
    fresh, _ = lstm(data)
    # population statistics keep the unbiased variance: a 512/511 difference at most
    torch.testing.assert_close(fresh, reference, rtol=1e-2, atol=1e-3)
    assert (stale - reference).abs().max() > 10 * (fresh - reference).abs().max()
    assert all(torch.equal(v, params[k]) for k, v in lstm.named_parameters())
    assert all(m.momentum == 0.1 for m in lstm.modules() if isinstance(m, RecurrentBatchNorm))


def test_update_bn_accepts_tuples_dicts_and_a_custom_forward() -> None:
    lstm = BNLSTM(2, 4)
    x = torch.randn(5, 16, 2)
    update_bn([(x, torch.zeros(16))], lstm)
    first = lstm.cells[0].bn_c.running_mean.clone()
    update_bn([{"input": x}], lstm)
    torch.testing.assert_close(lstm.cells[0].bn_c.running_mean, first)
    calls = []
    update_bn([x], lstm, forward=lambda m, b: calls.append(m(b)))
    assert len(calls) == 1
