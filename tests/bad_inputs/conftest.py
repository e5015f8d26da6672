"""The bad-input suite: every public entry point, grouped by the class of mistake.

Each case is a call that must be refused, with the words its message must contain (the
argument's name, what is expected). :func:`assert_refused` checks three things: the error
is a ``ValueError`` or ``TypeError`` (or the file error named), not a ``RuntimeError``,
``IndexError`` or bare ``AssertionError`` from deep inside torch or a host library; it is
raised by paperports' own code, before the computation reaches the host library; and its
message names what was wrong.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import paperports

PACKAGE = Path(paperports.__file__).resolve().parent
REFUSALS = (ValueError, TypeError)


def case(
    case_id: str,
    call: Callable[[], Any],
    *words: str,
    error: type[BaseException] | tuple[type[BaseException], ...] = REFUSALS,
) -> Any:
    """One bad input: ``call`` must raise ``error`` with every one of ``words``."""
    return pytest.param(call, words, error, id=case_id)


def assert_refused(
    call: Callable[[], Any],
    words: tuple[str, ...],
    error: type[BaseException] | tuple[type[BaseException], ...] = REFUSALS,
) -> None:
    with pytest.raises(error) as info:
        call()
    raised_in = Path(traceback.extract_tb(info.value.__traceback__)[-1].filename).resolve()
    assert PACKAGE in raised_in.parents, (
        f"refused by {raised_in}, not by paperports' own checks: {info.value!r}"
    )
    message = str(info.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"the message does not say {missing}: {message!r}"
