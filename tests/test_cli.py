from __future__ import annotations

import json
from pathlib import Path

import pytest

from paperports import cli
from paperports.benchmarking import BenchResult, BenchRow
from paperports.registry import METHODS, Method, RunContext


@pytest.mark.parametrize("argv", [["--help"], ["reproduce", "--help"], ["bench", "--help"]])
def test_help_lists_the_landed_methods(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in METHODS:
        assert name in out


def test_unknown_method_is_rejected_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["reproduce", "nosuchmethod"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


class _Fake:
    """A method module stand-in: registered in METHODS for one test, runs real CLI code."""

    @staticmethod
    def reproduce(ctx: RunContext) -> Path:
        if ctx.seed == 13:
            raise RuntimeError("seed 13 is unlucky")
        ctx.out.mkdir(parents=True, exist_ok=True)
        path = ctx.out / "report.md"
        path.write_text(f"quick={ctx.quick} seed={ctx.seed} jobs={ctx.jobs} [{ctx.command}]")
        summary = [
            {"claim": "accuracy", "ours": f"{90 + ctx.seed}%", "paper": "99% (MNIST)"},
            {"claim": "a much longer claim", "ours": "1.5", "paper": "1.2"},
        ]
        (ctx.out / "results.json").write_text(json.dumps({"summary": summary}))
        return path

    @staticmethod
    def bench(ctx: RunContext) -> BenchResult:
        return BenchResult("fake", "anchor", [BenchRow("step", 2.0, 4.0, "s", "ratio <= 1.0")])


@pytest.fixture
def fake_method(monkeypatch: pytest.MonkeyPatch) -> str:
    import sys
    import types

    mod = types.ModuleType("paperports_fake_experiments")
    mod.reproduce = _Fake.reproduce  # type: ignore[attr-defined]
    mod.bench = _Fake.bench  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    method = Method("fake", "A fake method", "Nobody (2026)", ("foolbox",), (), mod.__name__)
    monkeypatch.setitem(METHODS, "fake", method)
    return "fake"


def test_reproduce_writes_under_out_and_passes_options(fake_method: str, tmp_path: Path) -> None:
    assert (
        cli.main(["reproduce", fake_method, "--quick", "--seed", "3", "--out", str(tmp_path)]) == 0
    )
    out = f"--out {tmp_path}"  # the command recorded in the results: the one that reruns it
    assert (tmp_path / "fake" / "report.md").read_text() == (
        f"quick=True seed=3 jobs=1 [paperports reproduce fake --quick --seed 3 {out}]"
    )
    assert cli.main(["reproduce", fake_method, "--jobs", "4", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "fake" / "report.md").read_text() == (
        f"quick=False seed=0 jobs=4 [paperports reproduce fake --jobs 4 {out}]"
    )


def test_reproduce_ends_with_the_summary_of_each_report(
    fake_method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["reproduce", fake_method, "--seed", "4", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("What each report found") :].splitlines()
    assert table[2].split() == ["method", "claim", "ours", "paper"]
    # the rows of results.json's "summary", the method named once, columns aligned
    assert table[3].split() == ["fake", "accuracy", "94%", "99%", "(MNIST)"]
    assert table[4].split() == ["a", "much", "longer", "claim", "1.5", "1.2"]
    assert table[3].index("94%") == table[4].index("1.5") == table[2].index("ours")
    assert table[-1].split() == ["fake", str(tmp_path / "fake" / "report.md")]


@pytest.mark.parametrize("jobs", ["0", "-2", "two"])
def test_jobs_must_be_a_positive_whole_number(
    jobs: str, fake_method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["reproduce", fake_method, "--jobs", jobs])
    assert info.value.code == 2
    assert f"expected a whole number >= 1, got '{jobs}'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        RunContext(out=Path("unused"), jobs=0)


def test_errors_are_one_line_without_debug(
    fake_method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["reproduce", fake_method, "--seed", "13", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().count("\n") == 0
    assert "seed 13 is unlucky" in err and "Traceback" not in err
    with pytest.raises(RuntimeError, match="unlucky"):
        cli.main(["reproduce", fake_method, "--seed", "13", "--debug", "--out", str(tmp_path)])


def test_bench_prints_ratio_and_writes_json(
    fake_method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["bench", fake_method, "--out", str(tmp_path)]) == 0
    assert "0.500" in capsys.readouterr().out
    data = json.loads((tmp_path / "fake.json").read_text())
    assert data["rows"][0]["ratio"] == 0.5
    assert data["machine"]["torch_threads"] >= 1
    assert data["provenance"]["command"] == f"paperports bench fake --out {tmp_path}"
    assert len(data["provenance"]["commit"]) == 40
