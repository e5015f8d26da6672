"""The GG-NN experiments on tiny budgets: both variants train on every kind of task."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch_geometric

from paperports.experiments.ggnn.common import (
    Settings,
    accuracy_after_training,
    heldout_accuracy,
    make_model,
    train_model,
)
from paperports.integrations.pyg import GGNN, GGSNN
from paperports.registry import METHODS
from paperports.reporting import Report

TINY = Settings(updates=20, test_size=40)


@pytest.mark.parametrize("task", ["babi16", "babi18", "babi19", "eulerian"])
def test_both_variants_train_and_score_each_kind_of_task(task: str) -> None:
    """Training lowers each variant's loss on every kind of output (node selection, graph
    class, class and node sequences), and the score counts right answers of the test set."""
    settings = Settings(updates=30, test_size=40)
    for variant in ("ours", "pyg"):
        model, losses = train_model(task, 10, seed=0, variant=variant, settings=settings)
        assert len(losses) == 30
        assert sum(losses[-5:]) < sum(losses[:5]), (variant, losses[:5], losses[-5:])
        accuracy = heldout_accuracy(model, task, seed=0, settings=settings)
        assert (accuracy * 40) == pytest.approx(round(accuracy * 40))  # k right of 40


def test_the_same_seed_gives_the_same_accuracy() -> None:
    first = accuracy_after_training("babi15", 10, seed=3, variant="ours", settings=TINY)
    assert accuracy_after_training("babi15", 10, seed=3, variant="ours", settings=TINY) == first


def test_pyg_variant_swaps_in_pygs_layer_and_ours_keeps_edge_types() -> None:
    ours = make_model("babi4", "ours", TINY)
    pyg = make_model("babi4", "pyg", TINY)
    assert isinstance(ours, GGNN) and isinstance(pyg, GGNN)
    assert ours.conv.num_edge_types == 4 and ours.conv.bidirectional
    assert isinstance(pyg.conv.conv, torch_geometric.nn.GatedGraphConv)
    assert isinstance(make_model("shortest_path", "pyg", TINY), GGSNN)
    with pytest.raises(ValueError, match="variant"):
        make_model("babi4", "dgl", TINY)


def test_ours_learns_babi16_where_pygs_layer_cannot() -> None:
    """Induction needs the `is` edge read backwards (species -> its other members): PyG's
    layer passes messages along edges only and sees no types."""
    settings = Settings(updates=300, test_size=200)
    ours = accuracy_after_training("babi16", 50, seed=0, variant="ours", settings=settings)
    pyg = accuracy_after_training("babi16", 50, seed=0, variant="pyg", settings=settings)
    assert ours > 0.95 and pyg < 0.7


def test_sequence_baselines_read_stories_as_symbols() -> None:
    from paperports.adapters.babi import generate_task
    from paperports.experiments.ggnn.sequence_baselines import (
        SequenceBaseline,
        baseline_accuracy,
        encode_stories,
    )

    stories = generate_task("babi19", 3, seed=0)
    tokens, answers = encode_stories(stories, num_nodes=6, num_relations=4)
    assert answers.shape == (3, 2)
    first = stories[0]
    s, r, t = first.facts[0]
    row = tokens[0][tokens[0] != 0].tolist()
    assert row[:3] == [2 + s, 2 + 6 + r, 2 + t]
    assert row[-3:] == [1, 2 + first.questions[0].args[0], 2 + first.questions[0].args[1]]
    assert SequenceBaseline("RNN", 20, 8, 4, 2)(tokens).shape == (3, 2, 4)
    with pytest.raises(ValueError, match="kind"):
        SequenceBaseline("GRU", 20, 8, 4, 2)
    # bAbI 4 (one relation to look up) is within reach of an LSTM
    assert baseline_accuracy("babi4", "LSTM", 300, seed=0, updates=300, test_size=200) > 0.6


def test_the_quick_budget_trains_each_task_at_its_summary_size_and_reports_it(
    tmp_path: Path,
) -> None:
    """--quick trains every task once, at the size of its summary row, and the summary puts
    each task's mean accuracy beside the paper's, in the rows' task order."""
    from paperports.adapters.babi import TASKS
    from paperports.experiments.ggnn.reproduce import FINDINGS, PAPER, _findings, _sizes

    quick = {task: _sizes(task, quick=True) for task in TASKS}
    assert all(len(sizes) == 1 for sizes in quick.values())
    assert {task for _, tasks, _ in FINDINGS for task in tasks} == set(TASKS)
    for task in TASKS:  # the full budget includes it, and the paper reports it
        assert quick[task][0] in _sizes(task, quick=False)
        assert quick[task][0] in PAPER[task]
    results = {
        task: {"ours": {quick[task][0]: [0.5 + 0.01 * i, 0.7]}, "pyg": {}}
        for i, task in enumerate(TASKS)
    }
    report = Report(METHODS["ggnn"], tmp_path)
    _findings(report, results)
    first = report.findings[0]
    assert first["claim"] == "bAbI 4 / 15 / 16 / 18 %, 50 examples"
    assert list(TASKS)[:4] == ["babi4", "babi15", "babi16", "babi18"]
    assert first["ours"] == "60.0 / 60.5 / 61.0 / 61.5"  # the mean of each task's seeds
    assert first["paper"] == "100.0 / 100.0 / 100.0 / 100.0"
    assert report.findings[1]["paper"] == f"{PAPER['babi19'][250]:.1f}"


def test_the_shortfalls_study_trains_each_variant_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from paperports.experiments.ggnn import shortfalls
    from paperports.registry import RunContext

    monkeypatch.setattr(shortfalls, "SHORTFALLS", [("babi18", 50), ("shortest_path", 50)])
    monkeypatch.setattr(shortfalls, "QUICK_VARIANTS", {"a": (1, 10), "b": (2, 10)})
    path = shortfalls.shortfalls(RunContext(tmp_path, quick=True, quiet=True))
    results = json.loads((path.parent / "results.json").read_text())["shortfalls"]
    assert results["variants"] == {
        "a": {"examples_factor": 1, "updates": 10},
        "b": {"examples_factor": 2, "updates": 10},
    }
    for task in ("babi18", "shortest_path"):
        assert set(results["accuracy"][task]) == {"a", "b"}
        assert all(0.0 <= a <= 1.0 for v in results["accuracy"][task].values() for a in v)
    assert results["paper"] == {"babi18": 100.0, "shortest_path": 100.0}
    assert "babi18 from 50 examples" in path.read_text()


def test_a_sequence_of_varying_length_counts_when_right_up_to_the_node_that_ends_it() -> None:
    """Outputs past the end of a shorter answer are not read; the model's sequence ends at
    its first output of the stop node (the goal of a shortest path)."""
    import torch
    from torch_geometric.data import Batch, Data

    from paperports.experiments.ggnn.common import _correct

    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    x = torch.zeros(4, 2)
    x[0, 0], x[3, 1] = 1, 1  # start 0, goal 3 (channel 1)
    answers = [[1, 2, 3], [1, 2, 3], [3, -1, -1], [1, 2, 3]]
    batch = Batch.from_data_list(
        [Data(x=x, edge_index=edge_index, y=torch.tensor([a])) for a in answers]
    )
    chosen = torch.tensor([[1, 2, 3], [1, 3, 3], [3, 0, 0], [1, 2, 0]])  # per graph, step
    model = GGSNN(2, 4, 1, task="node_selection")

    def outputs(*args: object, **kwargs: object) -> tuple[list[torch.Tensor], list]:
        steps = []
        for k in range(3):
            scores = torch.full((16,), -10.0)
            scores[batch.ptr[:-1] + chosen[:, k]] = 0.0
            steps.append(scores)
        return steps, []

    model.forward = outputs  # type: ignore[method-assign]
    right = _correct(model, batch, stop_channel=1)
    # right; a wrong node; right at length 1 whatever follows; never reaches the goal
    assert right.tolist() == [True, False, True, False]
