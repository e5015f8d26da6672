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


def test_findings_head_the_report_and_go_to_the_results(tmp_path: Path) -> None:
    report = Report(METHODS["jsma"], tmp_path)
    report.section("Setup")
    report.finding("success", "95.00%", "97.10% (MNIST)")
    report.finding("distortion", "3.1%", "4.02%")
    md = report.write().read_text()
    assert md.index("## Summary") < md.index("## Setup")
    assert "| claim | ours | paper |" in md and "| success | 95.00% | 97.10% (MNIST) |" in md
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["summary"] == [
        {"claim": "success", "ours": "95.00%", "paper": "97.10% (MNIST)"},
        {"claim": "distortion", "ours": "3.1%", "paper": "4.02%"},
    ]
    # a report without findings has no summary section
    plain = Report(METHODS["jsma"], tmp_path / "plain")
    assert "## Summary" not in plain.write().read_text()
    assert "summary" not in json.loads((tmp_path / "plain" / "results.json").read_text())


def test_provenance_flags_changes_to_the_code_not_to_the_outputs(tmp_path: Path) -> None:
    """A run writes its own report files into the checkout (docs/reports/...): those must
    not mark it as run on uncommitted code; a change under src/ must."""
    import subprocess

    from paperports.reporting import provenance

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "src" / "code.py").write_text("x = 1\n")
    (tmp_path / "docs" / "results.json").write_text("{}\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    clean = provenance("cmd", root=tmp_path)
    assert clean["commit"] == git("rev-parse", "HEAD") and clean["uncommitted_changes"] is False
    (tmp_path / "docs" / "results.json").write_text('{"new": 1}\n')  # the run's own output
    (tmp_path / "docs" / "plot.png").write_bytes(b"png")
    assert provenance("cmd", root=tmp_path)["uncommitted_changes"] is False
    (tmp_path / "src" / "new.py").write_text("y = 2\n")  # untracked code counts
    assert provenance("cmd", root=tmp_path)["uncommitted_changes"] is True
    (tmp_path / "src" / "new.py").unlink()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert provenance("cmd", root=tmp_path)["uncommitted_changes"] is True
