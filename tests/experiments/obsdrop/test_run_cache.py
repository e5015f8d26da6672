"""Finished obsdrop runs kept on disk: read back instead of trained again, and never
reused across another budget or other code."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from paperports.experiments.obsdrop.reproduce import AgentRun, run_agents
from paperports.experiments.obsdrop.run_cache import RunCache, code_fingerprint
from paperports.registry import RunContext

# The module, not the package's ``reproduce`` function of the same name.
reproduce_module = importlib.import_module("paperports.experiments.obsdrop.reproduce")


def test_a_saved_run_reads_back_with_its_agent(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "runs", {"steps": 10}, "abc")
    kept, plain = AgentRun("obsdrop", 0.1, 0, keep=True), AgentRun("ceiling", 1.0, 0)
    assert cache.load(kept) is None
    cache.save(kept, {"return": 612.5, "dream": 5.0, "error": 0.03, "agent": b"zipped"})
    cache.save(plain, {"return": 600.0, "dream": None, "error": None, "agent": None})
    assert cache.load(kept) == {"return": 612.5, "dream": 5.0, "error": 0.03, "agent": b"zipped"}
    assert cache.load(plain) == {"return": 600.0, "dream": None, "error": None, "agent": None}
    assert not list((tmp_path / "runs").glob("*.partial"))
    # another budget, other code or another run: not the same file
    assert RunCache(tmp_path / "runs", {"steps": 20}, "abc").load(kept) is None
    assert RunCache(tmp_path / "runs", {"steps": 10}, "abd").load(kept) is None
    assert cache.load(AgentRun("obsdrop", 0.1, 1, keep=True)) is None
    assert cache.load(AgentRun("obsdrop", 0.1, 0, keep=True, critic="belief")) is None


def test_the_fingerprint_follows_the_code(tmp_path: Path) -> None:
    source = tmp_path / "reproduce.py"
    source.write_text("A = 1\n")
    before = code_fingerprint((source,))
    assert code_fingerprint((source,)) == before
    source.write_text("A = 2\n")
    assert code_fingerprint((source,)) != before


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
