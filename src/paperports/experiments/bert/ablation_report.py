"""The report of the BERT ablation (:mod:`paperports.experiments.bert.ablation`): our table
beside the paper's Table 5, a plot of the scores, and what they show.

Kept apart from the runs so that rewording the report keeps a stopped run's finished
pre-trainings and fine-tunings (their key covers the code that trains, not this module).
``paperports reproduce bert --out <out>`` writes this section into its report;
``python -m paperports.experiments.bert.ablation --out <out>/bert-ablation`` writes it alone,
as a report of its own. Both keep the runs under ``<out>/bert-ablation/runs``, so either
resumes what the other left (the committed ones: ``docs/reports/bert-ablation``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperports.experiments.bert.ablation import (
    FULL,
    PAPER_COLUMN,
    PAPER_TABLE5,
    QUICK,
    TASKS,
    VARIANTS,
    run_ablation,
)
from paperports.experiments.trainer_runs import quiet_transformers
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

__all__ = ["ABLATION_FOLDER", "plot_ablation", "reproduce_ablation", "write_ablation"]

ABLATION_FOLDER = "bert-ablation"
"""The folder, beside ``paperports reproduce bert``'s own, that holds the ablation's runs
(and the report of ``python -m paperports.experiments.bert.ablation``)."""

_SHORT = {"span": "description spans", "name": "name spans", "pair": "sentence pairs"}


def _cell(values: Sequence[float]) -> str:
    return f"{100 * np.mean(values):.1f} ± {100 * np.std(values):.1f}"


def write_ablation(report: Report, results: dict[str, Any], quick: bool) -> None:
    """The ablation's section: our table beside the paper's Table 5, and what it shows."""
    budget, scores, examples = results["budget"], results["scores"], results["examples"]
    report.section("What bidirectional pre-training buys: the paper's Table 5, scaled down")
    report.text(
        f"Budget: {'quick' if quick else 'full'}. Same-size encoders ({budget['num_layers']} "
        f"layer{'s' if budget['num_layers'] != 1 else ''} of {budget['hidden_size']}), each "
        f"pre-trained for {budget['pretrain_steps']:,}"
        f" `Trainer` steps of {budget['batch_size']} pairs of up to {budget['max_length']} "
        f"tokens from the docstrings of {', '.join(results['pretrain_packages'])} "
        f"({results['pretraining_pairs']:,} pairs); fine-tuned for {budget['finetune_steps']}"
        " steps on three tasks from the numpy-style docstrings of "
        f"{', '.join(results['downstream_packages'])}, which pre-training never saw, split "
        "by docstring (train / test examples: "
        + "; ".join(f"{TASKS[t]}: {examples[t][0]:,} / {examples[t][1]:,}" for t in TASKS)
        + f"); seeds {results['seeds']} (fine-tuning; one pre-training per variant), "
        "mean ± standard deviation. The left-to-right rows use the same encoder with a causal "
        "mask, in pre-training and fine-tuning; '+ BiLSTM' adds a fresh bidirectional LSTM on "
        "top for fine-tuning. The two span tasks read the same `Parameters` sections: asked "
        "for a parameter's description by its name, the span starts right after the name, "
        "so reading to the left finds it; asked for the name by the description, the span "
        "comes before the words that identify it, so only reading to the right does."
    )
    rows = []
    for variant, name in VARIANTS.items():
        paper = PAPER_TABLE5.get(variant, {})
        rows.append(
            [
                name,
                *(_cell(scores[variant][t]) for t in TASKS),
                f"{paper['SQuAD F1']:.1f}" if paper else "",
                f"{paper['MRPC']:.1f}" if paper else "",
            ]
        )
    headers = ["pre-training", "description span F1", "name span F1", "pairs acc."]
    report.table([*headers, "SQuAD F1 (paper)", "MRPC acc. (paper)"], rows)
    pre = results["pretraining"]
    nsp = pre["mlm_nsp"]
    if "heldout_nsp_accuracy" in nsp:
        learned = nsp["heldout_nsp_accuracy"] > nsp["nsp_majority"] + 0.02
        report.text(
            "Pre-training, on held-out pairs: masked-token accuracy "
            f"{100 * nsp['heldout_token_accuracy']:.1f}% (MLM + NSP), "
            f"{100 * pre['mlm'].get('heldout_token_accuracy', float('nan')):.1f}% (MLM only); "
            "next-token accuracy of the left-to-right LM "
            f"{100 * pre['ltr'].get('heldout_token_accuracy', float('nan')):.1f}%; "
            f"next-sentence accuracy {100 * nsp['heldout_nsp_accuracy']:.1f}% against "
            f"{100 * nsp['nsp_majority']:.1f}% for the majority answer: "
            + ("learned." if learned else "**not learned** above the majority answer.")
        )
    mean = {v: {t: float(np.mean(scores[v][t])) for t in TASKS} for v in VARIANTS}
    spread = {v: {t: float(np.std(scores[v][t])) for t in TASKS} for v in VARIANTS}
    gaps = {t: mean["mlm_nsp"][t] - mean["ltr"][t] for t in TASKS}
    # one seed has no spread to judge a gap against: nothing is beyond it
    several = len(results["seeds"]) > 1
    clear = {t: several and abs(gaps[t]) > spread["mlm_nsp"][t] + spread["ltr"][t] for t in TASKS}
    beyond = {t: clear[t] and gaps[t] > 0 for t in TASKS}
    # a gap beyond the spread either way says so: "not beyond" would hide a clear reversal
    versus = {
        t: ("above" if gaps[t] > 0 else "below") + ", beyond the seeds' spread"
        if clear[t]
        else "within the seeds' spread"
        for t in TASKS
    }
    # the paper's ordering, judged on each span task: bidirectional above left-to-right beyond
    # the seeds' spread on it and on the pairs, the span task's gap the larger
    ordering = {
        t: beyond[t] and beyond["pair"] and gaps[t] > gaps["pair"] for t in TASKS if t != "pair"
    }
    report.text(
        "Bidirectional (MLM + NSP) minus left-to-right: "
        + "; ".join(
            f"{_SHORT[t]} {100 * gaps[t]:+.1f} points" + (f" ({versus[t]})" if several else "")
            for t in TASKS
        )
        + ("" if several else " (one seed: no spread to judge the gaps against)")
        + ". The paper's ordering (bidirectional above left-to-right beyond the seeds' "
        "spread, the largest gap on span extraction) "
        + "; ".join(
            f"{'appears' if ordering[t] else 'does **not** appear'} with the {_SHORT[t]}"
            for t in ordering
        )
        + "."
    )
    report.figure(
        plot_ablation(results),
        "ablation",
        "Span F1 and pair accuracy by pre-training (mean and standard deviation over the "
        "fine-tuning seeds, each seed a dot), beside the paper's Table 5.",
    )
    report.results["ablation"] = results | {
        "ordering_reproduced": ordering,
        "gap_bidirectional_minus_ltr": gaps,
    }
    for task in TASKS:
        report.finding(
            f"{TASKS[task]}: MLM + NSP / left-to-right",
            f"{100 * mean['mlm_nsp'][task]:.1f} / {100 * mean['ltr'][task]:.1f}",
            f"{PAPER_TABLE5['mlm_nsp'][PAPER_COLUMN[task]]} / "
            f"{PAPER_TABLE5['ltr'][PAPER_COLUMN[task]]} ({PAPER_COLUMN[task]})",
        )


def reproduce_ablation(ctx: RunContext) -> Path:
    """Run the ablation at ``ctx``'s budget and write its report into ``ctx.out``."""
    report = Report(METHODS["bert"], ctx.out, ctx.command)
    with quiet_transformers():
        results = run_ablation(ctx, QUICK if ctx.quick else FULL)
    write_ablation(report, results, ctx.quick)
    return report.write()


def plot_ablation(results: dict[str, Any]) -> Any:
    """Each variant's scores on the tasks (mean and standard deviation over the seeds,
    each seed a dot) beside the paper's Table 5 columns they stand for."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TASKS) + 1, figsize=(4.3 * (len(TASKS) + 1), 3.6))
    names = list(VARIANTS)
    x = np.arange(len(names))
    for ax, task in zip(axes[:-1], TASKS, strict=True):
        values = [100 * np.asarray(results["scores"][v][task]) for v in names]
        ax.bar(x, [v.mean() for v in values], yerr=[v.std() for v in values], capsize=3,
               color="tab:blue", alpha=0.6)  # fmt: skip
        for i, v in enumerate(values):
            ax.plot(np.full(len(v), i), v, "k.", markersize=4)
        ax.set_title(f"ours: {TASKS[task]}", fontsize=9)
    paper = [v for v in names if v in PAPER_TABLE5]
    width = 0.38
    for k, column in enumerate(sorted(set(PAPER_COLUMN.values()), reverse=True)):
        axes[-1].bar(np.arange(len(paper)) + (k - 0.5) * width,
                     [PAPER_TABLE5[v][column] for v in paper], width, label=column)  # fmt: skip
    axes[-1].set_title("paper, Table 5 (BERT-BASE)", fontsize=9)
    axes[-1].set_ylim(60, 95)
    axes[-1].legend(fontsize=8)
    for ax, shown in zip(axes, [*(names for _ in TASKS), paper], strict=True):
        ax.set_xticks(np.arange(len(shown)), [VARIANTS[v] for v in shown], rotation=30,
                      ha="right", fontsize=8)  # fmt: skip
    axes[0].set_ylabel("%")
    fig.tight_layout()
    return fig
