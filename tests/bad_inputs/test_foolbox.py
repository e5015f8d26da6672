"""Bad input to the foolbox plugin (the attack, the saliency functions, the hardness)."""

from __future__ import annotations

from typing import Any

import eagerpy as ep
import foolbox as fb
import numpy as np
import pytest
import torch
from torch import nn

from paperports.integrations.foolbox import (
    SaliencyMapAttack,
    adversarial_distance,
    adversarial_distance_matrix,
    forward_derivative,
    hardness_matrix,
    saliency_map,
)
from paperports.integrations.foolbox.saliency import (
    best_aligned_pairs,
    best_features,
    best_pairs,
    target_gradients,
)

from .conftest import assert_refused, case


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x.flatten(1))


MODEL = fb.PyTorchModel(Net().eval(), bounds=(0, 1), device="cpu")
X = torch.rand(4, 6, generator=torch.Generator().manual_seed(0))
Y = torch.tensor([0, 1, 2, 0])
T = fb.criteria.TargetedMisclassification(torch.tensor([1, 2, 0, 1]))
A = ep.astensor(torch.randn(4, 6))
DOMAIN = ep.astensor(torch.ones(4, 6, dtype=torch.bool))


def attack(*, epsilons: Any = None, x: Any = X, criterion: Any = T, **kw: Any) -> Any:
    return SaliencyMapAttack(**kw)(MODEL, x, criterion, epsilons=epsilons)


def _with(value: float) -> torch.Tensor:
    x = X.clone()
    x[1, 2] = value
    return x


CONFIG = [
    *[
        case(f"attack {k}={v!r}", lambda k=k, v=v: SaliencyMapAttack(**{k: v}), k)
        for k, v in [
            ("theta", 0.0),
            ("theta", 1.5),
            ("theta", float("nan")),
            ("theta", "1"),
            ("max_perturbation", 0.0),
            ("max_perturbation", 1.2),
            ("pairwise", 1),
            ("steps", 0),
            ("steps", 2.5),
            ("outputs", "softmax"),
            ("chunk_size", 0),
            ("chunk_size", 1.5),
            ("pairs_per_step", 0),
            ("pairs_per_step", 2.5),
            ("per_pixel", "yes"),
            ("variant", "ejsma"),
            ("variant", None),
        ]
    ],
    case(
        "attack variant=wjsma with probabilities",
        lambda: SaliencyMapAttack(variant="wjsma", outputs="probabilities"),
        "outputs='logits'",
    ),
    case(
        "hardness num_classes=1.5",
        lambda: hardness_matrix([0.1], [0], [1], num_classes=1.5),
        "num_classes",
    ),
    case(
        "hardness num_classes=1",
        lambda: hardness_matrix([0.1], [0], [0], num_classes=1),
        "num_classes",
    ),
    case(
        "hardness grid decreasing",
        lambda: hardness_matrix([0.1], [0], [1], num_classes=2, max_perturbations=[0.1, 0.05]),
        "max_perturbations",
    ),
    case(
        "hardness grid above 1",
        lambda: hardness_matrix([0.1], [0], [1], num_classes=2, max_perturbations=[0.1, 2.0]),
        "max_perturbations",
    ),
    case(
        "hardness grid of one",
        lambda: hardness_matrix([0.1], [0], [1], num_classes=2, max_perturbations=[0.1]),
        "max_perturbations",
    ),
    case("best_pairs chunk_size=0", lambda: best_pairs(A, A, DOMAIN, chunk_size=0), "chunk_size"),
    case(
        "best_pairs tie_candidates=0",
        lambda: best_pairs(A, A, DOMAIN, tie_candidates=0),
        "tie_candidates",
    ),
]

DTYPE = [
    case("attack integer inputs", lambda: attack(x=(X * 10).long()), "inputs", "floating"),
    case(
        "attack per_pixel on inputs without a channel axis",
        lambda: attack(per_pixel=True),
        "per_pixel",
        "channel axis",
    ),
    case("attack float64 inputs, float32 model", lambda: attack(x=X.double()), "inputs", "float64"),
    case(
        "attack float target classes",
        lambda: attack(criterion=fb.criteria.TargetedMisclassification(Y.float())),
        "target_classes",
    ),
    case("attack criterion a string", lambda: attack(criterion="targeted"), "criterion"),
    case(
        "attack NumPy inputs to a PyTorchModel",
        lambda: attack(x=X.numpy(), criterion=Y.numpy()),
        "numpy.ndarray",
        "PyTorchModel",
        "torch.Tensor",
    ),
    case(
        "saliency NumPy inputs to a PyTorchModel",
        lambda: saliency_map(MODEL, X.numpy(), Y),
        "inputs",
        "PyTorchModel",
    ),
    case("saliency float targets", lambda: saliency_map(MODEL, X, Y.float()), "targets"),
    case(
        "forward_derivative integer inputs", lambda: forward_derivative(MODEL, X.long()), "inputs"
    ),
    case("target_gradients bool inputs", lambda: target_gradients(MODEL, X.bool(), Y), "inputs"),
    case(
        "best_pairs domain floats",
        lambda: best_pairs(A, A, ep.astensor(torch.ones(4, 6))),
        "domain",
        "boolean",
    ),
    case(
        "hardness labels of text",
        lambda: hardness_matrix([0.1], np.array(["a"]), [1], num_classes=2),
        "source",
    ),
    case(
        "hardness fraction of text",
        lambda: hardness_matrix(np.array(["x"]), [0], [1], num_classes=2),
        "l0_fraction",
    ),
]

EMPTY: list[Any] = []

VALUES = [
    *[
        case(f"attack inputs with {v}", lambda v=v: attack(x=_with(v)), "NaN or infinite")
        for v in (float("nan"), float("inf"), -float("inf"))
    ],
    case("attack inputs beyond the bounds", lambda: attack(x=X * 3), "bounds"),
    case("attack inputs a scalar", lambda: attack(x=torch.tensor(0.5)), "batch"),
    case(
        "attack target -1",
        lambda: attack(
            criterion=fb.criteria.TargetedMisclassification(torch.tensor([-1, 0, 1, 2]))
        ),
        "target_classes",
        "[0, 3)",
    ),
    case(
        "attack target 3",
        lambda: attack(criterion=fb.criteria.TargetedMisclassification(torch.tensor([3, 0, 1, 2]))),
        "target_classes",
    ),
    case(
        "attack labels of another batch",
        lambda: attack(criterion=fb.criteria.Misclassification(Y[:2])),
        "labels",
        "(4,)",
    ),
    case(
        "attack both criteria",
        lambda: attack(criterion=fb.criteria.Misclassification(Y) & T),
        "criterion",
    ),
    case(
        "attack a model of one output",
        lambda: SaliencyMapAttack()(
            fb.PyTorchModel(
                nn.Sequential(nn.Flatten(), nn.Linear(6, 1), nn.Flatten(0)).eval(), (0, 1)
            ),
            X,
            Y,
            epsilons=None,
        ),
        "class scores",
    ),
    case(
        "attack a model of other inputs",
        lambda: SaliencyMapAttack()(
            fb.PyTorchModel(nn.Linear(5, 3).eval(), (0, 1)), X, Y, epsilons=None
        ),
        "could not run on the inputs",
    ),
    case(
        "attack an unknown keyword",
        lambda: SaliencyMapAttack()(MODEL, X, T, epsilons=None, foo=1),
        "foo",
    ),
    case("epsilons negative", lambda: attack(epsilons=[-1]), "epsilons", ">= 0"),
    case("epsilons NaN", lambda: attack(epsilons=float("nan")), "epsilons"),
    case("epsilons mixing counts and fractions", lambda: attack(epsilons=[2, 0.5]), "mix"),
    case("epsilons 1.0", lambda: attack(epsilons=1.0), "ambiguous"),
    case("epsilons 2.5", lambda: attack(epsilons=[2.5]), "whole count"),
    case("epsilons text", lambda: attack(epsilons=["2"]), "epsilons"),
    case(
        "saliency target -1",
        lambda: saliency_map(MODEL, X, torch.tensor([-1, 0, 1, 2])),
        "targets",
        "[0, 3)",
    ),
    case("saliency targets of another batch", lambda: saliency_map(MODEL, X, Y[:3]), "targets"),
    case("saliency NaN inputs", lambda: saliency_map(MODEL, _with(float("nan")), Y), "NaN"),
    case(
        "adversarial_distance target 5",
        lambda: adversarial_distance(MODEL, X, torch.tensor([5, 0, 1, 2])),
        "targets",
    ),
    case(
        "adversarial_distance outputs",
        lambda: adversarial_distance(MODEL, X, Y, outputs="z"),
        "outputs",
    ),
    case(
        "distance matrix labels beyond",
        lambda: adversarial_distance_matrix(MODEL, X, Y + 3),
        "labels",
        "[0, 3)",
    ),
    case(
        "distance matrix labels of another batch",
        lambda: adversarial_distance_matrix(MODEL, X, Y[:2]),
        "labels",
    ),
    case(
        "forward_derivative outputs", lambda: forward_derivative(MODEL, X, outputs="z"), "outputs"
    ),
    case("best_pairs shapes", lambda: best_pairs(A, A[:, :3], DOMAIN), "a, b and domain"),
    case(
        "best_aligned_pairs domain shape",
        lambda: best_aligned_pairs(A, DOMAIN[:, :3]),
        "a, b and domain",
    ),
    case(
        "best_aligned_pairs domain floats",
        lambda: best_aligned_pairs(A, ep.astensor(torch.ones(4, 6))),
        "domain",
        "boolean",
    ),
    case("best_features shapes", lambda: best_features(A, A, DOMAIN[:2]), "a, b and domain"),
    case(
        "hardness NaN fraction",
        lambda: hardness_matrix([np.nan], [0], [1], num_classes=2),
        "l0_fraction",
    ),
    case(
        "hardness fraction above 1",
        lambda: hardness_matrix([1.5], [0], [1], num_classes=2),
        "l0_fraction",
    ),
    case(
        "hardness negative fraction",
        lambda: hardness_matrix([-0.1], [0], [1], num_classes=2),
        "l0_fraction",
    ),
    case(
        "hardness label 1.5",
        lambda: hardness_matrix([0.1, 0.2], [0, 1.5], [1, 0], num_classes=3),
        "whole class",
    ),
    case(
        "hardness target = source",
        lambda: hardness_matrix([0.1], [1], [1], num_classes=2),
        "target equals",
    ),
    case(
        "hardness label beyond",
        lambda: hardness_matrix([0.1], [0], [4], num_classes=3),
        "target",
        "[0, 3)",
    ),
    case(
        "hardness lengths",
        lambda: hardness_matrix([0.1, 0.2], [0], [1], num_classes=2),
        "same length",
    ),
]


@pytest.mark.parametrize(("call", "words", "error"), CONFIG + DTYPE + EMPTY + VALUES)
def test_refused(call: Any, words: tuple[str, ...], error: Any) -> None:
    assert_refused(call, words, error)


@pytest.mark.parametrize("epsilons", [None, 3, [0, 3, None]])
def test_defined_results_for_an_empty_batch(epsilons: Any) -> None:
    raw, clipped, success = attack(
        x=X[:0], criterion=fb.criteria.Misclassification(Y[:0]), epsilons=epsilons
    )
    if isinstance(epsilons, list):
        assert success.shape == (3, 0) and all(c.shape == (0, 6) for c in clipped)
    else:
        assert success.shape == (0,) and clipped.shape == (0, 6) and raw.shape == (0, 6)


def test_no_change_is_a_success_only_where_the_input_is_already_adversarial() -> None:
    """epsilon 0 allows no change: success exactly where the model already agrees."""
    _, clipped, success = attack(epsilons=[0])
    assert torch.equal(clipped[0], X)
    already = MODEL(X).argmax(-1) == T.target_classes.raw
    assert torch.equal(success[0], already)
