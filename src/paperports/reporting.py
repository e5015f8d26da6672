"""The report that ``paperports reproduce`` writes: ``report.md``, ``results.json`` and plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paperports.registry import Method

__all__ = ["Report", "markdown_table", "provenance"]


def provenance(command: str, root: Path | None = None) -> dict[str, Any]:
    """Where a results file comes from: the command that wrote it, the commit it ran at
    (and whether the code, ``src/`` and ``pyproject.toml``, differed from it: the run's own
    output files and the docs do not count), the date and the versions."""
    import datetime
    import platform
    import subprocess

    import torch

    import paperports

    root = Path(__file__).resolve().parents[2] if root is None else root  # the checkout

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", "src", "pyproject.toml")
    return {
        "command": command,
        "commit": commit,
        "uncommitted_changes": None if status is None else bool(status),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "paperports": paperports.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table; floats are shown with 4 significant digits."""

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


class Report:
    """Collects a method's results and writes them beside the paper's.

    Args:
        method: The registered method (its title and citation head the report).
        out: The folder to write into; created if missing.
        command: The command that runs it, recorded in ``results.json`` with the commit
            (default: ``paperports reproduce <method>``).
    """

    def __init__(self, method: Method, out: Path, command: str | None = None) -> None:
        self.method = method
        self.out = out
        self.command = command or f"paperports reproduce {method.name}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.parts: list[str] = []
        self.results: dict[str, Any] = {}
        self.findings: list[dict[str, str]] = []

    def finding(self, claim: str, ours: str, paper: str) -> None:
        """One row of the summary: a claim of the paper, what this run measured and the
        paper's figure. The rows head ``report.md``, go to ``results.json`` as
        ``"summary"``, and ``paperports reproduce`` ends with them."""
        self.findings.append({"claim": claim, "ours": ours, "paper": paper})

    def text(self, markdown: str) -> None:
        """Add a paragraph of markdown."""
        self.parts.append(markdown.strip())

    def section(self, title: str) -> None:
        """Start a section."""
        self.parts.append(f"## {title}")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Add a table."""
        self.parts.append(markdown_table(headers, rows))

    def figure(self, fig: Any, name: str, caption: str) -> Path:
        """Save a matplotlib figure as ``<name>.png`` and reference it in the report."""
        import matplotlib.pyplot as plt

        path = self.out / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        self.parts.append(f"![{caption}]({path.name})\n\n*{caption}*")
        return path

    def write(self) -> Path:
        """Write ``report.md`` and ``results.json``; return the path of ``report.md``."""
        head = f"# {self.method.title}: reproduction report\n\nPaper: {self.method.citation}"
        summary = []
        if self.findings:
            rows = [[f["claim"], f["ours"], f["paper"]] for f in self.findings]
            summary = ["## Summary", markdown_table(["claim", "ours", "paper"], rows)]
        md = "\n\n".join([head, *summary, *self.parts]) + "\n"
        path = self.out / "report.md"
        path.write_text(md)
        results = {"provenance": provenance(self.command), **self.results}
        if self.findings:
            results["summary"] = self.findings
        data = json.dumps(_strict(results), indent=2, allow_nan=False)
        (self.out / "results.json").write_text(data + "\n")
        return path


def _strict(value: Any) -> Any:
    """JSON-ready: NaN and infinities become ``null``, numpy scalars plain numbers."""
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
