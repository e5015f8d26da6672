"""One place for argument checks, so that every plugin refuses bad input the same way.

Each helper raises before any computation, with a message that names the argument, what is
expected and what was given, prefixed by who asks (``"BNLSTM: hidden_size must be an
integer >= 1, got 1.5 (float)"``). Wrong types raise :class:`TypeError`, wrong values
:class:`ValueError`, as Python and torch do; a tensor of the wrong dtype raises
:class:`DtypeError`, which is both (``nn.LSTM`` raises a ``ValueError`` there, PyG and
transformers leave it to torch's ``RuntimeError``).

Checks that read tensor values (ranges, finiteness) are skipped where the values cannot be
read: on the meta device (models are built there first), under ``torch.compile`` tracing and
under TorchScript. Shape and dtype checks always run.
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "DtypeError",
    "check_batch_for_statistics",
    "check_bool",
    "check_choice",
    "check_file",
    "check_float",
    "check_floating_tensor",
    "check_index_tensor",
    "check_int",
    "check_mask",
    "check_probability",
    "check_sequence_of",
    "values_known",
    "whole_number",
]

T = TypeVar("T")


class DtypeError(TypeError, ValueError):
    """A tensor of the wrong dtype. Both a ``TypeError`` and a ``ValueError``, so that code
    written for ``torch.nn.LSTM`` (which raises ``ValueError``) catches it too."""


def _prefix(who: str | None) -> str:
    return f"{who}: " if who else ""


def _shown(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    who: str | None = None,
) -> int:
    """``value`` as an ``int`` within ``[minimum, maximum]``.

    Python and numpy integers and 0-d integer tensors pass; ``bool`` and floats do not (a
    count of ``1.5``, or even ``2.0``, is a mistake: torch's modules refuse them too).
    """
    if (
        isinstance(value, Tensor)
        and value.dim() == 0
        and not value.is_floating_point()
        and value.dtype != torch.bool
        and values_known(value)
    ):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{_prefix(who)}{name} must be an integer{_range(minimum, maximum)}, "
            f"got {_shown(value)}"
        )
    number = int(value)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(
            f"{_prefix(who)}{name} must be an integer{_range(minimum, maximum)}, got {number}"
        )
    return number


def _range(
    minimum: float | None,
    maximum: float | None,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> str:
    if minimum is not None and maximum is not None:
        return f" in {'(' if open_low else '['}{minimum}, {maximum}{')' if open_high else ']'}"
    if minimum is not None:
        return f" {'>' if open_low else '>='} {minimum}"
    if maximum is not None:
        return f" {'<' if open_high else '<='} {maximum}"
    return ""


def check_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_low: bool = False,
    open_high: bool = False,
    who: str | None = None,
) -> float:
    """``value`` as a finite ``float`` within its bounds (``open_low`` / ``open_high``
    exclude the bound itself). Integers pass; ``bool``, strings and NaN do not."""
    if isinstance(value, Tensor) and value.dim() == 0 and values_known(value):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{_prefix(who)}{name} must be a real number"
            f"{_range(minimum, maximum, open_low=open_low, open_high=open_high)}, "
            f"got {_shown(value)}"
        )
    number = float(value)
    low_bad = minimum is not None and (number <= minimum if open_low else number < minimum)
    high_bad = maximum is not None and (number >= maximum if open_high else number > maximum)
    if not math.isfinite(number) or low_bad or high_bad:
        raise ValueError(
            f"{_prefix(who)}{name} must be a finite number"
            f"{_range(minimum, maximum, open_low=open_low, open_high=open_high)}, got {number}"
        )
    return number


def check_probability(name: str, value: Any, *, who: str | None = None) -> float:
    """A probability in ``[0, 1]`` (a dropout rate, a masking rate)."""
    return check_float(name, value, minimum=0.0, maximum=1.0, who=who)


def check_bool(name: str, value: Any, *, who: str | None = None) -> bool:
    """A flag: ``True`` or ``False`` (numpy booleans too), nothing that merely looks true."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{_prefix(who)}{name} must be True or False, got {_shown(value)}")
    return bool(value)


def check_choice(name: str, value: T, choices: Collection[T], *, who: str | None = None) -> T:
    """One of ``choices``."""
    try:
        ok = value in choices
    except TypeError:  # unhashable value against a set
        ok = False
    if not ok:
        listed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{_prefix(who)}{name} must be one of {listed}; got {value!r}")
    return value


def values_known(tensor: Tensor | None = None) -> bool:
    """Whether a check may read tensor values here: not under ``torch.compile`` tracing or
    TorchScript, and (for ``tensor``) not on the meta device or a fake tensor."""
    if torch.compiler.is_compiling() or torch.jit.is_scripting():  # type: ignore[attr-defined]
        return False
    if tensor is None:
        return True
    return not (tensor.is_meta or type(tensor).__name__ == "FakeTensor")


def check_floating_tensor(
    name: str,
    tensor: Any,
    *,
    dtype: torch.dtype | None = None,
    who: str | None = None,
    module: str = "model",
) -> Tensor:
    """A floating-point tensor, of ``dtype`` when given (the module's parameters' dtype).

    Raises :class:`DtypeError` naming the argument, its dtype and the module's, with both
    ways out, as ``torch.nn.LSTM`` does.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{_prefix(who)}{name} must be a torch.Tensor, got {_shown(tensor)}")
    if dtype is not None and tensor.dtype != dtype:
        raise DtypeError(
            f"{_prefix(who)}{name} has dtype {tensor.dtype}, but the {module}'s parameters are "
            f"{dtype}. Convert the input ({name}.to({dtype})) or the {module} "
            f"({module}.to({tensor.dtype}))"
            + ("" if tensor.is_floating_point() else "; the input must be floating-point")
        )
    if not tensor.is_floating_point():
        raise DtypeError(
            f"{_prefix(who)}{name} must be a floating-point tensor, got dtype {tensor.dtype}"
        )
    return tensor


def check_index_tensor(
    name: str,
    tensor: Any,
    *,
    low: int | None = 0,
    high: int | None = None,
    what: str = "",
    who: str | None = None,
) -> Tensor:
    """An integer tensor whose values lie in ``[low, high)`` (``what`` says where ``high``
    comes from, e.g. ``"the number of nodes"``). Value checks are skipped where values are
    not known (see :func:`values_known`)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{_prefix(who)}{name} must be a torch.Tensor, got {_shown(tensor)}")
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
        raise DtypeError(f"{_prefix(who)}{name} must hold integers, got dtype {tensor.dtype}")
    if tensor.numel() == 0 or not values_known(tensor):
        return tensor
    lo, hi = int(tensor.min()), int(tensor.max())
    if (low is not None and lo < low) or (high is not None and hi >= high):
        bounds = f"[{low if low is not None else '-inf'}, {high if high is not None else 'inf'})"
        where = f" ({what})" if what else ""
        raise ValueError(
            f"{_prefix(who)}{name} must lie in {bounds}{where}; got values in [{lo}, {hi}]"
        )
    return tensor


def check_file(name: str, path: Any, *, who: str | None = None) -> Path:
    """An existing, non-empty file."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"{_prefix(who)}{name} must be a path, got {_shown(path)}")
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{_prefix(who)}{name}: no file at {file}")
    if file.stat().st_size == 0:
        raise ValueError(f"{_prefix(who)}{name}: {file} is empty (0 bytes)")
    return file


def check_sequence_of(
    name: str, value: Any, item_type: type | tuple[type, ...], *, who: str | None = None
) -> Sequence[Any]:
    """A list or tuple whose items are all ``item_type`` (a ``str`` is not a sequence of
    strings here, though Python would iterate it character by character)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{_prefix(who)}{name} must be a list or tuple, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, item_type):
            names = (
                item_type.__name__
                if isinstance(item_type, type)
                else " or ".join(t.__name__ for t in item_type)
            )
            raise TypeError(
                f"{_prefix(who)}{name}[{i}] must be a {names}, got {type(item).__name__}"
            )
    return value


def check_mask(name: str, mask: Any, shape: tuple[int, ...], *, who: str | None = None) -> Tensor:
    """A boolean tensor of ``shape``."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{_prefix(who)}{name} must be a torch.Tensor, got {_shown(mask)}")
    if mask.dtype != torch.bool:
        raise DtypeError(f"{_prefix(who)}{name} must be a boolean tensor, got dtype {mask.dtype}")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(
            f"{_prefix(who)}{name} must have shape {tuple(shape)}, got {tuple(mask.shape)}"
        )
    return mask


def check_batch_for_statistics(batch: int, shape: tuple[int, ...], *, who: str | None) -> None:
    """Training's batch statistics need two values per feature; ``nn.BatchNorm`` raises the
    same (a batch of 0 is fine: it gives an empty result)."""
    if batch == 1:
        raise ValueError(
            f"{_prefix(who)}Expected more than 1 value per channel when training, got input "
            f"size {torch.Size(shape)}: batch statistics need a batch of at least two "
            "sequences (or evaluate with .eval())"
        )


def whole_number(minimum: int) -> Callable[[str], int]:
    """An ``argparse`` type: a whole number of at least ``minimum``, refused by argparse
    (naming the option) otherwise, as :func:`check_int` refuses one in the API."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value

    return parse
