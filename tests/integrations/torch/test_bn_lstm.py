"""BNLSTM is a drop-in for nn.LSTM: same calls, same shapes; and it learns."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from paperports.integrations.torch import BNLSTM, BNLSTMCell


@pytest.mark.parametrize(
    ("batch_first", "num_layers", "bidirectional"),
    list(itertools.product([False, True], [1, 3], [False, True])),
)
def test_shapes_match_nn_lstm(batch_first: bool, num_layers: int, bidirectional: bool) -> None:
    kw = {"num_layers": num_layers, "batch_first": batch_first, "bidirectional": bidirectional}
    ours, ref = BNLSTM(5, 7, **kw), nn.LSTM(5, 7, **kw)
    x = torch.randn(4, 6, 5)  # (T, B, F) or (B, T, F)
    (o1, (h1, c1)), (o2, (h2, c2)) = ours(x), ref(x)
    assert o1.shape == o2.shape and h1.shape == h2.shape and c1.shape == c2.shape
    # with an explicit initial state, and unbatched input
    (o1, (h1, _)), (o2, (h2, _)) = ours(x, (h2, c2)), ref(x, (h2, c2))
    assert o1.shape == o2.shape and h1.shape == h2.shape
    u = torch.randn(6, 5)  # one sequence: no batch statistics, so in evaluation
    (o1, (h1, c1)), (o2, (h2, c2)) = ours.eval()(u), ref(u)
    assert o1.shape == o2.shape and h1.shape == h2.shape and c1.shape == c2.shape


def test_last_output_is_the_final_hidden_state() -> None:
    lstm = BNLSTM(3, 4, num_layers=2)
    out, (h, _) = lstm(torch.randn(5, 2, 3))
    torch.testing.assert_close(out[-1], h[-1])


def test_gamma_starts_at_gamma_init() -> None:
    lstm = BNLSTM(3, 4, num_layers=2, bidirectional=True)
    gammas = [
        p
        for n, p in lstm.named_parameters()
        if n.startswith(("bn_ih_", "bn_hh_", "bn_c_")) and n.endswith(".weight")
    ]
    assert len(gammas) == 12
    assert all(torch.all(g == 0.1) for g in gammas)
    assert torch.all(BNLSTM(3, 4, gamma_init=1.0).bn_c_l0.weight == 1.0)


def test_cell_equations_against_a_direct_computation() -> None:
    torch.manual_seed(0)
    cell = BNLSTMCell(3, 2, t_max=5)
    x, h, c = torch.randn(6, 3), torch.randn(6, 2), torch.randn(6, 2)

    def bn(v: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor | float = 0.0) -> torch.Tensor:
        return (v - v.mean(0)) / torch.sqrt(v.var(0, unbiased=False) + 1e-5) * gamma + beta

    gates = (
        bn(h @ cell.weight_hh.T, cell.bn_hh.weight)
        + bn(x @ cell.weight_ih.T, cell.bn_ih.weight)
        + cell.bias_ih
        + cell.bias_hh
    )
    i, f, g, o = gates.chunk(4, 1)
    c_ref = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h_ref = torch.sigmoid(o) * torch.tanh(bn(c_ref, cell.bn_c.weight, cell.bn_c.bias))
    h_new, c_new = cell(x, (h, c))
    torch.testing.assert_close(c_new, c_ref)
    torch.testing.assert_close(h_new, h_ref)


def test_packed_and_padded_with_lengths_agree_and_padding_is_ignored() -> None:
    torch.manual_seed(0)
    lstm = BNLSTM(3, 4, num_layers=2, bidirectional=True)
    x = torch.randn(6, 4, 3)
    lengths = torch.tensor([6, 2, 4, 3])
    x_noisy = x.clone()
    for b, n in enumerate(lengths.tolist()):
        x_noisy[n:, b] = 1e3  # padding values must not leak anywhere
    twin = copy.deepcopy(lstm)  # training updates the statistics: both calls start alike
    out_pad, (h_pad, c_pad) = lstm(x_noisy, lengths=lengths)
    packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
    out_packed, (h_pk, c_pk) = twin(packed)
    out_unpacked, _ = pad_packed_sequence(out_packed)
    torch.testing.assert_close(out_unpacked, out_pad)
    torch.testing.assert_close(h_pk, h_pad)
    torch.testing.assert_close(c_pk, c_pad)
    assert torch.all(out_pad[2:, 1] == 0)  # past the end of sequence 1


def test_eval_with_lengths_equals_each_sequence_alone() -> None:
    torch.manual_seed(0)
    lstm = BNLSTM(3, 4, bidirectional=True)
    lstm(torch.randn(8, 16, 3))  # give the statistics something to hold
    lstm.eval()
    x = torch.randn(5, 3, 3)
    lengths = torch.tensor([5, 2, 3])
    out, (h, _) = lstm(x, lengths=lengths)
    for b, n in enumerate(lengths.tolist()):
        alone, (h_alone, _) = lstm(x[:n, b : b + 1])
        torch.testing.assert_close(out[:n, b], alone[:, 0])
        torch.testing.assert_close(h[:, b], h_alone[:, 0])


def test_eval_runs_past_t_max_with_the_last_statistics() -> None:
    """Steps at or past t_max normalise with step t_max - 1's statistics: the same as a
    model whose later steps hold copies of them."""
    torch.manual_seed(0)
    lstm = BNLSTM(2, 3, t_max=4)
    lstm(torch.randn(4, 8, 2) * 3 + 1)
    lstm.eval()
    x = torch.randn(40, 2, 2)
    out, _ = lstm(x)
    copied = BNLSTM(2, 3, t_max=40).eval()
    state = lstm.state_dict()
    rows = torch.arange(40).clamp(max=3)  # step t uses min(t, 3)'s statistics
    for key, value in list(state.items()):
        if key.endswith(("running_mean", "running_var", "batches_tracked")):
            state[key] = value[rows]
        elif key.endswith("steps_tracked"):
            state[key] = torch.tensor(40)
    copied.load_state_dict(state)  # 40 steps of statistics: the buffers take that size
    assert copied.bn_c_l0.allocated_steps == 40
    expected, _ = copied(x)
    torch.testing.assert_close(out, expected)
    assert torch.isfinite(out).all()


def test_zero_variance_batches_give_no_nan() -> None:
    lstm = BNLSTM(3, 4)
    out, (h, c) = lstm(torch.ones(5, 6, 3))
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(h).all() and torch.isfinite(c).all()
    assert all(torch.isfinite(p.grad).all() for p in lstm.parameters() if p.grad is not None)


def test_bad_input_is_rejected_with_a_clear_error() -> None:
    lstm = BNLSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match="input_size=3"):
        lstm(torch.randn(5, 2, 7))
    with pytest.raises(ValueError, match=r"h_0 must have shape \(2, 2, 4\)"):
        lstm(torch.randn(5, 2, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)))
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 5\]"):
        lstm(torch.randn(5, 2, 3), lengths=torch.tensor([6, 2]))
    with pytest.raises(ValueError, match=r"\(T, B, input_size\)"):
        lstm(torch.randn(2, 5, 2, 3))
    with pytest.raises(ValueError, match="t_max"):
        BNLSTM(3, 4, t_max=0)


def test_learns_sequential_digits_far_above_chance() -> None:
    from paperports.adapters.digits import load_digits_tensors

    torch.manual_seed(0)
    x, y = load_digits_tensors(8, "train")
    seq = x[:, 0].transpose(0, 1)  # rows as time steps: (T=8, N, 8)
    lstm, head = BNLSTM(8, 32), nn.Linear(32, 10)
    opt = torch.optim.Adam([*lstm.parameters(), *head.parameters()], lr=1e-2)
    for _ in range(3):
        for i in range(0, seq.shape[1], 64):
            _, (h, _) = lstm(seq[:, i : i + 64])
            loss = nn.functional.cross_entropy(head(h[-1]), y[i : i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    xt, yt = load_digits_tensors(8, "test")
    lstm.eval()
    with torch.no_grad():
        _, (h, _) = lstm(xt[:, 0].transpose(0, 1))
        acc = (head(h[-1]).argmax(1) == yt).float().mean()
    assert acc > 0.7  # chance is 0.1


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_fast_sequence_equals_the_step_by_step_cell(training: bool, masked: bool) -> None:
    torch.manual_seed(0)
    fast = BNLSTMCell(3, 5, t_max=4)
    fast(torch.randn(8, 3))  # some statistics at step 0
    fast.bn_hh.running_mean[1:3].normal_()
    fast.bn_c.running_var[1:3].uniform_(0.5, 2.0)
    fast.bn_hh.steps_tracked.fill_(3)
    fast.bn_c.steps_tracked.fill_(3)
    slow = BNLSTMCell(3, 5, t_max=4)
    slow.load_state_dict(fast.state_dict())
    fast.train(training)
    slow.train(training)
    x = torch.randn(6, 7, 3)  # 6 steps: past t_max = 4 as well
    lengths = torch.tensor([6, 6, 6, 5, 3, 2, 1])  # sorted, as sequence() requires
    mask = (torch.arange(6)[:, None] < lengths[None, :]) if masked else None
    batch_sizes = None if mask is None else mask.sum(1).tolist()
    h0, c0 = torch.randn(7, 5), torch.randn(7, 5)
    out, h, c = fast.sequence(x, h0, c0, batch_sizes)
    hs, cs = h0, c0
    for t in range(6):
        m = None if mask is None else mask[t]
        hs, cs = slow(x[t], (hs, cs), t=t, mask=m)
        expected = hs if m is None else hs * m[:, None]
        torch.testing.assert_close(out[t], expected)
    torch.testing.assert_close(h, hs)
    torch.testing.assert_close(c, cs)
    for (name, a), b in zip(fast.state_dict().items(), slow.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_fractional_lengths_are_refused() -> None:
    """lengths = 2.5 once acted as 3."""
    lstm = BNLSTM(3, 4)
    x = torch.randn(5, 2, 3)
    with pytest.raises(ValueError, match="lengths must hold whole numbers"):
        lstm(x, lengths=torch.tensor([2.5, 5.0]))
    out, _ = lstm(x, lengths=torch.tensor([2.0, 5.0]))  # whole floats are whole numbers
    assert torch.all(out[2:, 0] == 0)


def test_a_negative_step_of_the_cell_is_refused() -> None:
    cell = BNLSTMCell(3, 4)
    with pytest.raises(ValueError, match="t must be an integer >= 0"):
        cell(torch.randn(2, 3), t=-1)


def test_empty_batches_give_empty_outputs_as_nn_lstm() -> None:
    for batch_first in (False, True):
        ours, ref = BNLSTM(3, 4, batch_first=batch_first), nn.LSTM(3, 4, batch_first=batch_first)
        x = torch.randn(0, 5, 3) if batch_first else torch.randn(5, 0, 3)
        (o1, (h1, c1)), (o2, (h2, c2)) = ours(x), ref(x)
        assert o1.shape == o2.shape and h1.shape == h2.shape and c1.shape == c2.shape
    with pytest.raises(ValueError, match="no time steps"):
        BNLSTM(3, 4)(torch.randn(0, 2, 3))


def test_forward_with_layers_gives_each_layers_output() -> None:
    """What transformers' ``output_hidden_states`` needs: the top layer's is the output,
    the first layer's that of a one-layer BN-LSTM with the same weights, 0 past each end."""
    torch.manual_seed(0)
    lstm = BNLSTM(3, 4, num_layers=3, bidirectional=True, batch_first=True).eval()
    x, lengths = torch.randn(5, 6, 3), torch.tensor([6, 2, 4, 6, 1])
    out, (h, c), layers = lstm.forward_with_layers(x, lengths=lengths)
    expected, (h_e, c_e) = lstm(x, lengths=lengths)
    assert len(layers) == 3 and all(layer.shape == (5, 6, 8) for layer in layers)
    assert torch.equal(out, expected) and torch.equal(layers[-1], expected)
    assert torch.equal(h, h_e) and torch.equal(c, c_e)
    first = BNLSTM(3, 4, bidirectional=True, batch_first=True).eval()
    first.load_state_dict({k: v for k, v in lstm.state_dict().items() if "_l0" in k})
    torch.testing.assert_close(layers[0], first(x, lengths=lengths)[0])
    past_end = torch.arange(6)[None, :] >= lengths[:, None]
    assert all(bool((layer[past_end] == 0).all()) for layer in layers)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_construction_keeps_orthogonal_recurrent_weights(
    dtype: torch.dtype,
) -> None:
    """torch's orthogonal init has no float16 QR on CPU: it failed at construction."""
    lstm = BNLSTM(3, 8, dtype=dtype)
    assert lstm.weight_hh_l0.dtype == dtype
    gate = lstm.weight_hh_l0[:8].float()
    torch.testing.assert_close(gate @ gate.T, torch.eye(8), atol=2e-2, rtol=0)
