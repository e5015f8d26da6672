"""BNLSTM in the places of nn.LSTM: its parameter names and layout, its constructor, its
weights (``from_lstm``), ``all_weights`` and ``flatten_parameters``."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from torch import nn

from paperports.integrations.torch import BNLSTM, BNLSTMCell

NORMS = ("bn_ih_", "bn_hh_", "bn_c_")


@pytest.mark.parametrize(
    ("num_layers", "bidirectional", "bias"),
    list(itertools.product([1, 3], [False, True], [False, True])),
)
def test_the_parameters_have_nn_lstm_names_shapes_and_order(
    num_layers: int, bidirectional: bool, bias: bool
) -> None:
    kw = {"num_layers": num_layers, "bidirectional": bidirectional, "bias": bias}
    ours, ref = BNLSTM(5, 7, **kw), nn.LSTM(5, 7, **kw)
    theirs = [(n, p.shape) for n, p in ref.named_parameters()]
    lstm_part = [(n, p.shape) for n, p in ours.named_parameters() if not n.startswith(NORMS)]
    assert lstm_part == theirs  # the same names, shapes and order
    # the rest is the batch norms: three per layer and direction, named alike
    norms = {n.split(".")[0] for n, _ in ours.named_parameters() if n.startswith(NORMS)}
    assert len(norms) == 3 * num_layers * (2 if bidirectional else 1)
    assert [[p.shape for p in ws] for ws in ours.all_weights] == [
        [p.shape for p in ws] for ws in ref.all_weights
    ]
    assert all(
        a is getattr(ours, name)
        for ws, names in zip(ours.all_weights, ref._all_weights, strict=True)
        for a, name in zip(ws, names, strict=True)
    )


@pytest.mark.parametrize(("num_layers", "bidirectional"), [(1, False), (2, True)])
def test_from_lstm_moves_every_weight_exactly(num_layers: int, bidirectional: bool) -> None:
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 6, num_layers=num_layers, bidirectional=bidirectional, batch_first=True)
    lstm = lstm.double()
    ours = BNLSTM.from_lstm(lstm, t_max=12, gamma_init=0.2)
    for name, weight in lstm.named_parameters():
        assert torch.equal(getattr(ours, name), weight), name
        assert getattr(ours, name) is not weight  # a copy: training one leaves the other
    assert ours.batch_first and ours.bidirectional == bidirectional
    assert ours.num_layers == num_layers and ours.t_max == 12
    assert ours.weight_ih_l0.dtype == torch.float64
    # the batch norms start at the paper's initialisation
    for name, p in ours.named_parameters():
        if name.startswith(NORMS):
            expected = 0.2 if name.endswith("weight") else 0.0
            assert torch.all(p == expected), name
    out, _ = ours(torch.randn(3, 5, 4, dtype=torch.float64))
    assert out.shape == (3, 5, 6 * (2 if bidirectional else 1))


def test_an_lstm_state_dict_loads_and_other_sizes_name_the_parameter() -> None:
    lstm = nn.LSTM(3, 4, num_layers=2)
    ours = BNLSTM(3, 4, num_layers=2)
    result = ours.load_state_dict(lstm.state_dict(), strict=False)
    assert not result.unexpected_keys
    assert all(k.startswith(NORMS) for k in result.missing_keys)
    assert torch.equal(ours.weight_hh_l1, lstm.weight_hh_l1)
    with pytest.raises(RuntimeError, match="size mismatch for weight_ih_l0"):
        BNLSTM(5, 4, num_layers=2).load_state_dict(lstm.state_dict(), strict=False)
    with pytest.raises(TypeError, match=r"needs an nn\.LSTM, got GRU"):
        BNLSTM.from_lstm(nn.GRU(3, 4))  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="proj_size=2"):
        BNLSTM.from_lstm(nn.LSTM(3, 4, proj_size=2))


def test_an_lstm_cells_state_dict_loads_into_the_cell() -> None:
    ref = nn.LSTMCell(3, 4)
    cell = BNLSTMCell(3, 4)
    result = cell.load_state_dict(ref.state_dict(), strict=False)
    assert not result.unexpected_keys and all(k.startswith("bn_") for k in result.missing_keys)
    for name, weight in ref.named_parameters():
        assert torch.equal(getattr(cell, name), weight)
    assert cell.gate_bias is not None
    torch.testing.assert_close(cell.gate_bias, ref.bias_ih + ref.bias_hh)


def test_the_constructor_takes_nn_lstms_arguments_in_its_order() -> None:
    ours = BNLSTM(3, 4, 2, False, True, 0.5, True, 0, None, torch.float64)
    assert (ours.num_layers, ours.bias, ours.batch_first) == (2, False, True)
    assert (ours.dropout, ours.bidirectional, ours.proj_size) == (0.5, True, 0)
    assert {t.dtype for t in itertools.chain(ours.parameters())} == {torch.float64}
    assert {b.dtype for n, b in ours.named_buffers() if "running" in n} == {torch.float64}
    on_meta = BNLSTM(3, 4, device="meta")
    assert all(t.is_meta for t in itertools.chain(on_meta.parameters(), on_meta.buffers()))
    out, _ = on_meta(torch.empty(5, 2, 3, device="meta"))
    assert out.shape == (5, 2, 4) and out.is_meta
    with pytest.raises(NotImplementedError, match=r"proj_size=2 .* not implemented"):
        BNLSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size"):
        BNLSTM(3, 4, proj_size=-1)


def test_flatten_parameters_changes_nothing() -> None:
    torch.manual_seed(0)
    lstm = BNLSTM(3, 4).eval()
    x = torch.randn(5, 2, 3)
    before = {k: v.clone() for k, v in lstm.state_dict().items()}
    out = lstm(x)[0]
    lstm.flatten_parameters()
    assert all(torch.equal(v, before[k]) for k, v in lstm.state_dict().items())
    torch.testing.assert_close(lstm(x)[0], out, rtol=0, atol=0)


def test_a_state_dict_with_the_old_cell_names_still_loads() -> None:
    """Before 0.2 the layers were ``cells.{k}`` with one ``bias``; those files load."""
    torch.manual_seed(0)
    lstm = BNLSTM(3, 4, num_layers=2, bidirectional=True, t_max=6)
    with torch.no_grad():
        lstm(torch.randn(6, 5, 3))  # statistics that are not 0 and 1
    old = {}
    for name, value in lstm.state_dict().items():
        stem, _, rest = name.partition(".")
        kind, layer, reverse = (
            stem.rsplit("_", 2)
            if stem.endswith("reverse")
            else (
                *stem.rsplit("_", 1),
                "",
            )
        )
        k = 2 * int(layer[1:]) + (1 if reverse else 0)
        if kind == "bias_hh":
            continue
        key = f"cells.{k}.bias" if kind == "bias_ih" else f"cells.{k}.{kind}"
        old[key + ("." + rest if rest else "")] = (
            value + lstm.state_dict()[name.replace("bias_ih", "bias_hh")]
            if kind == "bias_ih"
            else value
        )
    fresh = BNLSTM(3, 4, num_layers=2, bidirectional=True, t_max=6)
    fresh.load_state_dict(old)
    x = torch.randn(6, 3, 3)
    torch.testing.assert_close(fresh.eval()(x)[0], lstm.eval()(x)[0])


def test_a_layers_cell_shares_its_parameters_and_statistics() -> None:
    lstm = BNLSTM(3, 4, num_layers=2, bidirectional=True)
    cell = lstm.cell(1, direction=1)
    assert cell.weight_ih is lstm.weight_ih_l1_reverse and cell.bn_c is lstm.bn_c_l1_reverse
    assert cell.input_size == 8 and cell.hidden_size == 4
    with torch.no_grad():
        cell.bias_hh.add_(1.0)  # type: ignore[union-attr]
    assert torch.all(lstm.bias_hh_l1_reverse == 1.0)
    with pytest.raises(ValueError, match="direction"):
        BNLSTM(3, 4).cell(0, direction=1)
    with pytest.raises(ValueError, match="layer"):
        lstm.cell(2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("native_bf16", [True, False])
def test_half_precision_trains_where_nn_lstm_does(
    dtype: torch.dtype, native_bf16: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bfloat16 once failed inside oneDNN ("could not create a primitive descriptor") on
    CPUs without native bfloat16, where ``nn.LSTM`` trains; there ``torch.mm`` runs now."""
    from paperports.integrations.torch import bn_lstm_training

    if native_bf16 and dtype == torch.bfloat16 and not bn_lstm_training._has_native_bf16():
        pytest.skip("this CPU has no native bfloat16: oneDNN's bfloat16 products cannot run")
    monkeypatch.setattr(bn_lstm_training, "_ONEDNN_BF16", native_bf16)
    if not native_bf16:  # the products of a bfloat16 layer leave oneDNN for torch.mm
        assert not bn_lstm_training._use_onednn(torch.empty(4, 3, dtype=torch.bfloat16))
    torch.manual_seed(0)
    full = BNLSTM(3, 8, num_layers=2)
    half = copy.deepcopy(full).to(dtype)
    nn.LSTM(3, 8).to(dtype)(torch.randn(6, 5, 3, dtype=dtype))[0].sum().backward()  # it does
    x = torch.randn(6, 5, 3)
    out_full, out_half = full(x)[0], half(x.to(dtype))[0]
    assert out_half.dtype == dtype
    out_half.float().pow(2).sum().backward()
    out_full.pow(2).sum().backward()
    torch.testing.assert_close(out_half.float(), out_full, rtol=0.05, atol=0.05)
    for p, q in zip(half.parameters(), full.parameters(), strict=True):
        assert p.grad is not None and p.grad.dtype == dtype
        torch.testing.assert_close(p.grad.float(), q.grad, rtol=0.1, atol=0.05)  # type: ignore[arg-type]
    half.eval()
    with torch.no_grad():
        assert torch.isfinite(half(x.to(dtype))[0].float()).all()
