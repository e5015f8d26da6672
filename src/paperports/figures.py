r"""Figures in README.md and docs/, read back from the committed results files.

Every measured figure the documentation states is written as a marker that names the
results file and the value in it::

    <!--fig @bnlstm-bench /rows/[name=inference forward]/ratio .2f-->1.96<!--/fig-->

Rendered, only ``1.96`` shows (HTML comments are invisible on GitHub and in MkDocs). The
marker says where the figure comes from, and :func:`check` recomputes it from that file:

- **source**: a results file, relative to the repository root, or an alias: ``@<method>``
  is ``docs/reports/<method>/results.json`` (written by ``paperports reproduce <method>
  --out docs/reports``), ``@<method>-bench`` is ``benchmarks/results/<method>.json``
  (written by ``paperports bench <method>``);
- **path**: ``/``-separated keys into the JSON (``[a key, with spaces]`` in brackets). A
  list item is selected by its index or by ``[key=value]`` (the item whose ``key`` is
  ``value``); ``@mean``, ``@std`` (population), ``@min``, ``@max``, ``@sum`` and ``@len``
  reduce a list of numbers, ``@last`` takes its last item and ``@finals`` the last item of
  each of its lists (the final value of each seed's curve); ``*100`` and ``*-1`` scale a
  number (a percentage stored as a fraction, a sign);
- **format**: a Python format spec (``.1f``, ``.2%``, ``,.0f``); without one the value is
  shown as it is.

Numbers that are settings rather than results (a peek probability of 10%, a learning
rate) are declared once per page, ``<!--settings: 10% 0.001-->``; :func:`unmarked` finds
the figure-like numbers of a page's prose (decimals, percentages, ratios such as ``2.1x``)
that are neither in a marker nor declared, which the tests keep at zero.

``python -m paperports.figures`` checks every page; ``--write`` rewrites each marker's text
from its file (after a rerun), so the documentation follows the results, not the other way.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Figure",
    "Problem",
    "check",
    "find",
    "malformed",
    "pages",
    "render",
    "resolve",
    "unmarked",
    "write",
]

ROOT = Path(__file__).resolve().parents[2]

MARKER = re.compile(
    r"<!--fig\s+(?P<source>\S+)\s+(?P<path>(?:/(?:\[[^\]]*\]|[^\s/\[<>])*)+?)"
    r"(?:\s+(?P<format>(?:(?!-->)\S)+))?\s*-->(?P<text>(?:(?!<!--).)*)<!--/fig-->",
    re.S,
)
SETTINGS = re.compile(r"<!--settings:(?P<tokens>.*?)-->", re.S)
_REDUCERS: dict[str, Callable[[list[Any]], Any]] = {
    "@mean": statistics.fmean,
    "@std": statistics.pstdev,
    "@min": min,
    "@max": max,
    "@sum": sum,
    "@len": len,
    "@last": lambda values: values[-1],
    "@finals": lambda values: [v[-1] for v in values],
}


@dataclass(frozen=True)
class Figure:
    """One marker: where it is, what it reads, and the text the page shows."""

    page: Path
    line: int
    source: str
    path: str
    format: str | None
    text: str
    span: tuple[int, int]
    """The text's span in the page."""


@dataclass(frozen=True)
class Problem:
    page: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.message}"


def source_file(source: str, root: Path = ROOT) -> Path:
    """The results file a marker's source names."""
    if source.startswith("@"):
        name = source[1:]
        if name.endswith("-bench"):
            return root / "benchmarks" / "results" / f"{name.removesuffix('-bench')}.json"
        return root / "docs" / "reports" / name / "results.json"
    return root / source


def resolve(data: Any, path: str) -> Any:
    """The value at ``path`` (see the module docstring) in the JSON ``data``."""
    value = data
    for segment in re.findall(r"\[[^\]]*\]|[^/]+", path):
        if segment in _REDUCERS:
            if not isinstance(value, list) or not value:
                raise KeyError(f"{segment} needs a non-empty list, got {value!r}")
            value = _REDUCERS[segment](value)
        elif segment.startswith("*"):
            value = value * float(segment[1:])
        elif (select := re.fullmatch(r"\[(\w+)=(.*)\]", segment)) is not None:
            key, wanted = select.groups()
            if not isinstance(value, list):
                raise KeyError(f"{segment} selects from a list, got {type(value).__name__}")
            hits = [item for item in value if str(item.get(key)) == wanted]
            if len(hits) != 1:
                raise KeyError(f"{segment} matches {len(hits)} items")
            value = hits[0]
        elif segment.startswith("[") and segment.endswith("]"):
            key = segment[1:-1]  # a key with spaces or slashes in it
            if not isinstance(value, dict) or key not in value:
                raise KeyError(f"no key {key!r}")
            value = value[key]
        elif isinstance(value, list):
            value = value[int(segment)]
        elif isinstance(value, dict):
            if segment not in value:
                raise KeyError(f"no key {segment!r} (keys: {', '.join(map(str, value))[:200]})")
            value = value[segment]
        else:
            raise KeyError(f"cannot read {segment!r} of a {type(value).__name__}")
    return value


def render(value: Any, spec: str | None) -> str:
    """``value`` as the page shows it."""
    if spec is None:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return format(value, spec)


def find(page: Path, text: str | None = None) -> list[Figure]:
    """The markers of ``page``."""
    text = page.read_text() if text is None else text
    return [
        Figure(
            page=page,
            line=text.count("\n", 0, m.start()) + 1,
            source=m["source"],
            path=m["path"],
            format=m["format"],
            text=m["text"],
            span=m.span("text"),
        )
        for m in MARKER.finditer(text)
    ]


def _value(figure: Figure, cache: dict[Path, Any], root: Path) -> str:
    file = source_file(figure.source, root)
    if file not in cache:
        cache[file] = json.loads(file.read_text())
    return render(resolve(cache[file], figure.path), figure.format)


def malformed(text: str) -> list[int]:
    """The lines of ``<!--fig`` openings that no marker starts at: a marker the checker
    would otherwise skip (and the unmarked-number check does not look inside), such as a
    format with a space in it."""
    starts = {m.start() for m in MARKER.finditer(text)}
    code = re.compile(r"```.*?```|`[^`\n]*`", re.S)  # the syntax shown as code is no marker
    prose = code.sub(lambda m: " " * len(m.group(0)), text)
    return [
        text.count("\n", 0, m.start()) + 1
        for m in re.finditer(r"<!--fig\b", prose)
        if m.start() not in starts
    ]


def check(paths: Iterable[Path], root: Path = ROOT) -> list[Problem]:
    """Every marker of ``paths`` whose text is not its file's value, or cannot be read;
    and every figure-like number outside a marker that the page does not declare a
    setting."""
    problems: list[Problem] = []
    cache: dict[Path, Any] = {}
    for page in paths:
        text = page.read_text()
        for figure in find(page, text):
            try:
                value = _value(figure, cache, root)
            except (OSError, KeyError, ValueError, IndexError, TypeError) as err:
                problems.append(Problem(page, figure.line, f"{figure.source}{figure.path}: {err}"))
                continue
            if value != figure.text:
                problems.append(
                    Problem(
                        page,
                        figure.line,
                        f"shows {figure.text!r}, {figure.source}{figure.path} holds {value!r}",
                    )
                )
        for line in malformed(text):
            problems.append(
                Problem(page, line, "a <!--fig ...--> marker that cannot be read (see the module)")
            )
        for line, token in unmarked(text):
            problems.append(
                Problem(
                    page,
                    line,
                    f"{token!r} is not read from a results file (mark it, or declare it a setting)",
                )
            )
    return problems


def write(paths: Iterable[Path], root: Path = ROOT) -> int:
    """Rewrite every marker's text from its file; the number of markers changed."""
    changed = 0
    cache: dict[Path, Any] = {}
    for page in paths:
        text = page.read_text()
        out, last = [], 0
        for figure in find(page, text):
            value = _value(figure, cache, root)
            out += [text[last : figure.span[0]], value]
            last = figure.span[1]
            changed += value != figure.text
        out.append(text[last:])
        page.write_text("".join(out))
    return changed


# What is not prose: code, math, comments, link targets, and each marker as a whole.
_NOT_PROSE = [
    re.compile(r"```.*?```", re.S),
    re.compile(r"<!--fig.*?<!--/fig-->", re.S),
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"`[^`\n]*`"),
    re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S),
    re.compile(r"\]\([^)]*\)"),
]
FIGURE_LIKE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?(?:%|x\b)|\d[\d,]*\.\d+)(?![\d.]*\d)")
"""Decimals, percentages and ratios (``2.1x``); versions (``2.13.0``) are not."""


def unmarked(text: str) -> list[tuple[int, str]]:
    """``(line, token)`` for each figure-like number of ``text``'s prose that is neither in
    a marker nor among the page's declared settings."""
    settings = {t for m in SETTINGS.finditer(text) for t in m["tokens"].split()}
    blanked = text
    for pattern in _NOT_PROSE:
        blanked = pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), blanked)
    return [
        (blanked.count("\n", 0, m.start()) + 1, m.group(1))
        for m in FIGURE_LIKE.finditer(blanked)
        if m.group(1) not in settings
    ]


def pages(root: Path = ROOT) -> list[Path]:
    """The pages whose figures must come from results files: README.md, CHANGELOG.md
    (which the docs include) and docs/, less the reports that ``paperports reproduce``
    writes beside their results (generated from the same run)."""
    docs = sorted((root / "docs").rglob("*.md"))
    return [
        root / "README.md",
        root / "CHANGELOG.md",
        *(p for p in docs if p.name != "report.md"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m paperports.figures",
        description="Check (or rewrite) the figures of README.md and docs/ against the "
        "committed results files.",
    )
    parser.add_argument("pages", nargs="*", type=Path, help="pages (default: all)")
    parser.add_argument("--write", action="store_true", help="rewrite each marker's text")
    args = parser.parse_args(argv)
    targets = args.pages or pages()
    if args.write:
        print(f"{write(targets)} figures updated")
    problems = check(targets)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
