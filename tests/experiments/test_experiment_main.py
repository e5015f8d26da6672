"""The shared command line of ``python -m paperports.experiments.<method>.<experiment>``."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from paperports.experiments import experiment_main
from paperports.registry import RunContext


def test_the_options_reach_the_run_and_the_command_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[RunContext, argparse.Namespace]] = []

    def run(ctx: RunContext, args: argparse.Namespace) -> Path:
        seen.append((ctx, args))
        return ctx.out / "report.md"

    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--generations", type=int, default=None)

    argv = ["--quick", "--seed", "3", "--out", str(tmp_path), "--generations", "7"]
    assert experiment_main("paperports.experiments.x.y", "doc", run, "runs/y", argv, extra) == 0
    ((ctx, args),) = seen
    assert (ctx.out, ctx.quick, ctx.seed, ctx.quiet) == (tmp_path, True, 3, False)
    assert args.generations == 7
    assert ctx.command == "python -m paperports.experiments.x.y " + " ".join(argv)
    assert capsys.readouterr().out.strip() == str(tmp_path / "report.md")
    seen.clear()
    experiment_main("paperports.experiments.x.y", "doc", run, "runs/y", [])
    assert seen[0][0].out == Path("runs/y") and not seen[0][0].quick
    with pytest.raises(SystemExit):
        experiment_main("paperports.experiments.x.y", "doc", run, "runs/y", ["--seed", "one"])
