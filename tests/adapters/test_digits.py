from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from paperports.adapters.digits import (
    DigitsCNN,
    accuracy,
    cache_dir,
    digits_classifier,
    load_digits_tensors,
)


@pytest.mark.parametrize("size", [8, 28])
def test_images_are_in_unit_range_with_a_disjoint_stratified_split(size: int) -> None:
    x_tr, _ = load_digits_tensors(size, "train")
    x_te, y_te = load_digits_tensors(size, "test")
    assert x_tr.shape[1:] == (1, size, size) and x_te.shape[1:] == (1, size, size)
    assert (len(x_tr), len(x_te)) == (1437, 360)
    assert x_tr.min() >= 0 and x_tr.max() <= 1 and x_tr.max() > 0.9
    assert set(y_te.tolist()) == set(range(10))
    # disjoint: no test image equals a training image of the same split
    flat_tr = {tuple(v) for v in x_tr.flatten(1).tolist()}
    assert sum(tuple(v) in flat_tr for v in x_te.flatten(1).tolist()) < 5


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="size"):
        load_digits_tensors(4)
    with pytest.raises(ValueError, match="split"):
        load_digits_tensors(8, "validation")
    with pytest.raises(ValueError, match="divisible by 4"):
        DigitsCNN(10)


def test_the_28x28_classifier_is_accurate_enough_for_the_papers_setting() -> None:
    model = digits_classifier(28)
    x, y = load_digits_tensors(28, "test")
    assert not model.training
    assert accuracy(model, x, y) >= 0.97


def test_classifier_is_cached_and_a_corrupt_cache_is_retrained(tmp_path: Path) -> None:
    os.environ["PAPERPORTS_CACHE"], old = str(tmp_path), os.environ["PAPERPORTS_CACHE"]
    try:
        first = digits_classifier(8, epochs=1)
        files = list(cache_dir().glob("digits_cnn_*size8*ep1.pt"))
        assert len(files) == 1
        again = digits_classifier(8, epochs=1)
        for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
            assert torch.equal(a, b)
        files[0].write_bytes(b"not a checkpoint")
        with pytest.warns(RuntimeWarning, match="could not be read"):
            retrained = digits_classifier(8, epochs=1)
        assert accuracy(retrained, *load_digits_tensors(8, "test")) > 0.3
    finally:
        os.environ["PAPERPORTS_CACHE"] = old


def test_a_cache_holding_nan_weights_is_retrained(tmp_path: Path) -> None:
    """It was used silently (accuracy 0.1)."""
    os.environ["PAPERPORTS_CACHE"], old = str(tmp_path), os.environ["PAPERPORTS_CACHE"]
    try:
        model = digits_classifier(8, epochs=1)
        (path,) = cache_dir().glob("digits_cnn_*size8*ep1.pt")
        state = model.state_dict()
        state["classifier.1.weight"][0, 0] = float("nan")
        torch.save(state, path)
        with pytest.warns(RuntimeWarning, match="NaN or infinite weights"):
            retrained = digits_classifier(8, epochs=1)
        assert all(torch.isfinite(v).all() for v in retrained.state_dict().values())
        assert accuracy(retrained, *load_digits_tensors(8, "test")) > 0.3
        reloaded = torch.load(path, weights_only=True)  # the cache was overwritten
        assert all(torch.isfinite(v).all() for v in reloaded.values())
    finally:
        os.environ["PAPERPORTS_CACHE"] = old
