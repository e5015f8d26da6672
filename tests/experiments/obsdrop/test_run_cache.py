"""Finished obsdrop runs kept on disk: read back instead of trained again, and never
reused across another budget or other code."""

from __future__ import annotations

import importlib
import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import paperports.integrations.sb3
from paperports.experiments.obsdrop import agents as agents_module
from paperports.experiments.obsdrop.agents import AgentRun
from paperports.experiments.obsdrop.reproduce import run_agents
from paperports.experiments.obsdrop.run_cache import RunCache, code_fingerprint
from paperports.integrations.sb3 import ObservationalDropoutPolicy
from paperports.registry import RunContext

# The module, not the package's ``reproduce`` function of the same name.
reproduce_module = importlib.import_module("paperports.experiments.obsdrop.reproduce")


def _zip_of(*names: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.writestr(name, b"...")
    return buffer.getvalue()


def test_a_saved_run_reads_back_with_its_agent(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "runs", {"steps": 10}, "abc")
    kept, plain = AgentRun("obsdrop", 0.1, 0), AgentRun("ceiling", 1.0, 0)
    assert cache.load(kept) is None
    agent = _zip_of("data", "policy.pth", "policy.optimizer.pth")  # what SB3's save writes
    cache.save(kept, {"return": 612.5, "dream": 5.0, "error": 0.03, "agent": agent})
    cache.save(plain, {"return": 600.0, "dream": None, "error": None, "agent": None})
    assert cache.load(kept) == {"return": 612.5, "dream": 5.0, "error": 0.03, "agent": agent}
    assert cache.load(plain) == {"return": 600.0, "dream": None, "error": None, "agent": None}
    assert not list((tmp_path / "runs").glob("*.partial"))
    # another budget, other code or another run: not the same file
    assert RunCache(tmp_path / "runs", {"steps": 20}, "abc").load(kept) is None
    assert RunCache(tmp_path / "runs", {"steps": 10}, "abd").load(kept) is None
    assert cache.load(AgentRun("obsdrop", 0.1, 1)) is None
    assert cache.load(AgentRun("obsdrop", 0.1, 0, critic="belief")) is None


def test_the_fingerprint_follows_the_code(tmp_path: Path) -> None:
    source = tmp_path / "reproduce.py"
    source.write_text('def f(x):\n    """Twice x."""\n    return 2 * x\n')
    before = code_fingerprint((source,))
    assert code_fingerprint((source,)) == before
    # rewording or reformatting keeps the runs
    source.write_text('def f(x):\n    """Two x."""\n\n    return (2 * x)  # doubled\n')
    assert code_fingerprint((source,)) == before
    source.write_text('def f(x):\n    """Twice x."""\n    return 3 * x\n')
    assert code_fingerprint((source,)) != before
    # a string that is not a docstring is code
    source.write_text('def f(x):\n    x = "a"\n    return 2 * x\n')
    named = code_fingerprint((source,))
    source.write_text('def f(x):\n    x = "b"\n    return 2 * x\n')
    assert code_fingerprint((source,)) != named


def test_the_fingerprint_leaves_out_the_ray_workers_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No reproduction runs the Ray workers, so a change there keeps the finished runs; a
    change anywhere else in the sb3 integration starts them afresh."""
    package = Path(paperports.integrations.sb3.__file__).parent
    copy = tmp_path / "sb3"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(paperports.integrations.sb3, "__file__", str(copy / "__init__.py"))
    before = code_fingerprint()
    with (copy / "workers.py").open("a") as workers:
        workers.write("\nTIMEOUT = 3.0\n")
    assert code_fingerprint() == before
    with (copy / "evolution.py").open("a") as evolution:
        evolution.write("\nTIMEOUT = 3.0\n")
    assert code_fingerprint() != before


def test_run_agents_trains_only_what_the_cache_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = RunContext(tmp_path, quiet=True)
    cache = RunCache(tmp_path / "runs", {"steps": 1024}, "test")
    runs = [AgentRun("ceiling", 1.0, 0), AgentRun("ceiling", 1.0, 1)]
    first = run_agents(runs[:1], 1024, 1024, 1, ctx, cache)
    trained: list[AgentRun] = []
    real = reproduce_module.run_agent

    def counting(run: AgentRun, *args: int) -> dict[str, object]:
        trained.append(run)
        return real(run, *args)

    monkeypatch.setattr(reproduce_module, "run_agent", counting)
    both = run_agents(runs, 1024, 1024, 1, ctx, cache)
    assert trained == runs[1:]  # the first came from the cache
    assert both[0] == first[0] and both[1]["return"] is not None
    assert run_agents(runs, 1024, 1024, 1, ctx, cache) == both and trained == runs[1:]


def test_the_quick_reproduction_writes_its_report_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``reproduce(--quick)`` end to end on a tiny budget (its agents really trained): the
    report, its figures and results, every agent kept in ``runs/``; run again, it reads
    them all from there and writes the same results."""
    import json

    from sb3_contrib import RecurrentPPO

    real = reproduce_module.run_agents

    def tiny(runs: list[AgentRun], *args: object, **kwargs: object) -> object:
        _, _, _, ctx, cache = args
        return real(runs, 2048, 256, 2, ctx, cache)  # type: ignore[arg-type]

    monkeypatch.setattr(reproduce_module, "run_agents", tiny)
    ctx = RunContext(tmp_path, quick=True, quiet=True)
    path = reproduce_module.reproduce(ctx)
    text = path.read_text()
    assert "At p = 10% ours reaches" in text and "over the 2 episodes of its 1 seeds" in text
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["p10_pooled"]["episodes"] == 2
    assert {"0.1", "1.0"} <= set(results["returns"])
    # every world model probed, on the steps of its one-step error
    assert "## What the world model learned" in text
    probed = results["world_model_probe"]["p = 10%"][0]
    assert probed["error"] == pytest.approx(results["one_step_error"]["0.1"][0], rel=1e-4)
    for figure in ("return_vs_p", "model_rollout", "frames"):
        assert (tmp_path / f"{figure}.png").exists()
    agents = sorted((tmp_path / "runs").glob("obsdrop_0.1_0_*.zip"))
    assert agents and isinstance(RecurrentPPO.load(agents[0]).policy, ObservationalDropoutPolicy)
    # every agent kept: --quick trains the two of the summary (p = 10% and 100%) alone
    assert len(list((tmp_path / "runs").glob("*.zip"))) == 2
    assert len(list((tmp_path / "runs").glob("*.json"))) == 2
    assert "The ablation runs in the full budget" in text
    summary = {row["claim"]: row for row in results["summary"]}
    means = [f"{np.mean(results['returns'][p]):.0f}" for p in ("0.1", "1.0")]
    assert summary["swing-up return, p = 10% / 100%"] == {
        "claim": "swing-up return, p = 10% / 100%",
        "ours": f"{means[0]} / {means[1]}",
        "paper": f"{results['paper']['0.1']} / {results['paper']['1.0']}",
    }

    trained: list[AgentRun] = []
    monkeypatch.setattr(reproduce_module, "run_agent", lambda run, *a: trained.append(run))
    reproduce_module.reproduce(ctx)  # everything from the cache
    assert not trained
    rerun = json.loads((tmp_path / "results.json").read_text())
    rerun.pop("provenance"), results.pop("provenance")  # the date of writing differs
    assert rerun == results
    # runs are named by the agents' code, not by the report's: its wording can change
    budget = {key: results[key] for key in ("steps", "dream_steps", "episodes")}
    named = RunCache(tmp_path / "runs", budget, code_fingerprint((Path(agents_module.__file__),)))
    assert named.load(AgentRun("obsdrop", 0.1, 0)) is not None
