"""The real `paperports reproduce jsma --quick`, end to end (about a minute on 2 cores)."""

from __future__ import annotations

import json
from pathlib import Path

from paperports import cli


def test_quick_reproduction_writes_a_report_beside_the_papers_figures(tmp_path: Path) -> None:
    assert cli.main(["reproduce", "jsma", "--quick", "--quiet", "--out", str(tmp_path)]) == 0
    out = tmp_path / "jsma"
    md = (out / "report.md").read_text()
    for png in ["success_vs_budget", "success", "hardness", "adversarial_distance", "grid"]:
        assert (out / f"{png}.png").stat().st_size > 1000
    res = json.loads((out / "results.json").read_text())
    # the report's table puts each attack's figures, as results.json has them, beside the
    # paper's
    section_28 = md.split("## Success and distortion (28x28)")[1].split("\n## ")[0]
    rows = {
        line.split(" | ")[0].lstrip("| "): line for line in section_28.splitlines() if " | " in line
    }
    paper = res["paper"]
    assert f"| {paper['success_rate']:.2%} |" in rows["paper (pairs, logits), MNIST"]
    assert f"| {paper['mean_l0_fraction']:.2%} |" in rows["paper (pairs, logits), MNIST"]
    for name, run in res["runs_28"].items():
        assert f"| {run['success_rate']:.2%} |" in rows[name], name
        assert f"| {run['mean_l0_fraction_successful']:.2%} |" in rows[name], name
        assert name.startswith("ART") or 0.0 <= run["fallback_step_share"] <= 1.0
    default = res["runs_28"]["pairs, probabilities (default)"]
    art = res["runs_28"]["ART SaliencyMapMethod"]
    assert default["attacks"] == 20 * 9
    assert default["success_rate"] >= 0.9
    assert default["mean_l0_fraction_successful"] <= 0.08
    # the default must serve users at least as well as ART on the same attacks
    assert default["success_rate"] >= art["success_rate"]
    assert default["mean_l0_fraction_successful"] <= art["mean_l0_fraction_successful"]
    assert set(res["runs_28"]) == {  # --quick leaves the single-feature modes out
        "pairs, probabilities (default)",
        "pairs, logits (the paper's rule)",
        "ART SaliencyMapMethod",
    }
    # the summary that `paperports reproduce` ends with: these runs beside the paper
    summary = {row["claim"]: row for row in res["summary"]}
    default_row = summary["success at mean L0, default attack"]
    assert default_row["ours"] == (
        f"{default['success_rate']:.2%} at {default['mean_l0_fraction_successful']:.2%}"
    )
    assert default_row["paper"].startswith(f"{paper['success_rate']:.2%} at ")
    assert md.index("## Summary") < md.index("## Setup")
    hardness = res["hardness"]
    assert (len(hardness) == 10 and hardness[0][0] is None) or hardness[0][0] != hardness[0][0]
    # the set-ups that separate data, network and fallback, with the variants beside JSMA
    assert set(res["setups"]) == {"small CNN, smooth digits", "LeNet, sharp digits"}  # --quick
    section = md.split("## Why the paper's rule falls short here")[1].split("\n## ")[0]
    for name, setup in res["setups"].items():
        assert f"| {name} | {setup['accuracy']:.2%} |" in section
        assert set(setup["runs"]) == {
            "JSMA, logits (the paper's rule)",
            "WJSMA",
            "TJSMA",
            "JSMA, probabilities (our default)",
        }
        for rule, run in setup["runs"].items():
            row = f"| {name} | {rule} | {run['success_rate']:.2%} | "
            assert row + f"{run['mean_l0_fraction_successful']:.2%} |" in section, row
            curve = run["curve"]
            assert curve["epsilons"][0] == 0 and curve["epsilons"][-1] == 113
            assert curve["success"][-1] == run["success_rate"]  # 113: the whole budget
    sharp = res["setups"]["LeNet, sharp digits"]
    assert sharp["zero_fraction"] > 0.7 > res["setups"]["small CNN, smooth digits"]["zero_fraction"]
    # the main set-up's JSMA runs are the main table's, not run twice
    main = res["setups"]["small CNN, smooth digits"]["runs"]
    assert (
        main["JSMA, logits (the paper's rule)"]
        == res["runs_28"]["pairs, logits (the paper's rule)"]
    )
    assert (out / "robustness_curve.png").stat().st_size > 1000
    assert "does **not** reproduce it." in section or "reproduces the paper's figure." in section
