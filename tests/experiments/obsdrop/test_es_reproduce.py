"""The ES reproduction: its quick budget end to end, and agents kept across runs."""

from __future__ import annotations

import json
from pathlib import Path

from paperports.experiments.obsdrop.es_reproduce import EsBudget, es_agent, main


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
    # a second run finds every agent finished: nothing is trained or measured again
    saved = {path: path.read_text() for path in (out / "runs").glob("*.json")}
    assert len(saved) == 2
    assert main(["--quick", "--quiet", "--out", str(out)]) == 0
    assert {path: path.read_text() for path in (out / "runs").glob("*.json")} == saved


def test_an_agent_of_another_budget_is_trained_again(tmp_path: Path) -> None:
    small = EsBudget(1, 4, 1, 2, 256)
    first = es_agent(1.0, 0, small, tmp_path)
    assert len(first["search"]["best_per_generation"]) == 1
    longer = es_agent(1.0, 0, EsBudget(2, 4, 1, 2, 256), tmp_path)
    # the search resumed from its checkpoint: the first generation is the same one
    assert longer["search"]["best_per_generation"][:1] == first["search"]["best_per_generation"]
    assert len(longer["search"]["best_per_generation"]) == 2
