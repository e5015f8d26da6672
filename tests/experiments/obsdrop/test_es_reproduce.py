"""The ES reproduction: its quick budget end to end, and finished agents kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paperports.experiments.obsdrop.es_reproduce import main, reproduce_es
from paperports.registry import RunContext


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One quick reproduction in this process, which both tests read (it is most of their
    time)."""
    out = tmp_path_factory.mktemp("es")
    assert main(["--quick", "--quiet", "--out", str(out)]) == 0
    return out


def test_the_quick_es_reproduction_writes_its_report_and_reuses_finished_agents(
    quick_run: Path,
) -> None:
    out = quick_run
    results = json.loads((out / "results.json").read_text())["es"]
    assert set(results["returns"]) == {"0.1", "1.0"}
    for p in ("0.1", "1.0"):
        (value,) = results["returns"][p]
        assert 0.0 <= value <= 1000.0  # a mean return of the swing-up
        assert len(results["best_per_generation"][p][0]) == results["budget"]["generations"]
        assert results["dream_transfer"][p][0] is not None
        # the search's length: the population's mean over (up to) its last 20 generations
        (at_end,) = results["population_mean_at_end"][p]
        means = results["mean_per_generation"][p][0]
        assert at_end == pytest.approx(sum(means[-20:]) / len(means[-20:]))
    report = (out / "report.md").read_text()
    assert "trained by the ES" in report and "PPO route" in report
    assert "The search's length" in report and "20,621 generations" in report
    assert (out / "return_vs_p.png").is_file()
    # a second run finds every agent finished: nothing is trained or measured again
    saved = {path: path.read_text() for path in (out / "runs").glob("*.json")}
    assert len(saved) == 2
    assert main(["--quick", "--quiet", "--out", str(out)]) == 0
    assert {path: path.read_text() for path in (out / "runs").glob("*.json")} == saved


def test_agents_trained_in_worker_processes_are_the_agents_trained_here(
    tmp_path: Path, quick_run: Path
) -> None:
    """`--jobs 2` trains the quick budget's two agents at once, each on one thread as here."""
    here, workers = quick_run, tmp_path / "workers"
    assert main(["--quick", "--quiet", "--out", str(workers), "--jobs", "2"]) == 0
    for key in ("returns", "dream_transfer", "one_step_error", "best_per_generation"):
        assert (
            json.loads((workers / "results.json").read_text())["es"][key]
            == json.loads((here / "results.json").read_text())["es"][key]
        ), key


@pytest.mark.parametrize("option", ["--jobs", "--generations"])
def test_counts_of_zero_are_refused_not_read_as_the_default(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--generations 0`` once ran the default 3 (quick) or 200 generations: a zero is
    refused by the option's name, on the command line and through the function."""
    with pytest.raises(SystemExit):
        main(["--quick", "--quiet", "--out", str(tmp_path), option, "0"])
    assert f"argument {option}: expected a whole number >= 1, got '0'" in capsys.readouterr().err
    context = RunContext(tmp_path, quick=True, quiet=True)
    keyword = option.removeprefix("--")
    with pytest.raises(ValueError, match=f"{keyword} must be an integer >= 1"):
        reproduce_es(context, **{keyword: 0})
    assert not (tmp_path / "runs").exists()  # refused before anything ran
