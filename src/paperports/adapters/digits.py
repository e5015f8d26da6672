"""scikit-learn's handwritten digits as the embedded stand-in for MNIST, and small classifiers.

``load_digits_tensors`` gives the 1,797 8x8 digits scaled to ``[0, 1]``, either as they are
(64 features) or upsampled bilinearly to 28x28 (784 features, MNIST's size), with a fixed
stratified train/test split. ``strokes="sharp"`` gives an MNIST-like stand-in instead: the
digit in a 20x20 box centred on a zero background (MNIST's layout) with its strokes
contrast-stretched, so that most pixels are exactly 0 and the strokes' cores saturate.
``digits_classifier`` returns a small CNN (or the paper's ``LeNet``) trained on the
training split at first use and cached under ``$PAPERPORTS_CACHE`` (default
``~/.cache/paperports``). Nothing is downloaded: the digits ship with scikit-learn.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from paperports._checks import check_choice, check_float, check_int
from paperports._imports import require

__all__ = [
    "SHARP_RANGE",
    "DigitsCNN",
    "LeNet",
    "accuracy",
    "cache_dir",
    "digits_classifier",
    "load_digits_tensors",
]

Strokes = Literal["smooth", "sharp"]
Architecture = Literal["cnn", "lenet"]
SHARP_RANGE = (0.4, 0.7)
"""``strokes="sharp"``: upsampled values in this range are stretched to [0, 1] (below: 0,
above: 1); chosen so the stand-in's mean intensity and share of zero pixels are close to
MNIST's (see the JSMA report)."""

_RECIPE = "v1"  # bump when the training recipe changes, so old caches are not reused


def cache_dir() -> Path:
    """Where trained default models are cached (``$PAPERPORTS_CACHE`` or ``~/.cache``)."""
    root = os.environ.get("PAPERPORTS_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "paperports"


def load_digits_tensors(
    size: int = 28,
    split: str = "train",
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    strokes: Strokes = "smooth",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The digits as ``(images (N, 1, size, size) in [0, 1], labels (N,))``.

    Args:
        size: 8 for the raw digits, or a larger side (28 for MNIST's) to upsample to.
        split: ``"train"``, ``"test"`` or ``"all"``.
        test_fraction: The held-out fraction of the stratified split.
        seed: The split's seed.
        strokes: ``"smooth"``: the whole frame, upsampled bilinearly. ``"sharp"``: MNIST's
            layout and contrast, the digit upsampled to a box of ``5/7`` of the side (20 of
            28) centred on a zero background, values in :data:`SHARP_RANGE` stretched to
            ``[0, 1]``; needs ``size >= 14``.
    """
    require("reproduce", "sklearn", feature="paperports.adapters.digits")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    who = "load_digits_tensors"
    size = check_int("size", size, minimum=8, who=who)
    check_choice("split", split, ("train", "test", "all"), who=who)
    check_float("test_fraction", test_fraction, minimum=0.0, maximum=1.0, open_low=True,
                open_high=True, who=who)  # fmt: skip
    seed = check_int("seed", seed, who=who)
    check_choice("strokes", strokes, ("smooth", "sharp"), who=who)
    if strokes == "sharp" and size < 14:
        raise ValueError(f"{who}: strokes='sharp' needs size >= 14 (MNIST's is 28), got {size}")
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    if strokes == "sharp":
        box = size * 5 // 7
        x = F.interpolate(x, size=(box, box), mode="bilinear", align_corners=False)
        lo, hi = SHARP_RANGE
        x = ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
        before = (size - box) // 2
        x = F.pad(x, (before, size - box - before, before, size - box - before))
    elif size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        x = x.clamp(0.0, 1.0)
    if split == "all":
        return x, y
    idx_train, idx_test = train_test_split(
        torch.arange(len(y)).numpy(),
        test_size=test_fraction,
        random_state=seed,
        stratify=y.numpy(),
    )
    idx = torch.as_tensor(idx_train if split == "train" else idx_test)
    return x[idx], y[idx]


class DigitsCNN(nn.Module):
    """A small LeNet-style CNN for ``size x size`` digits (returns logits).

    Args:
        size: The image side (8 or 28 here; any side divisible by 4).
        channels: Input channels (1 for the digits; 3 for colour images).
    """

    def __init__(self, size: int = 28, channels: int = 1) -> None:
        super().__init__()
        size = check_int("size", size, minimum=4, who="DigitsCNN")
        channels = check_int("channels", channels, minimum=1, who="DigitsCNN")
        if size % 4:
            raise ValueError(f"DigitsCNN: size must be divisible by 4, got {size}")
        self.size = size
        self.features = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * (size // 4) ** 2, 100), nn.ReLU(), nn.Linear(100, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))  # type: ignore[no-any-return]


class LeNet(nn.Module):
    """LeNet for 28x28 inputs (returns logits), as the JSMA paper and the variants paper
    attacked it on MNIST: two 5x5 convolutions (20 and 50 maps), each followed by a ReLU
    and 2x2 max-pooling, a fully connected layer of 500 ReLU units and 10 outputs (the
    layer sizes of the Caffe LeNet; the ReLUs and sizes of the LeNet-5 in the code of
    Loison, Combey and Hajri 2020).
    """

    def __init__(self) -> None:
        super().__init__()
        self.size = 28
        self.features = nn.Sequential(
            nn.Conv2d(1, 20, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(50 * 4 * 4, 500), nn.ReLU(), nn.Linear(500, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))  # type: ignore[no-any-return]


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Top-1 accuracy of ``model`` on ``(x, y)``."""
    with torch.no_grad():
        return float((model(x).argmax(-1) == y).float().mean())


def _train(
    model: DigitsCNN | LeNet, data: tuple[torch.Tensor, torch.Tensor], seed: int, epochs: int
) -> DigitsCNN | LeNet:
    x, y = data
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    for layer in model.modules():  # the seed decides the initial weights, in creation order
        if isinstance(layer, nn.Conv2d | nn.Linear):
            layer.reset_parameters()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 64):
            b = perm[i : i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(x[b]), y[b])
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
    return model.eval()


def digits_classifier(
    size: int = 28,
    *,
    seed: int = 0,
    epochs: int = 25,
    cache: bool = True,
    architecture: Architecture = "cnn",
    strokes: Strokes = "smooth",
) -> DigitsCNN | LeNet:
    """A classifier trained on the digits' training split, in eval mode.

    Trained at first use (seconds on a CPU) and cached; later calls load the cache.

    Args:
        size: 28 (the MNIST stand-in) or 8 (the raw digits).
        seed: The training seed.
        epochs: Training epochs.
        cache: Read and write the cache.
        architecture: ``"cnn"`` (:class:`DigitsCNN`) or ``"lenet"`` (:class:`LeNet`, 28x28).
        strokes: The images it is trained on (see :func:`load_digits_tensors`).
    """
    who = "digits_classifier"
    size = check_int("size", size, minimum=8, who=who)
    seed = check_int("seed", seed, who=who)
    epochs = check_int("epochs", epochs, minimum=1, who=who)
    check_choice("architecture", architecture, ("cnn", "lenet"), who=who)
    check_choice("strokes", strokes, ("smooth", "sharp"), who=who)
    if architecture == "lenet" and size != 28:
        raise ValueError(f"{who}: architecture='lenet' takes 28x28 inputs, got size={size}")
    kind = "" if (architecture, strokes) == ("cnn", "smooth") else f"_{architecture}_{strokes}"
    path = cache_dir() / f"digits_cnn_{_RECIPE}_size{size}_seed{seed}_ep{epochs}{kind}.pt"

    def new() -> DigitsCNN | LeNet:
        return LeNet() if architecture == "lenet" else DigitsCNN(size)

    if cache and path.exists():
        model = new()
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
            if all(torch.isfinite(v).all() for v in model.state_dict().values()):
                return model.eval()
            problem = "it holds NaN or infinite weights"
        except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as err:
            problem = f"it could not be read ({type(err).__name__})"
        # a corrupt or stale cache: train again and overwrite it, saying so
        warnings.warn(f"{path}: {problem}; training again", RuntimeWarning, stacklevel=2)
    model = _train(new(), load_digits_tensors(size, "train", strokes=strokes), seed, epochs)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(model.state_dict(), tmp)
        tmp.replace(path)
    return model
