"""The ES reproduction's agents: resumed, kept, and trained afresh where they must be."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperports.experiments.obsdrop.es_agents import EsBudget, es_agent, es_fingerprint


def test_an_agent_of_another_budget_resumes_its_search(tmp_path: Path) -> None:
    small = EsBudget(1, 4, 1, 2, 256)
    first = es_agent(1.0, 0, small, tmp_path)
    assert len(first["search"]["best_per_generation"]) == 1
    assert es_agent(1.0, 0, small, tmp_path) == first  # kept: not trained again
    longer = es_agent(1.0, 0, EsBudget(2, 4, 1, 2, 256), tmp_path)
    # the search resumed from its checkpoint: the first generation is the same one
    assert longer["search"]["best_per_generation"][:1] == first["search"]["best_per_generation"]
    assert len(longer["search"]["best_per_generation"]) == 2
    names = {path.name for path in tmp_path.iterdir()}
    assert names == {f"es_1.0_0_{es_fingerprint()}{ext}" for ext in (".json", ".pkl", ".zip")}


def test_a_damaged_measurement_is_measured_again(tmp_path: Path) -> None:
    budget = EsBudget(1, 4, 1, 2, 256)
    first = es_agent(1.0, 0, budget, tmp_path)
    (done,) = tmp_path.glob("*.json")
    done.write_text('{"p": 1.0, "ret')
    with pytest.warns(RuntimeWarning, match="does not hold a result"):
        again = es_agent(1.0, 0, budget, tmp_path)
    assert again["return"] == first["return"]  # the same search, from its checkpoint
