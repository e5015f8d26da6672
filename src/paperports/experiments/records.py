"""Finished runs' records on disk, read and written one way for every experiment.

A long reproduction keeps each finished run's measurements as a JSON file, so that a
reproduction that stops starts again where it was. :func:`write_record` writes a record
whole or not at all; :func:`read_record` treats a damaged file as missing, with a warning
that names it, so the run trains again instead of the reproduction stopping.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

__all__ = ["damaged", "read_record", "write_record"]


def damaged(path: Path, problem: str) -> None:
    """Warn that the file at ``path`` is damaged (``problem``) and its run trains again."""
    warnings.warn(f"{path}: {problem}; the run trains again", RuntimeWarning, stacklevel=3)


def read_record(path: Path) -> dict[str, Any] | None:
    """The JSON object a finished run wrote to ``path``; ``None`` if there is none, or if
    the file is damaged (a ``RuntimeWarning`` names it and what is wrong, and the run
    trains again)."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        damaged(path, f"it does not hold a result ({type(err).__name__}: {err})")
        return None
    if not isinstance(record, dict):
        damaged(path, f"it does not hold a result (a JSON {type(record).__name__})")
        return None
    return record


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path`` whole or not at all: to a ``.partial`` file first, then
    renamed into place, so a killed process leaves no half result."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=1))
    partial.replace(path)
