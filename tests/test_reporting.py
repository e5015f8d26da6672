from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt

from paperports.registry import METHODS
from paperports.reporting import Report, markdown_table


def test_markdown_table_formats_floats() -> None:
    assert markdown_table(["a", "b"], [[1, 0.123456]]) == "| a | b |\n|---|---|\n| 1 | 0.1235 |"


def test_report_writes_markdown_json_and_figures(tmp_path: Path) -> None:
    report = Report(METHODS["jsma"], tmp_path / "r")
    report.section("Results")
    report.table(["x"], [[1]])
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    report.figure(fig, "curve", "A line")
    report.results["x"] = 1
    report.results["m"] = [[float("nan"), 0.5]]
    path = report.write()
    md = path.read_text()
    assert "Papernot" in md and "## Results" in md and "![A line](curve.png)" in md
    assert (tmp_path / "r" / "curve.png").stat().st_size > 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    provenance = results.pop("provenance")
    assert results == {"x": 1, "m": [[None, 0.5]]}
    # where the file comes from: the command, and the commit it ran at
    assert provenance["command"] == "paperports reproduce jsma"
    assert len(provenance["commit"]) == 40 and isinstance(provenance["uncommitted_changes"], bool)
    assert provenance["paperports"] and provenance["torch"] and provenance["date"].endswith("Z")
