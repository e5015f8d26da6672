"""The hand-written training backward equals autograd through the step-by-step cell."""

from __future__ import annotations

from typing import TypeVar

import pytest
import torch
from torch import nn

from paperports.integrations.torch import BNLSTM, BNLSTMCell
from paperports.integrations.torch.bn_lstm_training import BNLSTMSequence, matmul_by

M = TypeVar("M", bound=nn.Module)


def _perturbed(cell: M) -> M:
    """Parameters away from their initial values, so every gradient term matters."""
    with torch.no_grad():
        for p in cell.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return cell


@pytest.mark.parametrize("sizes", [None, [6, 6, 4, 4, 2, 1, 0]])
def test_gradcheck_in_double_precision(sizes: list[int] | None) -> None:
    torch.manual_seed(0)
    steps, batch, hidden = 7, 6, 3
    x = torch.randn(steps, batch, 2, dtype=torch.float64, requires_grad=True)
    params = [
        torch.randn(4 * hidden, 2),  # weight_ih
        torch.randn(batch, hidden),  # h0
        torch.randn(batch, hidden),  # c0
        torch.randn(4 * hidden, hidden),  # weight_hh
        torch.rand(4 * hidden) + 0.1,  # gamma_x
        torch.randn(4 * hidden),  # bias
        torch.rand(4 * hidden) + 0.1,  # gamma_h
        torch.rand(hidden) + 0.1,  # gamma_c
        torch.randn(hidden),  # beta_c
    ]
    params = [p.double().requires_grad_() for p in params]

    # the step where one row runs is normalised with given statistics: mean, 1 / std
    single = torch.stack([torch.randn(3, steps, 4 * hidden), torch.rand(3, steps, 4 * hidden)])
    single = single.transpose(0, 1).double() + torch.tensor([0.0, 0.5]).double()[:, None, None]

    def run(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, h, c, _ = BNLSTMSequence.apply(*args, sizes, (1e-5, 1e-5, 1e-5), single)
        return out, h, c

    assert torch.autograd.gradcheck(run, (x, *params))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gradients_and_statistics_equal_the_step_by_step_cell(
    bias: bool, masked: bool, dtype: torch.dtype
) -> None:
    """In float64 (``torch.mm``) to rounding; in float32 (oneDNN's matmuls where torch has
    them) to float32's rounding relative to each gradient's scale: steps where two
    sequences run normalise over two values, which amplifies rounding. With the mask, the
    last step has one sequence running and uses the running statistics."""
    torch.manual_seed(1)
    fast = _perturbed(BNLSTMCell(3, 5, bias, t_max=5).to(dtype))
    slow = BNLSTMCell(3, 5, bias, t_max=5).to(dtype)
    slow.load_state_dict(fast.state_dict())
    steps = 7
    lengths = torch.tensor([7, 6, 5, 3, 3, 1, 1])
    mask = torch.arange(steps)[:, None] < lengths[None, :] if masked else None
    sizes = None if mask is None else mask.sum(1).tolist()
    x = torch.randn(steps, 7, 3).to(dtype)
    h0, c0 = torch.randn(7, 5).to(dtype), torch.randn(7, 5).to(dtype)
    weights = torch.randn(steps, 7, 5).to(dtype)

    def close(a: torch.Tensor, b: torch.Tensor, name: str) -> None:
        if dtype == torch.float64:
            torch.testing.assert_close(a, b, msg=name)
        else:
            scale = float(b.abs().max())
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * scale, msg=name)

    def loss(out: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (out * weights).sum() + (h * c).sum()

    def run_slow(xx: torch.Tensor, hs: torch.Tensor, cs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = []
        for t in range(steps):
            m = None if mask is None else mask[t]
            hs, cs = slow(xx[t], (hs, cs), t=t, mask=m)
            outs.append(hs if m is None else hs * m[:, None])
        return torch.stack(outs), hs, cs

    with torch.no_grad():  # a first batch, so that the running statistics are not 0 and 1
        fast.sequence(x + 1, h0, c0, sizes)
        run_slow(x + 1, h0, c0)
    inputs = [t.clone().requires_grad_() for t in (x, h0, c0)]
    loss(*fast.sequence(*inputs, sizes)).backward()
    ref_inputs = [t.clone().requires_grad_() for t in (x, h0, c0)]
    loss(*run_slow(*ref_inputs)).backward()

    for name, a, b in zip(["x", "h0", "c0"], inputs, ref_inputs, strict=True):
        close(a.grad, b.grad, name)
    for (name, p), q in zip(fast.named_parameters(), slow.parameters(), strict=True):
        close(p.grad, q.grad, name)
    for (name, a), b in zip(fast.state_dict().items(), slow.state_dict().values(), strict=True):
        close(a, b, name)


@pytest.mark.parametrize("lengths", [[2, 5, 1, 4, 5, 3], [2, 5, 1, 4, 3, 3]])
def test_unsorted_lengths_in_a_stacked_bidirectional_layer_match_the_cells(
    lengths: list[int],
) -> None:
    """BNLSTM sorts the batch by length for the fast path and puts it back; the result is
    the cells' step-by-step computation on the caller's order (also where the longest
    sequence is unique, so that its last step runs alone on the running statistics)."""
    torch.manual_seed(2)
    lstm = BNLSTM(3, 4, num_layers=2, bidirectional=True, t_max=5).double()
    _perturbed(lstm)
    ref = BNLSTM(3, 4, num_layers=2, bidirectional=True, t_max=5).double()
    ref.load_state_dict(lstm.state_dict())
    x = torch.randn(5, 6, 3, dtype=torch.float64)
    with torch.no_grad():  # running statistics that are not 0 and 1
        lstm(x + 1)
        ref(x + 1)
    lengths = torch.tensor(lengths)
    mask = torch.arange(5)[:, None] < lengths[None, :]
    rev = torch.where(
        torch.arange(5)[:, None] < lengths, lengths - 1 - torch.arange(5)[:, None], 0
    )  # position t of the reversed sequence holds element rev[t]

    x_fast = x.clone().requires_grad_()
    out, (h, c) = lstm(x_fast, lengths=lengths)
    (out.pow(2).sum() + h.sum() + c.sum()).backward()

    x_ref = x.clone().requires_grad_()
    layer_in, h_ref, c_ref = x_ref, [], []
    for layer in range(2):
        outs = []
        for direction in range(2):
            cell = ref.cell(layer, direction)
            seq = (
                layer_in
                if direction == 0
                else layer_in.gather(0, rev[..., None].expand_as(layer_in))
            )
            hs = cs = torch.zeros(6, 4, dtype=torch.float64)
            steps = []
            for t in range(5):
                hs, cs = cell(seq[t], (hs, cs), t=t, mask=mask[t])
                steps.append(hs * mask[t, :, None])
            o = torch.stack(steps)
            if direction == 1:
                o = o.gather(0, rev[..., None].expand_as(o)) * mask[..., None]
            outs.append(o)
            h_ref.append(hs)
            c_ref.append(cs)
        layer_in = torch.cat(outs, -1)
    (layer_in.pow(2).sum() + torch.stack(h_ref).sum() + torch.stack(c_ref).sum()).backward()

    torch.testing.assert_close(out, layer_in)
    torch.testing.assert_close(h, torch.stack(h_ref))
    torch.testing.assert_close(x_fast.grad, x_ref.grad)
    for (name, p), q in zip(lstm.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    for (name, a), b in zip(lstm.state_dict().items(), ref.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_a_batch_of_one_is_refused_in_training_as_nn_batchnorm_does() -> None:
    """A statistic over one sequence makes the output independent of the input."""
    lstm = BNLSTM(2, 3)
    for x in (torch.randn(4, 1, 2), torch.randn(4, 2)):  # batched and unbatched
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            lstm(x)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        torch.nn.BatchNorm1d(3)(torch.randn(1, 3))  # what the ecosystem does
    lstm(torch.randn(4, 2, 2))
    lstm.eval()
    out, _ = lstm(torch.randn(4, 1, 2))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("training", [True, False])
def test_onednn_and_torch_mm_paths_agree(training: bool) -> None:
    """With oneDNN off, the same layer runs on torch.mm: same outputs and gradients."""
    torch.manual_seed(3)
    lstm = BNLSTM(4, 8, num_layers=2).train(training)
    x = torch.randn(9, 5, 4)
    lstm(x)  # running statistics for the evaluation case
    results = []
    for enabled in (True, False):
        lstm.zero_grad()
        torch.backends.mkldnn.enabled = enabled
        try:
            out, (h, _) = lstm(x, lengths=torch.tensor([9, 3, 7, 9, 4]))
            (out.square().sum() + h.sum()).backward()
        finally:
            torch.backends.mkldnn.enabled = True
        results.append([out, h, *(p.grad for p in lstm.parameters())])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("rows", [1, 13, 32])
def test_matmul_by_equals_a_plain_product(rows: int) -> None:
    weight = torch.randn(24, 10)
    x = torch.randn(rows, 10)
    torch.testing.assert_close(matmul_by(weight, 32)(x), x @ weight.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sizes", [[3, 4, 2], [3, 2], [5, 5, 5], [3, 2, -1]])
def test_bad_batch_sizes_are_rejected(sizes: list[int]) -> None:
    cell = BNLSTMCell(2, 3)
    h = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="non-increasing"):
        cell.sequence(torch.randn(3, 4, 2), h, h, sizes)
