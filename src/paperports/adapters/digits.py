"""scikit-learn's handwritten digits as the embedded stand-in for MNIST, and small classifiers.

``load_digits_tensors`` gives the 1,797 8x8 digits scaled to ``[0, 1]``, either as they are
(64 features) or upsampled bilinearly to 28x28 (784 features, MNIST's size), with a fixed
stratified train/test split. ``digits_classifier`` returns a small LeNet-style CNN trained on
the training split at first use and cached under ``$PAPERPORTS_CACHE`` (default
``~/.cache/paperports``). Nothing is downloaded: the digits ship with scikit-learn.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from paperports._checks import check_choice, check_float, check_int
from paperports._imports import require

__all__ = ["DigitsCNN", "accuracy", "cache_dir", "digits_classifier", "load_digits_tensors"]

_RECIPE = "v1"  # bump when the training recipe changes, so old caches are not reused


def cache_dir() -> Path:
    """Where trained default models are cached (``$PAPERPORTS_CACHE`` or ``~/.cache``)."""
    root = os.environ.get("PAPERPORTS_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "paperports"


def load_digits_tensors(
    size: int = 28, split: str = "train", *, test_fraction: float = 0.2, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The digits as ``(images (N, 1, size, size) in [0, 1], labels (N,))``.

    Args:
        size: 8 for the raw digits, or a larger side (28 for MNIST's) to upsample to.
        split: ``"train"``, ``"test"`` or ``"all"``.
        test_fraction: The held-out fraction of the stratified split.
        seed: The split's seed.
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
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    if size != 8:
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
    """

    def __init__(self, size: int = 28) -> None:
        super().__init__()
        size = check_int("size", size, minimum=4, who="DigitsCNN")
        if size % 4:
            raise ValueError(f"DigitsCNN: size must be divisible by 4, got {size}")
        self.size = size
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
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


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Top-1 accuracy of ``model`` on ``(x, y)``."""
    with torch.no_grad():
        return float((model(x).argmax(-1) == y).float().mean())


def _train(size: int, seed: int, epochs: int) -> DigitsCNN:
    x, y = load_digits_tensors(size, "train")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = DigitsCNN(size)
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
    size: int = 28, *, seed: int = 0, epochs: int = 25, cache: bool = True
) -> DigitsCNN:
    """A :class:`DigitsCNN` trained on the digits' training split, in eval mode.

    Trained at first use (seconds on a CPU) and cached; later calls load the cache.

    Args:
        size: 28 (the MNIST stand-in) or 8 (the raw digits).
        seed: The training seed.
        epochs: Training epochs.
        cache: Read and write the cache.
    """
    who = "digits_classifier"
    size = check_int("size", size, minimum=8, who=who)
    seed = check_int("seed", seed, who=who)
    epochs = check_int("epochs", epochs, minimum=1, who=who)
    path = cache_dir() / f"digits_cnn_{_RECIPE}_size{size}_seed{seed}_ep{epochs}.pt"
    if cache and path.exists():
        model = DigitsCNN(size)
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
    model = _train(size, seed, epochs)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(model.state_dict(), tmp)
        tmp.replace(path)
    return model
