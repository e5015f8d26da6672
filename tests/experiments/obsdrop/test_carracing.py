"""The CarRacing experiment at its quick budget, end to end on the real environment, and
its stages kept for a resumed run."""

from __future__ import annotations

import json
from pathlib import Path

from paperports import cli
from paperports.experiments.obsdrop.carracing import QUICK


def test_the_quick_carracing_run_reports_both_routes_and_keeps_its_stages(
    tmp_path: Path,
) -> None:
    out = tmp_path / "car"
    command = ["reproduce", "obsdrop-carracing", "--quick", "--quiet", "--out", str(out)]
    assert cli.main(command) == 0
    out = out / "obsdrop-carracing"  # the CLI writes each method into its own folder
    results = json.loads((out / "results.json").read_text())["carracing"]
    assert results["budget"]["frames"] == QUICK.frames
    assert len(results["vae_losses"]) == QUICK.vae_epochs
    for p in ("0.1", "1.0"):
        for route in ("cma", "ppo"):
            measured = results["agents"][p][route]
            assert len(measured["returns"]) == QUICK.eval_episodes
            assert measured["frames"] > 0 and measured["frames_per_second"] > 0
    assert len(results["agents"]["0.1"]["probe"]["returns"]) == QUICK.eval_episodes
    assert "probe" not in results["agents"]["1.0"]  # the paper probed at 10% and 40%
    assert "CarRacing" in (out / "report.md").read_text()
    kept = {path: path.stat().st_mtime_ns for path in (out / "runs").iterdir()}
    assert len(kept) == 3  # the VAE and one file per peek probability
    assert cli.main(command) == 0
    assert {path: path.stat().st_mtime_ns for path in (out / "runs").iterdir()} == kept
