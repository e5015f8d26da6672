"""foolbox's own attack tests (tests/test_attacks.py of foolbox 3.3.4), as checks of ours.

foolbox tests every attack over its fixture models with two checks: untargeted, the
accuracy on the attack's outputs falls below the clean accuracy; targeted towards
``(label + 1) % classes``, more inputs reach their target than before. Its PyTorch fixture
models that need no download are a model whose class scores are the means of the three
channels, on foolbox's 8 ImageNet samples at 3x224x224, without and with a channel flip
in the preprocessing. foolbox lists its L0 attack (salt and pepper) with ``epsilons=None``;
ours joins it the same way. The paper's mode passes these too, in minutes per test (the
bench times one such call); the suite runs the large-input mode, which changes 64 pairs
per derivative, in seconds.

foolbox's sdist ships no tests; its two test functions and fixtures ran unchanged against
this attack, added to its attack lists (see the docs' "foolbox's test suite"). Its other
fixture models download weights (a zoo MNIST model, ShuffleNet), which this offline suite
cannot.
"""

from __future__ import annotations

import eagerpy as ep
import foolbox as fb
import pytest
import torch

from paperports.integrations.foolbox import SaliencyMapAttack


class _ChannelMeans(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(3).mean(2)


@pytest.fixture(scope="module", params=["default", "flip"])
def fixture_model(request: pytest.FixtureRequest) -> tuple[fb.Model, ep.Tensor, ep.Tensor]:
    preprocessing = dict(flip_axis=-3) if request.param == "flip" else None
    fmodel = fb.PyTorchModel(
        _ChannelMeans().eval(), bounds=(0, 1), device="cpu", preprocessing=preprocessing
    )
    x, _ = fb.samples(fmodel, dataset="imagenet", batchsize=8)
    x = ep.astensor(x)
    return fmodel, x, fmodel(x).argmax(axis=-1)


def _in_unit_bounds(
    fmodel: fb.Model, x: ep.Tensor, y: ep.Tensor
) -> tuple[fb.Model, ep.Tensor, ep.Tensor]:
    """foolbox's tests first map the inputs and the model to bounds (0, 1)."""
    x = (x - fmodel.bounds.lower) / (fmodel.bounds.upper - fmodel.bounds.lower)
    return fmodel.transform_bounds((0, 1)), x, y


ATTACKS = [
    SaliencyMapAttack(pairs_per_step=64),
    SaliencyMapAttack(outputs="logits", pairs_per_step=64),
]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.outputs)
def test_untargeted_attacks(
    fixture_model: tuple[fb.Model, ep.Tensor, ep.Tensor], attack: SaliencyMapAttack
) -> None:
    fmodel, x, y = _in_unit_bounds(*fixture_model)
    acc = fb.accuracy(fmodel, x, y)
    assert acc > 0
    advs, _, _ = attack(fmodel, x, y, epsilons=None)
    assert fb.accuracy(fmodel, advs, y) < acc


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.outputs)
def test_targeted_attacks(
    fixture_model: tuple[fb.Model, ep.Tensor, ep.Tensor], attack: SaliencyMapAttack
) -> None:
    fmodel, x, y = _in_unit_bounds(*fixture_model)
    num_classes = fmodel(x).shape[-1]
    criterion = fb.TargetedMisclassification((y + 1) % num_classes)
    before = criterion(x, fmodel(x))
    assert not before.all()
    advs, _, _ = attack(fmodel, x, criterion, epsilons=None)
    assert criterion(advs, fmodel(advs)).sum().item() > before.sum().item()
