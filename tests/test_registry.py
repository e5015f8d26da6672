from __future__ import annotations

import importlib
import sys

import pytest

from paperports._imports import MissingExtraError
from paperports.registry import METHODS, RunContext, get_method


def test_every_method_module_defines_reproduce_and_bench() -> None:
    for method in METHODS.values():
        module = importlib.import_module(method.experiments)
        assert callable(module.reproduce) and callable(module.bench)


def test_unknown_method_lists_known_ones() -> None:
    with pytest.raises(ValueError, match="jsma"):
        get_method("nope")


def test_running_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "art", None)
    with pytest.raises(MissingExtraError, match=r"paperports\[foolbox,reproduce\]"):
        get_method("jsma").reproduce(RunContext(out=tmp_path))
