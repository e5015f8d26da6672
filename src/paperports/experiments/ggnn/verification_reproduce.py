"""``paperports reproduce ggnn-verification`` and ``paperports bench ggnn-verification``: the
GG-NN paper's program-verification experiment (Li et al. 2016, section 7) on generated heaps.

The paper's data set: 327 formulas over three program variables, 498 heap graphs each
(about 160,000 pairs), split 6:2:2 *by formula* (no test formula is seen in training); a
prediction counts when the predicted formula equals the true one after canonicalising the
existentials' names and the atoms' order. Its GGS-NN: 89.96%; the earlier approach of
Brockschmidt et al. (2015), hand-engineered features with a classifier per step: 89.11%.

Ours: every formula :func:`~paperports.adapters.heap_graphs.enumerate_formulas` gives over
three variables (``ls`` / ``tree`` / ``none``, up to two existentials; 423 of them), heaps
drawn by :func:`~paperports.adapters.heap_graphs.sample_heap`, the same split and measure,
the paper's model sizes and training (:mod:`paperports.experiments.ggnn.verification`), with
our typed, bidirectional ``GatedGraphConv`` and with PyG's in its place.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Batch

from paperports.adapters.heap_graphs import (
    Formula,
    Heap,
    describe,
    enumerate_formulas,
    sample_heap,
)
from paperports.benchmarking import BenchResult, BenchRow, paired_median_times
from paperports.experiments.ggnn.verification import COMPONENTS, FormulaPredictor, heap_graph
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

__all__ = ["PAPER", "Budget", "bench", "reproduce", "split_formulas"]

PAPER = {
    "ggsnn": 89.96,
    "brockschmidt_2015": 89.11,
    "formulas": 327,
    "graphs_per_formula": 498,
    "variables": 3,
}
"""The paper's section 7.5: accuracy (%) of its GGS-NN and of the earlier feature-engineered
approach, and the size of its data set."""

VARIANTS = ("ours", "pyg")


@dataclass(frozen=True)
class Budget:
    """How much data and training a run gets."""

    graphs_per_formula: int
    test_graphs_per_formula: int
    updates: int
    seeds: int


FULL = Budget(graphs_per_formula=100, test_graphs_per_formula=50, updates=4000, seeds=3)
QUICK = Budget(graphs_per_formula=8, test_graphs_per_formula=5, updates=150, seeds=1)


def split_formulas(
    formulas: list[Formula], seed: int
) -> tuple[list[Formula], list[Formula], list[Formula]]:
    """Training, validation and test formulas, 6:2:2, shuffled by ``seed``."""
    order = list(formulas)
    random.Random(seed).shuffle(order)
    a, b = int(0.6 * len(order)), int(0.8 * len(order))
    return order[:a], order[a:b], order[b:]


SIZES = {"max_segment": 4, "max_tree": 5}
"""Segment and tree sizes of the training, validation and test heaps."""
LONGER = {"max_segment": 12, "max_tree": 15}
"""Sizes of the longer test heaps: segments and trees 3x as long as any seen in training,
so that some lie beyond the 10 propagation steps' reach."""


def _heaps(
    formulas: list[Formula], per_formula: int, rng: random.Random, sizes: dict[str, int] = SIZES
) -> list[Heap]:
    segment, tree = sizes["max_segment"], sizes["max_tree"]
    return [
        sample_heap(f, rng, max_segment=segment, max_tree=tree)
        for f in formulas
        for _ in range(per_formula)
    ]


GROUP = 5
"""Heaps per program in the batch prediction: consecutive heaps of one formula."""


def _accuracy(
    model: FormulaPredictor, heaps: list[Heap], group: int | None = None
) -> tuple[float, dict[int, float]]:
    """Formula accuracy, overall and by the true number of existentials: per heap, or with
    the paper's batch prediction over ``group`` consecutive heaps of one formula (one
    formula per group, scored once)."""
    truth = [describe(h).formula for h in heaps]
    groups = None if group is None else [i // group for i in range(len(heaps))]
    predicted = model.predict(heaps, groups=groups)
    if group is not None:  # one score per group: its first heap's
        truth, predicted = truth[::group], predicted[::group]
    right = [p.canonical() == t.canonical() for p, t in zip(predicted, truth, strict=True)]
    by_exists: dict[int, list[bool]] = {}
    for t, r in zip(truth, right, strict=True):
        by_exists.setdefault(len(t.existentials), []).append(r)
    return float(np.mean(right)), {k: float(np.mean(v)) for k, v in sorted(by_exists.items())}


def _run(variant: str, seed: int, budget: Budget, ctx: RunContext) -> dict[str, Any]:
    train_f, val_f, test_f = split_formulas(enumerate_formulas(), seed)
    rng = random.Random(seed)
    train = _heaps(train_f, budget.graphs_per_formula, rng)
    val = _heaps(val_f, budget.test_graphs_per_formula, rng)
    test = _heaps(test_f, budget.test_graphs_per_formula, rng)
    longer = _heaps(test_f, budget.test_graphs_per_formula, rng, LONGER)
    torch.manual_seed(seed)
    model = FormulaPredictor(conv=variant)
    losses = model.fit(train, budget.updates, seed=seed)
    val_acc, _ = _accuracy(model, val)
    test_acc, by_exists = _accuracy(model, test)
    longer_acc, _ = _accuracy(model, longer)
    group = math.gcd(GROUP, budget.test_graphs_per_formula)  # never across two formulas
    test_batch, _ = _accuracy(model, test, group)
    longer_batch, _ = _accuracy(model, longer, group)
    steps = model.step_accuracy(test[:2000])
    longer_steps = model.step_accuracy(longer[:2000])
    ctx.log(f"ggnn-verification {variant} seed {seed}: test {test_acc:.1%}, val {val_acc:.1%}")
    return {
        "test": test_acc,
        "validation": val_acc,
        "test_by_existentials": {str(k): v for k, v in by_exists.items()},
        "longer": longer_acc,
        "test_batch": test_batch,
        "longer_batch": longer_batch,
        "longer_cells": float(np.mean([h.num_cells for h in longer])),
        "test_cells": float(np.mean([h.num_cells for h in test])),
        "steps": steps,
        "longer_steps": longer_steps,
        "final_loss": {k: float(np.mean(v[-100:])) for k, v in losses.items()},
        "formulas": [len(train_f), len(val_f), len(test_f)],
        "heaps": [len(train), len(val), len(test)],
    }


def _cell(values: list[float]) -> str:
    return f"{100 * np.mean(values):.1f} ± {100 * np.std(values):.1f}"


def reproduce(ctx: RunContext) -> Path:
    report = Report(METHODS["ggnn-verification"], ctx.out, ctx.command)
    budget = QUICK if ctx.quick else FULL
    seeds = [ctx.seed + k for k in range(budget.seeds)]
    jobs = [(v, s) for s in seeds for v in VARIANTS]
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for variant, seed in ctx.progress(jobs, desc="ggnn-verification runs", total=len(jobs)):
        runs[variant].append(_run(variant, seed, budget, ctx))
    test = {v: [r["test"] for r in runs[v]] for v in VARIANTS}
    report.finding(
        "formula accuracy on held-out formulas, %", _cell(test["ours"]), f"{PAPER['ggsnn']:.2f}"
    )
    _write(report, ctx, budget, seeds, runs)
    report.results |= {
        "budget": asdict(budget),
        "seeds": seeds,
        "paper": PAPER,
        "formulas": len(enumerate_formulas()),
        "runs": runs,
        "accuracy": {
            v: {
                "test": float(np.mean(test[v])),
                "test_std": float(np.std(test[v])),
                "longer": float(np.mean([r["longer"] for r in runs[v]])),
                "test_batch": float(np.mean([r["test_batch"] for r in runs[v]])),
                "longer_batch": float(np.mean([r["longer_batch"] for r in runs[v]])),
            }
            for v in VARIANTS
        },
    }
    return report.write()


def _write(
    report: Report,
    ctx: RunContext,
    budget: Budget,
    seeds: list[int],
    runs: dict[str, list[dict[str, Any]]],
) -> None:
    import matplotlib.pyplot as plt

    first = runs["ours"][0]
    report.section("Set-up")
    report.text(
        f"Budget: {'quick' if ctx.quick else 'full'}; seeds {seeds}. Formulas: all "
        f"{len(enumerate_formulas())} that `paperports.adapters.heap_graphs."
        "enumerate_formulas` gives over three program variables (each `none`, `tree` or the "
        "root of a list segment ending at a variable, an existential or null; up to two "
        "existentials, each where two segments meet), split 6:2:2 by formula per seed "
        f"({first['formulas'][0]} / {first['formulas'][1]} / {first['formulas'][2]}); "
        f"{budget.graphs_per_formula} training heaps per formula (segments of 1-"
        f"{SIZES['max_segment']} cells, trees of 1-{SIZES['max_tree']}), "
        f"{budget.test_graphs_per_formula} per validation and test formula. "
        f"Model: the paper's (section 7.3): one GG-NN per step of Algorithm 1, 10 "
        f"propagation steps, states of 16 for the existentials' steps and 8 for the others, "
        f"the pointer fields as edge types; each trained for {budget.updates} Adam updates "
        "on minibatches of 20 graphs with the true intermediate annotations, classes "
        "balanced in each minibatch; evaluated with its own predicted annotations. "
        "'PyG' swaps in `torch_geometric.nn.GatedGraphConv` (no field types, messages along "
        "the pointers only)."
    )
    report.text(
        f"What differs from the paper: its data set held {PAPER['formulas']} formulas with "
        f"{PAPER['graphs_per_formula']} heaps each; its exact grammar and heap generator are "
        "not published (no code for this experiment was released), so ours are rebuilt from "
        "its description (`ls`, `tree`, `none`, existentials naming shared cells), with "
        "fewer heaps per formula to fit this machine. Its batch prediction (section 7.4) is "
        f"scored on groups of {GROUP} heaps of one test formula standing for the snapshots of "
        "one program. Its nested data structures (appendix C) and its use of the formulas "
        "in a verifier are not reproduced."
    )
    report.section("Formula accuracy (%) on held-out formulas")
    rows = [
        [
            "ours (typed, both directions)" if v == "ours" else "PyG GatedGraphConv",
            _cell([r["test"] for r in runs[v]]),
            _cell([r["validation"] for r in runs[v]]),
            _cell([r["longer"] for r in runs[v]]),
            _cell([r["test_batch"] for r in runs[v]]),
            _cell([r["longer_batch"] for r in runs[v]]),
        ]
        for v in VARIANTS
    ]
    blank = ["", "", "", ""]
    rows += [
        ["paper GGS-NN", f"{PAPER['ggsnn']:.2f}", *blank],
        [
            "paper: Brockschmidt et al. (2015), hand-made features",
            f"{PAPER['brockschmidt_2015']:.2f}",
            *blank,
        ],
    ]
    report.table(
        ["model", "test", "validation", "test, longer heaps", f"test, batches of {GROUP}",
         f"longer heaps, batches of {GROUP}"],
        rows,
    )  # fmt: skip
    report.text(
        f"'Longer heaps': the test formulas again, with list segments of up to "
        f"{LONGER['max_segment']} cells and trees of up to {LONGER['max_tree']} (training: "
        f"{SIZES['max_segment']} and {SIZES['max_tree']}), {first['longer_cells']:.1f} cells "
        f"on average against {first['test_cells']:.1f}: a cell more than 10 pointers from "
        "any named node is beyond what 10 propagation steps can relate to it."
    )
    ours = 100 * float(np.mean([r["test"] for r in runs["ours"]]))
    pyg = 100 * float(np.mean([r["test"] for r in runs["pyg"]]))
    if ours >= PAPER["ggsnn"] - 2.0:
        verdict = f"at or above the paper's {PAPER['ggsnn']:.2f}% (within 2 points counts)"
    else:
        verdict = f"**below the paper's {PAPER['ggsnn']:.2f}%** (within 2 points counts)"
    saturated = ours >= 99.0 and pyg >= 99.0
    report.text(
        f"Ours {ours:.1f}%: {verdict}. The data sets are not the same, so the comparison is "
        "of kind."
        + (
            f" On this rebuilt data set the task saturates: PyG's layer, blind to the fields "
            f"and to direction, scores {pyg:.1f}% as well, so heaps of this size do not show "
            "what the paper's edge types and directions buy, and they leave none of the "
            "errors the paper's data left its model (about 10 points). Heaps larger than "
            "any trained on do: see the last column and the next section."
            if saturated
            else ""
        )
    )
    report.section("Where the errors are")
    report.text(
        "Each step's accuracy on the true annotations of the test heaps (a step is right "
        "when its class or node is; `covered` when every cell's covered-or-not is), and "
        "formula accuracy by the true number of existentials:"
    )
    names = list(COMPONENTS)
    report.table(
        ["model", "heaps", *names],
        [
            [v, heaps, *(_cell([r[key][n] for r in runs[v]]) for n in names)]
            for v in VARIANTS
            for heaps, key in (("test", "steps"), ("longer", "longer_steps"))
        ],
    )
    counts = sorted({k for r in runs["ours"] for k in r["test_by_existentials"]})
    report.table(
        ["model", *(f"{k} existentials" for k in counts)],
        [
            [v, *(_cell([r["test_by_existentials"][k] for r in runs[v]]) for k in counts)]
            for v in VARIANTS
        ],
    )
    fig, ax = plt.subplots(figsize=(5, 3))
    width = 0.35
    for i, v in enumerate(VARIANTS):
        means = [100 * np.mean([r["test_by_existentials"][k] for r in runs[v]]) for k in counts]
        ax.bar(np.arange(len(counts)) + i * width, means, width, label=v)
    ax.axhline(PAPER["ggsnn"], color="k", ls="--", lw=1, label="paper (all formulas)")
    ax.set_xticks(np.arange(len(counts)) + width / 2, [f"{k} existentials" for k in counts])
    ax.set_ylabel("formula accuracy (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
    report.figure(fig, "accuracy_by_existentials", "Held-out formula accuracy by existentials.")


# ---------------------------------------------------------------------------- bench

BENCH_HEAPS = 400


def bench(ctx: RunContext) -> BenchResult:
    """One step of each of the five GG-NNs over the same batch of heap graphs (a fixed
    amount of work: Algorithm 1's number of steps depends on what is predicted), our typed,
    bidirectional layer against PyG's ``GatedGraphConv``, paired medians."""
    rng = random.Random(ctx.seed)
    formulas = enumerate_formulas()
    heaps = [sample_heap(rng.choice(formulas), rng) for _ in range(BENCH_HEAPS)]
    batch = Batch.from_data_list([heap_graph(h) for h in heaps])
    torch.manual_seed(ctx.seed)
    ours, pyg = FormulaPredictor(conv="ours").eval(), FormulaPredictor(conv="pyg").eval()

    def five_steps(model: FormulaPredictor) -> Callable[[], None]:
        @torch.no_grad()
        def run() -> None:
            for name in COMPONENTS:
                model.models[name](
                    batch.x, batch.edge_index, batch.edge_type, batch.batch, batch.num_graphs
                )

        return run

    t_ours, t_pyg = paired_median_times(five_steps(ours), five_steps(pyg))
    ctx.log(f"  five GG-NNs on {BENCH_HEAPS} heaps: ours {t_ours:.4f} s, PyG {t_pyg:.4f} s")
    row = BenchRow(
        f"The five GG-NNs of Algorithm 1, one step each, on {BENCH_HEAPS} heap graphs "
        f"({batch.num_nodes} nodes): 3 fields x 2 directions vs PyG's GatedGraphConv (one "
        "type, one direction), s",
        t_ours,
        t_pyg,
        "s",
        "ratio <= 1.7",
        extra={"heaps": BENCH_HEAPS, "nodes": batch.num_nodes, "threads": torch.get_num_threads()},
    )
    return BenchResult("ggnn-verification", "torch_geometric.nn.GatedGraphConv", [row])
