"""The GGS-NN formula predictor of the GG-NN paper's program verification (issue 26, item 1)
and its reproduction and bench."""

from __future__ import annotations

import json
import random

import pytest
import torch
from torch_geometric.data import Batch

from paperports.adapters.heap_graphs import (
    Atom,
    Formula,
    describe,
    enumerate_formulas,
    parse_heap,
    sample_heap,
)
from paperports.experiments.ggnn import verification_reproduce
from paperports.experiments.ggnn.verification import COMPONENTS, FormulaPredictor
from paperports.registry import RunContext


def _heaps(formulas: list[Formula], per: int, seed: int) -> list:
    rng = random.Random(seed)
    return [sample_heap(f, rng) for f in formulas for _ in range(per)]


def test_components_have_the_papers_sizes_and_see_fields_as_edge_types() -> None:
    model = FormulaPredictor()
    assert set(model.models) == set(COMPONENTS)
    assert COMPONENTS["exists"].hidden == COMPONENTS["pick"].hidden == 16
    assert COMPONENTS["predicate"].hidden == COMPONENTS["end"].hidden == 8
    conv = model.models["exists"].conv
    assert conv.num_edge_types == 3 and conv.num_layers == 10
    pyg = FormulaPredictor(conv="pyg")
    assert type(pyg.models["exists"].conv).__name__ == "_UntypedConv"
    with pytest.raises(ValueError, match="conv must be"):
        FormulaPredictor(conv="dgl")


def test_examples_are_every_step_with_its_supervision() -> None:
    heap = parse_heap("0x10: next=0x20\n0x20: next=0\nx = 0x10\ny = 0x20\nz = 0")
    examples = FormulaPredictor().examples([heap])
    assert {k: len(v) for k, v in examples.items()} == {
        "exists": 1, "pick": 0, "predicate": 3, "end": 2, "covered": 3,
    }  # fmt: skip
    end = examples["end"][0]  # ls(x, y): y's cell, node 1
    assert end.valid.tolist() == [0, 1, 0]
    assert examples["covered"][0].visited.tolist() == [1, 0, 0]


def test_training_lowers_each_components_loss_and_prediction_follows_algorithm_1() -> None:
    formulas = enumerate_formulas()
    train = _heaps(formulas[::3], 2, seed=0)
    torch.manual_seed(0)  # the weights' draw, not whatever earlier tests left
    model = FormulaPredictor(num_layers=4)
    batches = {k: Batch.from_data_list(v[:200]) for k, v in model.examples(train).items()}
    with torch.no_grad():
        before = {k: float(model.loss(k, b)) for k, b in batches.items()}
    losses = model.fit(train, 120, seed=0)
    with torch.no_grad():
        after = {k: float(model.loss(k, b)) for k, b in batches.items()}
    assert all(len(v) == 120 for v in losses.values())
    assert all(after[k] < 0.7 * before[k] for k in COMPONENTS), (before, after)
    test = _heaps(formulas[1::3], 1, seed=1)
    predicted = model.predict(test)
    assert len(predicted) == len(test)
    for p in predicted:  # one atom per variable and per existential it named
        assert [a.root for a in p.atoms] == ["x", "y", "z", *p.existentials]
    truth = [describe(h).formula.canonical() for h in test]
    right = sum(p.canonical() == t for p, t in zip(predicted, truth, strict=True))
    assert right / len(test) > 0.3  # chance is far lower: 423 formulas
    steps = model.step_accuracy(test)
    assert set(steps) == set(COMPONENTS) and steps["end"] > 0.8


def test_batch_prediction_gives_one_formula_per_group_of_snapshots() -> None:
    """The paper's section 7.4: heaps of one group (one program's snapshots) get one
    formula; groups of one heap each are the single-heap prediction."""
    formulas = enumerate_formulas()
    torch.manual_seed(0)
    model = FormulaPredictor(num_layers=3)
    model.fit(_heaps(formulas[::4], 2, seed=0), 40, seed=0)
    heaps = _heaps(formulas[1:60:6], 3, seed=2)  # 3 consecutive heaps per formula
    groups = [i // 3 for i in range(len(heaps))]
    batched = [f.canonical() for f in model.predict(heaps, groups=groups)]
    for g in range(len(heaps) // 3):
        assert len(set(batched[3 * g : 3 * g + 3])) == 1
    single = [f.canonical() for f in model.predict(heaps)]
    alone = [f.canonical() for f in model.predict(heaps, groups=list(range(len(heaps))))]
    assert alone == single
    with pytest.raises(ValueError, match="one id per heap"):
        model.predict(heaps, groups=[0])
    with pytest.raises(ValueError, match="max_existentials"):
        model.predict(heaps, max_existentials=-1)
    for bad in ({"updates": 0}, {"updates": 5, "batch_size": 0}, {"updates": 5, "lr": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad.keys() - {"updates"}), "updates")):
            model.fit(heaps, **bad)  # type: ignore[arg-type]


def test_prediction_of_a_heap_without_lists_reads_each_variable() -> None:
    model = FormulaPredictor(num_layers=2)
    rng = random.Random(0)
    heap = sample_heap(Formula((), (Atom("none", "x"), Atom("tree", "y"), Atom("none", "z"))), rng)
    [formula] = model.predict([heap])
    assert [a.root for a in formula.atoms][:3] == ["x", "y", "z"]
    assert model.predict([]) == []


def test_the_split_is_by_formula_and_fixed_by_the_seed() -> None:
    formulas = enumerate_formulas()
    train, val, test = verification_reproduce.split_formulas(formulas, 0)
    assert len(train) + len(val) + len(test) == len(formulas)
    assert len(train) == int(0.6 * len(formulas))
    keys = [{f.canonical() for f in part} for part in (train, val, test)]
    assert not (keys[0] & keys[2]) and not (keys[0] & keys[1])
    assert verification_reproduce.split_formulas(formulas, 0)[2] == test
    assert verification_reproduce.split_formulas(formulas, 1)[2] != test


def test_the_quick_reproduction_reports_both_layers_beside_the_paper(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(
        verification_reproduce,
        "QUICK",
        verification_reproduce.Budget(
            graphs_per_formula=2, test_graphs_per_formula=1, updates=20, seeds=1
        ),
    )
    path = verification_reproduce.reproduce(RunContext(tmp_path, quick=True, quiet=True))
    results = json.loads((path.parent / "results.json").read_text())
    assert set(results["accuracy"]) == {"ours", "pyg"}
    run = results["runs"]["ours"][0]
    assert run["formulas"] == [253, 85, 85] and run["heaps"] == [506, 85, 85]
    assert 0.0 <= run["test"] <= 1.0 and set(run["steps"]) == set(COMPONENTS)
    assert 0.0 <= run["test_batch"] <= 1.0 and 0.0 <= run["longer_batch"] <= 1.0
    text = path.read_text()
    assert "89.96" in text and "89.11" in text and "PyG GatedGraphConv" in text


def test_the_bench_times_the_same_work_for_both_layers(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(verification_reproduce, "BENCH_HEAPS", 12)
    result = verification_reproduce.bench(RunContext(tmp_path, quiet=True))
    [row] = result.rows
    assert row.ours > 0 and row.anchor > 0 and row.extra["heaps"] == 12
    assert row.extra["nodes"] > 12  # each heap has its cells and null
    assert result.anchor == "torch_geometric.nn.GatedGraphConv"
