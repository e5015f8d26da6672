"""Finished runs' records on disk, read and written one way for every experiment.

A long reproduction keeps each finished run's measurements as a JSON file, so that a
reproduction that stops starts again where it was; the file names carry a hash of the code
the runs depend on, taken with :func:`code_text` so that rewording a docstring or a comment
keeps the finished runs. :func:`write_record` writes a record
whole or not at all; :func:`read_record` treats a damaged file as missing, with a warning
that names it, so the run trains again instead of the reproduction stopping.
"""

from __future__ import annotations

import ast
import hashlib
import json
import warnings
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Any

__all__ = ["code_text", "damaged", "fingerprint", "read_record", "write_record"]


def code_text(source: str) -> str:
    """``source``'s syntax tree without its docstrings (comments, line numbers and layout
    are not in the tree either): what runs, not how it is worded or formatted."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def fingerprint(
    python_files: Iterable[Path], libraries: Iterable[str], other_files: Iterable[Path] = ()
) -> str:
    """A 16-hex-digit hash of the code a run depends on: each Python file's name and
    :func:`code_text`, the bytes of ``other_files`` (C++ sources, say), and the installed
    version of each of ``libraries``, in that order."""
    digest = hashlib.sha256()
    for path in python_files:
        digest.update(path.name.encode())
        digest.update(code_text(path.read_text()).encode())
    for path in other_files:
        digest.update(path.read_bytes())
    for library in libraries:
        digest.update(f"{library}=={version(library)}".encode())
    return digest.hexdigest()[:16]


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
