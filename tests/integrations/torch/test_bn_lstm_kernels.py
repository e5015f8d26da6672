"""The fused CPU kernels compute the same function as the torch operations they replace."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from paperports.integrations.torch import BNLSTM, fused_kernels
from paperports.integrations.torch.bn_lstm_kernels import kernels_available, uses_kernels

pytestmark = pytest.mark.skipif(
    not kernels_available(), reason="the fused kernels cannot be built here"
)


def _run(
    model: BNLSTM, x: torch.Tensor, lengths: list[int] | None, weights: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Output, every parameter's gradient and every buffer, after one training batch."""
    model.zero_grad()
    inputs = x if lengths is None else pack_padded_sequence(x, lengths, enforce_sorted=False)
    out, (h, c) = model(inputs)
    if lengths is not None:
        out = pad_packed_sequence(out, total_length=x.shape[0])[0]
    ((out * weights).sum() + (h * c).sum()).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return out.detach(), grads, {k: b.clone() for k, b in model.named_buffers()}


CASES = [  # bidirectional, layers, lengths (None: all full), random_t_max, bias
    (False, 1, None, 0.0, True),
    (True, 2, None, 0.0, False),
    (True, 2, [7, 5, 5, 2, 1], 0.0, True),  # the longest runs alone: running statistics
    (False, 1, [7, 7, 3, 3, 3], 0.0, True),
    (False, 2, None, 1.0, True),  # every batch normalised with stale statistics past tau
    (True, 1, [7, 6, 3, 3, 1], 1.0, True),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("bidirectional", "layers", "lengths", "random_t_max", "bias"), CASES)
def test_kernels_equal_the_torch_operations(
    dtype: torch.dtype,
    bidirectional: bool,
    layers: int,
    lengths: list[int] | None,
    random_t_max: float,
    bias: bool,
) -> None:
    """Training (values, all gradients, running statistics) and evaluation, with and
    without lengths and random_t_max. In float64 the kernels equal the torch operations to
    rounding. In float32 both are held to the float64 result, relative to each quantity's
    scale: steps where two sequences run normalise over two values and amplify rounding
    (in one of these cases the kernels' float32 gradients are off by 3.5e-4 of their scale,
    the torch operations' by 1.4e-5)."""
    torch.manual_seed(0)
    fused = BNLSTM(
        3, 20, num_layers=layers, bidirectional=bidirectional, bias=bias,
        random_t_max=random_t_max, t_max=7,
    ).double()  # fmt: skip
    with torch.no_grad():
        for p in fused.parameters():
            p.add_(0.3 * torch.randn_like(p))
    plain = copy.deepcopy(fused)
    x = torch.randn(7, 5, 3, dtype=torch.float64)
    weights = torch.randn(7, 5, 20 * (1 + bidirectional), dtype=torch.float64)
    torch.manual_seed(1)  # the same random_t_max draws for all
    with fused_kernels(False):
        truth = _run(copy.deepcopy(plain), x, lengths, weights)  # float64, torch operations
    fused, plain, x, weights = fused.to(dtype), plain.to(dtype), x.to(dtype), weights.to(dtype)
    assert uses_kernels(x)
    torch.manual_seed(1)
    got = _run(fused, x, lengths, weights)
    torch.manual_seed(1)
    with fused_kernels(False):
        assert not uses_kernels(x)
        want = _run(plain, x, lengths, weights)  # and the same running statistics
    if dtype == torch.float32:
        want = truth

    def close(a: torch.Tensor, b: torch.Tensor, name: str) -> None:
        if dtype == torch.float64:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10, msg=name)
        else:
            b = b.to(a.dtype)
            scale = float(b.abs().max()) if b.is_floating_point() else 1.0
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3 * scale, msg=name)

    close(got[0], want[0], "output")
    assert got[1].keys() == want[1].keys()
    for name in want[1]:
        close(got[1][name], want[1][name], name)
    for name in want[2]:
        close(got[2][name], want[2][name], name)
    fused.eval()
    plain.eval()
    with torch.no_grad():
        out, (h, c) = fused(x)
        with fused_kernels(False):
            ref, (h_ref, c_ref) = plain(x)
    for a, b, name in ((out, ref, "eval output"), (h, h_ref, "h_n"), (c, c_ref, "c_n")):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


def test_kernels_propagate_nan_and_saturate_like_torch() -> None:
    """A NaN input gives NaN where torch's operations give NaN; huge pre-activations
    saturate the gates to 0 and 1 instead of overflowing."""
    torch.manual_seed(2)
    lstm = BNLSTM(2, 4).eval()
    x = torch.randn(3, 2, 2)
    x[1, 0, 0] = float("nan")
    with torch.no_grad():
        out, _ = lstm(x)
        with fused_kernels(False):
            ref, _ = lstm(x)
    torch.testing.assert_close(out.isnan(), ref.isnan())
    assert out[1:, 0].isnan().all() and not out[:, 1].isnan().any()
    with torch.no_grad():
        big, _ = lstm(1e6 * torch.randn(3, 2, 2))
    assert big.isfinite().all() and big.abs().max() <= 1.0


def test_non_contiguous_inputs_and_expanded_gradients() -> None:
    """A transposed input and a gradient expanded from a sum (stride 0) reach the kernels
    as rows they can read."""
    torch.manual_seed(3)
    lstm = BNLSTM(4, 6, batch_first=True)
    ref = copy.deepcopy(lstm)
    x = torch.randn(5, 3, 4).transpose(0, 1)  # (batch 3, T 5, 4), not contiguous
    lstm(x)[0].sum().backward()
    with fused_kernels(False):
        ref(x)[0].sum().backward()
    for p, q in zip(lstm.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)


def test_other_dtypes_run_the_torch_operations() -> None:
    """bfloat16 is not a kernel type: those BN-LSTMs run the torch operations."""
    assert not uses_kernels(torch.zeros(2, dtype=torch.bfloat16))
    assert uses_kernels(torch.zeros(2)) and uses_kernels(torch.zeros(2, dtype=torch.float64))


def test_bnlstm_runs_the_kernels_in_training_and_evaluation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The equality tests above would pass if the kernels were never called: count them."""
    from paperports.integrations.torch import bn_lstm, bn_lstm_training
    from paperports.integrations.torch.bn_lstm_kernels import ops

    called: list[str] = []

    class Spy:
        def __getattr__(self, name: str) -> object:
            called.append(name)
            return getattr(ops(), name)

    monkeypatch.setattr(bn_lstm, "ops", Spy)
    monkeypatch.setattr(bn_lstm_training, "ops", Spy)
    lstm = BNLSTM(3, 4)
    lstm(torch.randn(5, 2, 3))[0].sum().backward()
    lstm.eval()
    with torch.no_grad():
        lstm(torch.randn(5, 2, 3))
    assert called == ["train_forward_sequence", "train_backward_sequence", "eval_sequence"]
    called.clear()
    with fused_kernels(False):
        lstm(torch.randn(5, 2, 3))
    assert called == []


def test_bad_switches_are_refused() -> None:
    switch = fused_kernels("no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="enabled must be True or False, got 'no'"):
        switch.__enter__()
    assert uses_kernels(torch.zeros(2))  # the refused switch left the kernels on


def test_a_bad_kernels_setting_in_the_environment_is_refused() -> None:
    """PAPERPORTS_BNLSTM_KERNELS is read once, at the first BN-LSTM: in a fresh process."""
    code = (
        "import torch; from paperports.integrations.torch import BNLSTM; "
        "BNLSTM(2, 3)(torch.randn(4, 2, 2))"
    )
    env = os.environ | {"PAPERPORTS_BNLSTM_KERNELS": "yes"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode != 0
    assert "PAPERPORTS_BNLSTM_KERNELS must be 0 (off) or 1 (on), got 'yes'" in run.stderr
