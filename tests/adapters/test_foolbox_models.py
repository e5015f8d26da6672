from __future__ import annotations

import foolbox as fb
import pytest
import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from paperports.adapters.foolbox_models import LogitsModel
from paperports.integrations.foolbox import SaliencyMapAttack


class HFStyle(nn.Module):
    """A classifier returning transformers' ModelOutput, as HF heads do."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> SequenceClassifierOutput:
        return SequenceClassifierOutput(logits=self.linear(x.flatten(1)))


class TupleStyle(HFStyle):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        z = self.linear(x.flatten(1))
        return z, z.relu()


def test_returns_the_logits_of_model_outputs_and_tuples() -> None:
    x = torch.rand(2, 16)
    hf, tup = HFStyle(), TupleStyle()
    assert torch.equal(LogitsModel(hf)(x), hf(x).logits)
    assert torch.equal(LogitsModel(tup)(x), tup(x)[0])
    plain = nn.Linear(16, 3)
    assert torch.equal(LogitsModel(plain)(x), plain(x))


def test_other_outputs_are_a_clear_error() -> None:
    class Dicty(nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"scores": x}

    with pytest.raises(TypeError, match=r"no tensor `\.logits`"):
        LogitsModel(Dicty())(torch.rand(1, 2))


def test_foolbox_attacks_hf_style_models_through_it() -> None:
    model = LogitsModel(HFStyle()).eval()
    x = torch.rand(4, 1, 4, 4)
    y = model(x).argmax(1)
    fmodel = fb.PyTorchModel(model, bounds=(0, 1), device="cpu")
    _, _, success = SaliencyMapAttack(max_perturbation=1.0)(fmodel, x, y, epsilons=None)
    assert success.any()
