"""The ES reproduction: its quick budget end to end, and finished agents kept."""

from __future__ import annotations

import json
from pathlib import Path

from paperports.experiments.obsdrop.es_reproduce import main


def test_the_quick_es_reproduction_writes_its_report_and_reuses_finished_agents(
    tmp_path: Path,
) -> None:
    out = tmp_path / "es"
    assert main(["--quick", "--quiet", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["es"]
    assert set(results["returns"]) == {"0.1", "1.0"}
    for p in ("0.1", "1.0"):
        (value,) = results["returns"][p]
        assert 0.0 <= value <= 1000.0  # a mean return of the swing-up
        assert len(results["best_per_generation"][p][0]) == results["budget"]["generations"]
        assert results["dream_transfer"][p][0] is not None
    report = (out / "report.md").read_text()
    assert "trained by the ES" in report and "PPO route" in report
    assert (out / "return_vs_p.png").is_file()
    # a second run finds every agent finished: nothing is trained or measured again
    saved = {path: path.read_text() for path in (out / "runs").glob("*.json")}
    assert len(saved) == 2
    assert main(["--quick", "--quiet", "--out", str(out)]) == 0
    assert {path: path.read_text() for path in (out / "runs").glob("*.json")} == saved
