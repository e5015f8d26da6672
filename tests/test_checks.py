"""The one mechanism every plugin checks its arguments with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from paperports._checks import (
    DtypeError,
    check_batch_for_statistics,
    check_bool,
    check_choice,
    check_file,
    check_float,
    check_floating_tensor,
    check_index_tensor,
    check_int,
    check_mask,
    check_sequence_of,
    values_known,
)


@pytest.mark.parametrize("value", [3, np.int64(3), torch.tensor(3)])
def test_integers_pass_in_every_form(value: object) -> None:
    assert check_int("n", value, minimum=1) == 3


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (1.5, TypeError, r"Who: n must be an integer >= 1, got 1.5 \(float\)"),
        (2.0, TypeError, "must be an integer"),  # a float count is a mistake even if whole
        (True, TypeError, r"got True \(bool\)"),
        ("3", TypeError, "must be an integer"),
        (0, ValueError, r"Who: n must be an integer >= 1, got 0"),
        (11, ValueError, r"must be an integer in \[1, 10\], got 11"),
    ],
)
def test_integers_are_checked_for_type_then_range(value: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        check_int("n", value, minimum=1, maximum=10 if value == 11 else None, who="Who")


@pytest.mark.parametrize(
    ("value", "kwargs", "error", "match"),
    [
        (float("nan"), {}, ValueError, "p must be a finite number, got nan"),
        (float("inf"), {"minimum": 0.0}, ValueError, "finite number >= 0.0"),
        (0.0, {"minimum": 0.0, "open_low": True}, ValueError, "> 0.0"),
        (1.0, {"maximum": 1.0, "open_high": True}, ValueError, "< 1.0"),
        (-0.1, {"minimum": 0.0, "maximum": 1.0}, ValueError, r"in \[0.0, 1.0\]"),
        ("0.1", {}, TypeError, "must be a real number"),
        (False, {}, TypeError, "must be a real number"),
    ],
)
def test_floats_are_finite_and_within_their_bounds(
    value: object, kwargs: dict, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        check_float("p", value, **kwargs)


def test_floats_pass_and_are_converted() -> None:
    assert check_float("p", 1, minimum=0.0) == 1.0
    assert isinstance(check_float("p", np.float32(0.5)), float)
    assert check_float("p", torch.tensor(0.25)) == 0.25


def test_flags_choices_and_sequences() -> None:
    assert check_bool("b", np.bool_(True)) is True
    with pytest.raises(TypeError, match="b must be True or False, got 1"):
        check_bool("b", 1)
    assert check_choice("gru", "paper", ("paper", "torch")) == "paper"
    with pytest.raises(ValueError, match="gru must be one of 'paper', 'torch'; got 'x'"):
        check_choice("gru", "x", ("paper", "torch"))
    with pytest.raises(ValueError, match="must be one of"):
        check_choice("gru", ["unhashable"], {"paper"})
    with pytest.raises(TypeError, match="docs must be a list or tuple, got str"):
        check_sequence_of("docs", "one string", str)
    with pytest.raises(TypeError, match=r"docs\[1\] must be a str, got int"):
        check_sequence_of("docs", ["a", 2], str)


def test_a_dtype_error_is_both_a_type_and_a_value_error() -> None:
    """Code written for nn.LSTM catches ValueError; ours raises a TypeError subclass too."""
    with pytest.raises(DtypeError) as info:
        check_floating_tensor("input", torch.zeros(2, dtype=torch.float64), dtype=torch.float32)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert "input has dtype torch.float64" in message and "torch.float32" in message
    assert "input.to(torch.float32)" in message and "model.to(torch.float64)" in message
    with pytest.raises(DtypeError, match=r"floating-point tensor, got dtype torch\.int64"):
        check_floating_tensor("input", torch.zeros(2, dtype=torch.long))
    with pytest.raises(TypeError, match=r"must be a torch\.Tensor, got"):
        check_floating_tensor("input", [1.0, 2.0])


def test_index_tensors_are_integer_and_in_range() -> None:
    check_index_tensor("edge_index", torch.tensor([0, 3]), high=4)
    with pytest.raises(DtypeError, match="must hold integers"):
        check_index_tensor("edge_index", torch.tensor([0.0, 3.0]), high=4)
    with pytest.raises(
        ValueError, match=r"must lie in \[0, 4\) \(nodes\); got values in \[-1, 3\]"
    ):
        check_index_tensor("edge_index", torch.tensor([-1, 3]), high=4, what="nodes")
    check_index_tensor("edge_index", torch.empty(0, dtype=torch.long), high=0)


def test_value_checks_skip_meta_tensors_and_compiled_graphs() -> None:
    meta = torch.empty(3, dtype=torch.long, device="meta")
    assert not values_known(meta)
    check_index_tensor("ids", meta, high=1)  # cannot read values: skipped, no error
    assert values_known(torch.zeros(1))

    @torch.compile(fullgraph=True, backend="eager")
    def compiled(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if values_known() else x

    assert torch.equal(compiled(torch.zeros(1)), torch.zeros(1))


def test_masks_and_batches_for_statistics() -> None:
    with pytest.raises(DtypeError, match="mask must be a boolean tensor"):
        check_mask("mask", torch.ones(2, 3), (2, 3))
    with pytest.raises(ValueError, match=r"mask must have shape \(2, 3\), got \(3, 2\)"):
        check_mask("mask", torch.ones(3, 2, dtype=torch.bool), (2, 3))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        check_batch_for_statistics(1, (5, 1, 3), who="X")
    check_batch_for_statistics(0, (5, 0, 3), who="X")


def test_files_exist_and_are_not_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"path: .*empty.txt is empty \(0 bytes\)"):
        check_file("path", empty)
    with pytest.raises(FileNotFoundError, match="path: no file at"):
        check_file("path", tmp_path / "missing.txt")
    full = tmp_path / "full.txt"
    full.write_text("x")
    assert check_file("path", str(full)) == full
