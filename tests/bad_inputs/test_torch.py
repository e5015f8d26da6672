"""Bad input to the torch plugin (BNLSTM, BNLSTMCell, RecurrentBatchNorm, update_bn)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

from paperports.integrations.torch import BNLSTM, BNLSTMCell, RecurrentBatchNorm, update_bn

from .conftest import assert_refused, case

DTYPES = [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool]


def lstm(**kw: Any) -> BNLSTM:
    return BNLSTM(**({"input_size": 3, "hidden_size": 4} | kw))


def x(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape).to(dtype)


CONFIG = [
    case("hidden_size=0", lambda: lstm(hidden_size=0), "hidden_size", ">= 1"),
    case("hidden_size=2.5", lambda: lstm(hidden_size=2.5), "hidden_size", "integer"),
    case("input_size=-3", lambda: lstm(input_size=-3), "input_size"),
    case("input_size='3'", lambda: lstm(input_size="3"), "input_size"),
    case("num_layers=0", lambda: lstm(num_layers=0), "num_layers"),
    case("num_layers=1.5", lambda: lstm(num_layers=1.5), "num_layers"),
    case("num_layers=True", lambda: lstm(num_layers=True), "num_layers"),
    case("dropout=-0.1", lambda: lstm(dropout=-0.1), "dropout", "[0.0, 1.0]"),
    case("dropout=1.5", lambda: lstm(dropout=1.5), "dropout"),
    case("dropout=nan", lambda: lstm(dropout=float("nan")), "dropout"),
    case("dropout='0.1'", lambda: lstm(dropout="0.1"), "dropout"),
    case("batch_first=1", lambda: lstm(batch_first=1), "batch_first"),
    case("bidirectional='yes'", lambda: lstm(bidirectional="yes"), "bidirectional"),
    case("bias=None", lambda: lstm(bias=None), "bias"),
    case("t_max=0", lambda: lstm(t_max=0), "t_max"),
    case("t_max=10.0", lambda: lstm(t_max=10.0), "t_max"),
    case("gamma_init=nan", lambda: lstm(gamma_init=float("nan")), "gamma_init"),
    case("gamma_init=inf", lambda: lstm(gamma_init=float("inf")), "gamma_init"),
    case("forget_bias='1'", lambda: lstm(forget_bias="1"), "forget_bias"),
    case("momentum=-0.1", lambda: lstm(momentum=-0.1), "momentum"),
    case("momentum=1.1", lambda: lstm(momentum=1.1), "momentum"),
    case("eps=-1e-5", lambda: lstm(eps=-1e-5), "eps"),
    case("eps=0", lambda: lstm(eps=0.0), "eps", "> 0"),
    case("cell hidden_size=0", lambda: BNLSTMCell(3, 0), "hidden_size"),
    case("cell input_size=1.0", lambda: BNLSTMCell(1.0, 4), "input_size"),
    case("cell bias='no'", lambda: BNLSTMCell(3, 4, "no"), "bias"),
    case("cell t_max=-1", lambda: BNLSTMCell(3, 4, t_max=-1), "t_max"),
    case("norm num_features=0", lambda: RecurrentBatchNorm(0, 4), "num_features"),
    case("norm t_max=0", lambda: RecurrentBatchNorm(3, 0), "t_max"),
    case("norm eps=-1", lambda: RecurrentBatchNorm(3, 4, eps=-1.0), "eps"),
    case("norm momentum=2", lambda: RecurrentBatchNorm(3, 4, momentum=2), "momentum"),
    case("norm gamma_init=nan", lambda: RecurrentBatchNorm(3, 4, gamma_init=float("nan")), "gamma"),
    case("norm reserve_steps=-1", lambda: RecurrentBatchNorm(3, 4).reserve_steps(-1), "steps"),
    case("lstm reserve_steps=2.5", lambda: BNLSTM(3, 4).reserve_steps(2.5), "steps"),  # type: ignore[arg-type]
]

DTYPE = [
    *[
        case(f"BNLSTM input {d}", lambda d=d: lstm()(x(5, 2, 3, dtype=d)), "input", str(d))
        for d in DTYPES
    ],
    *[
        case(f"BNLSTM eval input {d}", lambda d=d: lstm().eval()(x(5, 2, 3, dtype=d)), str(d))
        for d in DTYPES
    ],
    *[
        case(f"BNLSTMCell input {d}", lambda d=d: BNLSTMCell(3, 4)(x(2, 3, dtype=d)), "input")
        for d in DTYPES
    ],
    *[
        case(
            f"RecurrentBatchNorm {d}",
            lambda d=d: RecurrentBatchNorm(3, 4)(x(2, 2, 3, dtype=d)),
            "input",
        )
        for d in DTYPES
    ],
    case(
        "BNLSTM h_0 float64",
        lambda: lstm()(x(5, 2, 3), (x(1, 2, 4).double(), x(1, 2, 4))),
        "h_0",
        "float64",
    ),
    case("BNLSTM c_0 int", lambda: lstm()(x(5, 2, 3), (x(1, 2, 4), x(1, 2, 4).long())), "c_0"),
    case(
        "BNLSTM packed float64",
        lambda: lstm()(pack_padded_sequence(x(5, 2, 3).double(), torch.tensor([5, 3]))),
        "input",
        "float64",
    ),
    case("double module, float input", lambda: lstm().double()(x(5, 2, 3)), "float32", "float64"),
    case("cell hx float64", lambda: BNLSTMCell(3, 4)(x(2, 3), (x(2, 4).double(), x(2, 4))), "h"),
    case("cell mask float", lambda: BNLSTMCell(3, 4)(x(2, 3), mask=torch.ones(2)), "mask", "bool"),
    case(
        "norm mask int",
        lambda: RecurrentBatchNorm(3, 4)(x(2, 2, 3), mask=torch.ones(2, 2).long()),
        "mask",
    ),
    case("lengths bool", lambda: lstm()(x(5, 2, 3), lengths=torch.tensor([True, True])), "lengths"),
]

EMPTY = [
    case("sequence length 0", lambda: lstm()(x(0, 2, 3)), "no time steps"),
    case("unbatched length 0", lambda: lstm().eval()(x(0, 3)), "no time steps"),
    case("batch_first length 0", lambda: lstm(batch_first=True)(x(2, 0, 3)), "no time steps"),
    case("batch of one in training", lambda: lstm()(x(5, 1, 3)), "more than 1 value"),
    case("unbatched in training", lambda: lstm()(x(5, 3)), "more than 1 value"),
    case(
        "cell batch of one",
        lambda: BNLSTMCell(3, 4).sequence(x(4, 1, 3), x(1, 4), x(1, 4)),
        "more than 1 value",
    ),
    case("norm batch of one", lambda: RecurrentBatchNorm(3, 4)(x(2, 1, 3)), "more than 1 value"),
    case("update_bn no batch", lambda: update_bn([], lstm()), "no batch"),
    case(
        "update_bn one-sequence batches",
        lambda: update_bn([x(5, 1, 3)] * 2, lstm()),
        "at least two sequences",
    ),
]

VALUES = [
    case("input 1-D", lambda: lstm()(x(5)), "input", "(T, B, input_size)"),
    case("input 4-D", lambda: lstm()(x(5, 2, 3, 1)), "input"),
    case("input features", lambda: lstm()(x(5, 2, 7)), "input_size=3"),
    case("input a list", lambda: lstm()([[1.0, 2.0, 3.0]]), "input", "Tensor"),
    case("hx one tensor", lambda: lstm()(x(5, 2, 3), x(1, 2, 4)), "hx"),
    case("h_0 shape", lambda: lstm()(x(5, 2, 3), (x(2, 2, 4), x(2, 2, 4))), "h_0", "(1, 2, 4)"),
    case("lengths shape", lambda: lstm()(x(5, 2, 3), lengths=torch.tensor([5])), "lengths"),
    case(
        "lengths 0", lambda: lstm()(x(5, 2, 3), lengths=torch.tensor([0, 3])), "lengths", "[1, 5]"
    ),
    case("lengths too long", lambda: lstm()(x(5, 2, 3), lengths=torch.tensor([6, 3])), "lengths"),
    case("lengths 2.5", lambda: lstm()(x(5, 2, 3), lengths=torch.tensor([2.5, 5.0])), "lengths"),
    case(
        "lengths with packed",
        lambda: lstm()(pack_padded_sequence(x(5, 2, 3), torch.tensor([5, 3])), lengths=[5, 3]),
        "lengths",
    ),
    case("cell input shape", lambda: BNLSTMCell(3, 4)(x(2, 5)), "input", "(batch, 3)"),
    case("cell t=-1", lambda: BNLSTMCell(3, 4)(x(2, 3), t=-1), "t must be"),
    case("cell t=1.5", lambda: BNLSTMCell(3, 4)(x(2, 3), t=1.5), "t must be"),
    case("cell hx shape", lambda: BNLSTMCell(3, 4)(x(2, 3), (x(2, 3), x(2, 4))), "h must have"),
    case("cell mask shape", lambda: BNLSTMCell(3, 4)(x(2, 3), mask=torch.ones(3).bool()), "mask"),
    case(
        "cell batch_sizes rising",
        lambda: BNLSTMCell(3, 4).sequence(x(3, 4, 3), x(4, 4), x(4, 4), [2, 3, 4]),
        "batch_sizes",
    ),
    case("norm start=-1", lambda: RecurrentBatchNorm(3, 4)(x(2, 2, 3), start=-1), "start"),
    case("norm start=0.5", lambda: RecurrentBatchNorm(3, 4)(x(2, 2, 3), start=0.5), "start"),
    case("norm features", lambda: RecurrentBatchNorm(3, 4)(x(2, 2, 5)), "(T, B, 3)"),
    case(
        "norm mask shape",
        lambda: RecurrentBatchNorm(3, 4)(x(2, 2, 3), mask=torch.ones(2, 3).bool()),
        "mask",
    ),
    case("affine start=-1", lambda: RecurrentBatchNorm(3, 4).affine(-1, 2), "start"),
    case("affine steps=-1", lambda: RecurrentBatchNorm(3, 4).affine(0, -1), "steps"),
    case("update_bn loader 5", lambda: update_bn(5, lstm()), "loader"),
    case("update_bn model str", lambda: update_bn([x(5, 2, 3)], "model"), "model"),
    case("update_bn forward str", lambda: update_bn([x(5, 2, 3)], lstm(), "f"), "forward"),
    case("update_bn batch features", lambda: update_bn([x(5, 2, 7)], lstm()), "input_size=3"),
]


@pytest.mark.parametrize(("call", "words", "error"), CONFIG + DTYPE + EMPTY + VALUES)
def test_refused(call: Any, words: tuple[str, ...], error: Any) -> None:
    assert_refused(call, words, error)


def test_update_bn_keeps_the_trained_statistics_whatever_it_refuses() -> None:
    model = lstm()
    model(torch.randn(5, 8, 3))
    before = {k: v.clone() for k, v in model.named_buffers()}
    for loader in ([], [x(5, 1, 3)], [x(5, 2, 7)]):
        with pytest.raises((ValueError, TypeError)):
            update_bn(loader, model)
        assert all(torch.equal(v, before[k]) for k, v in model.named_buffers())


@pytest.mark.parametrize("batch_first", [False, True])
def test_defined_results_for_empty_batches(batch_first: bool) -> None:
    """A batch of 0 sequences gives empty outputs of nn.LSTM's shapes, in training too."""
    ours = lstm(batch_first=batch_first, num_layers=2, bidirectional=True)
    ref = torch.nn.LSTM(3, 4, batch_first=batch_first, num_layers=2, bidirectional=True)
    empty = x(0, 5, 3) if batch_first else x(5, 0, 3)
    (o1, (h1, c1)), (o2, (h2, c2)) = ours(empty), ref(empty)
    assert (o1.shape, h1.shape, c1.shape) == (o2.shape, h2.shape, c2.shape)
    assert all(
        torch.equal(v, torch.zeros_like(v))
        for k, v in ours.named_buffers()
        if k.endswith("running_mean")
    )


def test_the_meta_device_builds_and_runs_every_module() -> None:
    """Models are built on the meta device first (transformers, accelerate): the checks
    that read values are skipped there, and the shapes come out right."""
    with torch.device("meta"):
        model = lstm(num_layers=2, bidirectional=True)
        for train in (True, False):
            out, (h, _) = model.train(train)(torch.ones(5, 2, 3))
            assert out.shape == (5, 2, 8) and h.is_meta
        out, _ = model(torch.ones(5, 2, 3), lengths=torch.tensor([5, 3], device="cpu"))
        assert out.shape == (5, 2, 8)
        assert BNLSTMCell(3, 4)(torch.ones(2, 3))[0].shape == (2, 4)
        assert RecurrentBatchNorm(3, 4)(torch.ones(2, 2, 3)).shape == (2, 2, 3)
