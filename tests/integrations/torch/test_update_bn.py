from __future__ import annotations

import pytest
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
    first = lstm.bn_c_l0.running_mean.clone()
    update_bn([{"input": x}], lstm)
    torch.testing.assert_close(lstm.bn_c_l0.running_mean, first)
    calls = []
    update_bn([x], lstm, forward=lambda m, b: calls.append(m(b)))
    assert len(calls) == 1


def _statistics(lstm: BNLSTM) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in lstm.named_buffers()}


def _trained() -> BNLSTM:
    torch.manual_seed(0)
    lstm = BNLSTM(3, 8)
    for shift in range(3):
        lstm(torch.randn(6, 16, 3) + shift)
    return lstm


def _assert_unchanged(lstm: BNLSTM, before: dict[str, torch.Tensor]) -> None:
    after = _statistics(lstm)
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_an_empty_loader_is_refused_and_the_trained_statistics_are_kept() -> None:
    lstm = _trained()
    before = _statistics(lstm)
    with pytest.raises(ValueError, match="no batch"):
        update_bn([], lstm)
    _assert_unchanged(lstm, before)
    assert all(m.momentum == 0.1 for m in lstm.modules() if isinstance(m, RecurrentBatchNorm))


def test_an_error_in_the_middle_restores_the_trained_statistics() -> None:
    lstm = _trained()
    before = _statistics(lstm)

    def batches():  # type: ignore[no-untyped-def]
        yield torch.randn(6, 16, 3)
        raise RuntimeError("the loader broke")

    with pytest.raises(RuntimeError, match="the loader broke") as info:
        update_bn(batches(), lstm)
    assert any("restored" in note for note in getattr(info.value, "__notes__", ["restored"]))
    _assert_unchanged(lstm, before)


def test_batches_of_one_sequence_are_refused_saying_what_is_needed() -> None:
    lstm = _trained()
    before = _statistics(lstm)
    with pytest.raises(ValueError, match="at least two sequences"):
        update_bn([torch.randn(6, 1, 3)] * 3, lstm)
    _assert_unchanged(lstm, before)


def test_a_nan_batch_in_training_keeps_the_statistics_finite_and_update_bn_repairs() -> None:
    """nn.BatchNorm propagates NaN into its running statistics; ours keep them, warn, and
    the NaN shows in the output (and so in the loss)."""
    lstm = _trained()
    before = _statistics(lstm)
    bad = torch.randn(6, 16, 3)
    bad[2, 5, 1] = float("nan")
    with pytest.warns(RuntimeWarning, match="not finite"):
        out, _ = lstm(bad)
    assert torch.isnan(out).any()
    after = _statistics(lstm)
    assert all(torch.isfinite(v).all() for v in after.values())
    # the input's norm skips the NaN step only; the recurrent norm, fed the NaN state,
    # skips every step after it; clean steps update as usual
    changed = {
        name: [not torch.equal(after[name][t], before[name][t]) for t in range(6)]
        for name in ("bn_ih_l0.running_mean", "bn_hh_l0.running_mean")
    }
    assert changed["bn_ih_l0.running_mean"] == [True, True, False, True, True, True]
    # (at step 0 the state is zero, so its mean stays 0)
    assert changed["bn_hh_l0.running_mean"] == [False, True, True, False, False, False]
    lstm.eval()
    assert torch.isfinite(lstm(torch.randn(6, 4, 3))[0]).all()
    # in update_bn the bad batch's non-finite steps do not count: the statistics stay finite
    clean = torch.randn(6, 64, 3)
    with pytest.warns(RuntimeWarning):
        update_bn([clean, bad], lstm)
    assert all(torch.isfinite(v).all() for v in _statistics(lstm).values())
    # and over clean data update_bn gives what a model that never saw the NaN gets
    update_bn([clean], lstm)
    reference = _trained()
    update_bn([clean], reference)
    for (name, a), b in zip(lstm.named_buffers(), reference.buffers(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_torchs_own_update_bn_recomputes_the_recurrent_statistics() -> None:
    """``torch.optim.swa_utils.update_bn`` looks for ``nn.BatchNorm`` layers only, and once
    left these statistics as they were; now it gives what ours gives."""
    import copy

    from torch.optim import swa_utils

    torch.manual_seed(0)
    lstm = BNLSTM(3, 4, num_layers=2, t_max=6)
    with torch.no_grad():
        lstm(5 * torch.randn(6, 8, 3) + 2)  # statistics far from the loader's
    loader = [(torch.randn(6, 8, 3) + k, torch.zeros(8)) for k in range(3)]
    ours, theirs = copy.deepcopy(lstm), copy.deepcopy(lstm)
    update_bn(loader, ours)
    swa_utils.update_bn(loader, theirs)
    changed = False
    for (name, a), b, before in zip(
        ours.state_dict().items(),
        theirs.state_dict().values(),
        lstm.state_dict().values(),
        strict=True,
    ):
        torch.testing.assert_close(b, a, msg=name)
        changed |= not torch.equal(a, before)
    assert changed
    assert all(m.momentum == 0.1 for m in theirs.modules() if isinstance(m, RecurrentBatchNorm))
    # the handle torch finds holds no state and is not a layer
    handle = theirs.bn_c_l0._swa_update_bn
    assert not list(handle.parameters()) and not list(handle.buffers())
    with pytest.raises(RuntimeError, match=r"only serves torch\.optim\.swa_utils\.update_bn"):
        handle(torch.randn(2, 1))
    assert "_swa_update_bn" not in repr(theirs)


def test_torchs_sync_batchnorm_conversion_leaves_the_handle_and_the_norms() -> None:
    """``nn.SyncBatchNorm.convert_sync_batchnorm`` takes the handle for an ``nn.BatchNorm``
    layer; it stays, so torch's ``update_bn`` keeps working, and our norms stay ours."""
    from torch import nn
    from torch.optim import swa_utils

    lstm = BNLSTM(3, 4, t_max=6)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(lstm)
    assert converted is lstm and type(lstm.bn_c_l0) is RecurrentBatchNorm
    assert lstm.bn_c_l0._swa_update_bn._owner is lstm.bn_c_l0
    before = lstm.bn_c_l0.running_mean.clone()
    swa_utils.update_bn([torch.randn(6, 8, 3) + 3], lstm)
    assert not torch.equal(lstm.bn_c_l0.running_mean, before)
