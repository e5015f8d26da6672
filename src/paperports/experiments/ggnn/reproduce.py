"""``paperports reproduce ggnn``: the paper's bAbI and sequence-task tables on generated data.

For every task and training-set size, GG-NN / GGS-NN with our :class:`GatedGraphConv` and
the same model with ``torch_geometric.nn.GatedGraphConv`` in its place (one edge type,
messages along the edges only), over several seeds; accuracy on fresh generated stories.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paperports.adapters.babi import TASKS
from paperports.experiments.ggnn.common import Settings, accuracy_after_training
from paperports.experiments.ggnn.sequence_baselines import baseline_accuracy
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

# The paper's results (Li et al. 2016, tables 1-3), with their training-set sizes.
PAPER = {
    "babi4": {50: 100.0},
    "babi15": {50: 100.0},
    "babi16": {50: 100.0},
    "babi18": {50: 100.0},
    "babi19": {50: 71.1, 100: 92.5, 250: 99.0},
    "shortest_path": {50: 100.0},
    "eulerian": {50: 100.0},
}
PAPER_BASELINE_BABI19 = {"RNN": 24.7, "LSTM": 28.2}
PAPER_BASELINES = (
    f"bAbI 19 with 950 training examples: RNN {PAPER_BASELINE_BABI19['RNN']}%, LSTM "
    f"{PAPER_BASELINE_BABI19['LSTM']}%"
)
BASELINE_EXAMPLES = 950
QUICK_UPDATES = 300


# The rows of the summary: (claim, tasks, training examples).
FINDINGS = [
    ("bAbI 4 / 15 / 16 / 18", ("babi4", "babi15", "babi16", "babi18"), 50),
    ("bAbI 19 (GGS-NN)", ("babi19",), 250),
    ("shortest path / Eulerian (GGS-NN)", ("shortest_path", "eulerian"), 50),
]


def _sizes(task: str, quick: bool) -> list[int]:
    """Training-set sizes: the paper's (and smaller ones, for the curve); ``quick`` keeps
    the size of the summary's row alone."""
    if quick:
        return [next(size for _, tasks, size in FINDINGS if task in tasks)]
    if task == "babi19":
        return [50, 100, 250]
    if task in ("shortest_path", "eulerian"):
        return [20, 50]
    return [10, 25, 50]


def reproduce(ctx: RunContext) -> Path:
    report = Report(METHODS["ggnn"], ctx.out, ctx.command)
    settings = Settings(updates=QUICK_UPDATES if ctx.quick else 1000)
    seeds = [ctx.seed + k for k in range(1 if ctx.quick else 4)]
    results: dict[str, dict[str, dict[int, list[float]]]] = {}
    runs = [
        (task, size, variant)
        for task in TASKS
        for size in _sizes(task, ctx.quick)
        for variant in ("ours", "pyg")
    ]
    for task, size, variant in ctx.progress(runs, desc="ggnn runs", total=len(runs)):
        accuracies = [accuracy_after_training(task, size, s, variant, settings) for s in seeds]
        results.setdefault(task, {}).setdefault(variant, {})[size] = accuracies
    _write(report, ctx, settings, seeds, results)
    _findings(report, results)
    if ctx.quick:  # the baselines need 950 examples each: the full budget's
        report.section(f"Sequence baselines with {BASELINE_EXAMPLES} training examples")
        report.text("Not run with `--quick`; `paperports reproduce ggnn` runs them.")
        return report.write()
    baselines = {
        task: {
            kind: [baseline_accuracy(task, kind, BASELINE_EXAMPLES, s, 1000) for s in seeds]
            for kind in ("RNN", "LSTM")
        }
        for task in ctx.progress(list(TASKS), desc="sequence baselines", total=len(TASKS))
    }
    _write_baselines(report, baselines, results)
    return report.write()


def _findings(report: Report, results: dict[str, dict[str, dict[int, list[float]]]]) -> None:
    """The summary's rows: our accuracy beside the paper's, task by task."""
    for claim, tasks, size in FINDINGS:
        ours = " / ".join(f"{100 * np.mean(results[t]['ours'][size]):.1f}" for t in tasks)
        paper = " / ".join(f"{PAPER[t][size]:.1f}" for t in tasks)
        report.finding(f"{claim} %, {size} examples", ours, paper)


def _write_baselines(
    report: Report,
    baselines: dict[str, dict[str, list[float]]],
    results: dict[str, dict[str, dict[int, list[float]]]],
) -> None:
    kinds = list(next(iter(baselines.values())))
    report.section(f"Sequence baselines with {BASELINE_EXAMPLES} training examples")
    report.text(
        "An embedding and an `nn.RNN` / `nn.LSTM` (32 units) read each story as symbols "
        "(`source relation target` per fact, then the question's arguments) and predict the "
        "answer from the last state, one head per output; 1,000 Adam updates of 32 stories. "
        f"The paper's figures for bAbI 19 are RNN {PAPER_BASELINE_BABI19['RNN']}% and LSTM "
        f"{PAPER_BASELINE_BABI19['LSTM']}%."
    )
    rows = [
        [task, *(_cell(by_kind[kind]) for kind in kinds)] for task, by_kind in baselines.items()
    ]
    report.table(["task", *kinds], rows)
    # which baselines come close to GG-NN with far fewer examples: said from the numbers
    close = []
    for task, by_kind in baselines.items():
        ours = results[task]["ours"]
        fewest = min(ours)
        best = max(by_kind, key=lambda kind: float(np.mean(by_kind[kind])))
        if np.mean(by_kind[best]) >= np.mean(ours[fewest]) - 0.05:
            close.append(
                f"{task} ({best} {100 * np.mean(by_kind[best]):.1f}% from "
                f"{BASELINE_EXAMPLES} examples; GG-NN {100 * np.mean(ours[fewest]):.1f}% from "
                f"{fewest})"
            )
    report.text(
        "Within 5 points of GG-NN at its smallest training set: "
        + ("; ".join(close) if close else "none")
        + ". Elsewhere the baselines stay further below, with 950 examples."
    )
    report.results["sequence_baselines"] = {
        "examples": BASELINE_EXAMPLES,
        "accuracy": baselines,
        "paper_babi19": PAPER_BASELINE_BABI19,
    }


def _cell(values: list[float]) -> str:
    return f"{100 * np.mean(values):.1f} ± {100 * np.std(values):.1f}"


def _write(
    report: Report,
    ctx: RunContext,
    settings: Settings,
    seeds: list[int],
    results: dict[str, dict[str, dict[int, list[float]]]],
) -> None:
    import matplotlib.pyplot as plt

    report.section("Set-up")
    report.text(
        f"Budget: {'quick' if ctx.quick else 'full'}; seeds {seeds}; {settings.updates} Adam "
        f"updates (lr {settings.lr}, batch {settings.batch_size}) per model; state size "
        f"{settings.hidden}, {settings.steps} propagation steps; accuracy on "
        f"{settings.test_size} fresh generated stories per seed (mean ± standard deviation "
        "over seeds). One model per task and question type (question type 0 of each task: "
        "for bAbI 4, 'What is north of X?'). The data are generated offline by "
        "`paperports.adapters.babi` in the paper's graph encoding; they follow the bAbI "
        "tasks' logic, not their exact text, so the figures are comparable in kind, not "
        "digit for digit. Sequence tasks (bAbI 19, shortest path, Eulerian circuit) are "
        "GGS-NNs trained with the true intermediate annotations and evaluated without them; "
        "a sequence counts only when every output is right. The shortest paths (2-4 edges) "
        "and circuits (4-6 nodes) vary in length from story to story, as the paper's: the "
        "model's sequence ends at its first output of the goal (or of the circuit's start), "
        "and counts when it is the answer, length included. 'PyG' is the same model with "
        "`torch_geometric.nn.GatedGraphConv` as the propagation model: one edge type, "
        "messages only along the edges."
    )
    report.section("Accuracy (%) against the paper")
    rows = []
    for task, by_variant in results.items():
        for size in sorted(by_variant["ours"]):
            paper = PAPER[task].get(size)
            rows.append(
                [
                    f"{task} ({TASKS[task].name})",
                    size,
                    "" if paper is None else f"{paper:.1f}",
                    _cell(by_variant["ours"][size]),
                    _cell(by_variant["pyg"][size]),
                ]
            )
    report.table(
        ["task", "training examples", "paper GG-NN / GGS-NN", "ours", "PyG GatedGraphConv"],
        rows,
    )
    verdicts = []
    for task, by_variant in results.items():
        for size, paper in PAPER[task].items():
            if size not in by_variant["ours"]:
                continue
            ours = 100 * float(np.mean(by_variant["ours"][size]))
            status = "reproduces" if ours >= paper - 2.0 else "**does not reproduce**"
            verdicts.append(
                f"- {task}, {size} examples: ours {ours:.1f}% vs paper {paper:.1f}%: {status}."
            )
    report.text(
        "Within 2 points of the paper counts as reproduced:\n\n"
        + "\n".join(verdicts)
        + f"\n\nThe paper's sequence baselines, for scale: {PAPER_BASELINES}; ours are in the "
        "last section."
    )
    report.text(
        "What the paper's additions buy: PyG's layer cannot tell edge types apart and passes "
        "messages only along the edges. Where the answer needs a relation read backwards "
        "(bAbI 4's inverse relations, bAbI 16's colour of a same-species peer, bAbI 18's "
        "sizes) or needs to tell two relations apart, it fails; where the graph is "
        "undirected with one edge type (the Eulerian circuit, whose edges are listed both "
        "ways) or the answer lies along the edges (bAbI 15), it does as well."
    )
    fig, axes = plt.subplots(1, len(results), figsize=(3.0 * len(results), 3.0), sharey=True)
    for ax, (task, by_variant) in zip(axes, results.items(), strict=True):
        for variant, style in (("ours", "-o"), ("pyg", "--s")):
            sizes = sorted(by_variant[variant])
            means = [100 * np.mean(by_variant[variant][s]) for s in sizes]
            ax.plot(sizes, means, style, label="ours" if variant == "ours" else "PyG conv")
        paper_sizes = sorted(PAPER[task])
        ax.plot(paper_sizes, [PAPER[task][s] for s in paper_sizes], "k*", label="paper")
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("training examples")
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("accuracy (%)")
    axes[0].legend(fontsize=7)
    report.figure(fig, "accuracy_vs_examples", "Accuracy against the number of training examples.")
    report.results |= {
        "settings": {
            "updates": settings.updates,
            "hidden": settings.hidden,
            "steps": settings.steps,
            "test_size": settings.test_size,
            "seeds": seeds,
        },
        "accuracy": {
            task: {v: {str(s): a for s, a in by_size.items()} for v, by_size in by_variant.items()}
            for task, by_variant in results.items()
        },
        "paper": {task: {str(s): v for s, v in p.items()} for task, p in PAPER.items()},
    }
