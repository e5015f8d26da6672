from __future__ import annotations

import foolbox as fb
import pytest
import torch
from torch import nn

from paperports.adapters.digits import digits_classifier, load_digits_tensors


class TinyNet(nn.Module):
    """A small smooth classifier on flat inputs, for exact gradient checks."""

    def __init__(self, n_in: int = 6, n_out: int = 4, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = nn.Parameter(torch.randn(n_in, 8, generator=g, dtype=torch.float64))
        self.w2 = nn.Parameter(torch.randn(8, n_out, generator=g, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x.flatten(1) @ self.w1) @ self.w2


@pytest.fixture
def tiny() -> TinyNet:
    return TinyNet().eval()


@pytest.fixture(scope="session")
def digits8() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The embedded 8x8 digits classifier in float64, with 40 test images."""
    model = digits_classifier(8).double().eval()
    x, y = load_digits_tensors(8, "test")
    return model, x[:40].double(), y[:40]


@pytest.fixture(scope="session")
def digits28() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    model = digits_classifier(28).eval()
    x, y = load_digits_tensors(28, "test")
    return model, x, y


def other_targets(y: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """A target different from the label for each sample."""
    g = torch.Generator().manual_seed(seed)
    return (y + 1 + torch.randint(0, 9, y.shape, generator=g)) % 10


def fmodel(model: nn.Module, bounds: tuple[float, float] = (0.0, 1.0)) -> fb.PyTorchModel:
    # on the CPU, where the tests' inputs are (foolbox's default is a GPU where there is one)
    return fb.PyTorchModel(model, bounds=bounds, device="cpu")
