"""Heap graphs and shape formulas for the GG-NN paper's program verification (issue 26)."""

from __future__ import annotations

import random

import pytest
import torch

from paperports.adapters.heap_graphs import (
    FIELDS,
    Atom,
    Formula,
    annotation_names,
    describe,
    enumerate_formulas,
    heap_from_cells,
    parse_heap,
    prediction_steps,
    sample_heap,
)

PANHANDLE = """
# x's list runs into a cycle; y points into the cycle's middle
0x10: next=0x20
0x20: next=0x30
0x30: next=0x40
0x40: next=0x20
0x50: left=0x60 right=null
0x60: left=0 right=0
x = 0x10
y = 0x40
z = 0x50
"""


def test_the_parser_reads_a_dump_into_a_typed_graph() -> None:
    heap = parse_heap(PANHANDLE)
    assert heap.num_cells == 6 and heap.null == 6
    assert heap.addresses == [0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
    assert heap.variables == {"x": 0, "y": 3, "z": 4}
    edge_index, edge_type = heap.edges()
    triples = zip(edge_index[0].tolist(), edge_index[1].tolist(), edge_type.tolist(), strict=True)
    pairs = {(s, d, FIELDS[t]) for s, d, t in triples}
    assert (3, 1, "next") in pairs  # the cycle's back edge
    assert (4, 5, "left") in pairs and (4, 6, "right") in pairs and (5, 6, "left") in pairs
    assert len(pairs) == 4 + 2 * 2


def test_a_heap_is_described_with_the_existentials_it_needs() -> None:
    d = describe(parse_heap(PANHANDLE))
    # 0x20 is where the list enters the cycle: two segments end there, so it is named
    assert str(d.formula) == "exists t1. ls(x, t1) * ls(y, t1) * tree(z) * ls(t1, y)"
    assert d.nodes["t1"] == 1 and d.nodes["null"] == 6
    assert d.footprints["x"] == (0,) and d.footprints["t1"] == (1, 2)
    assert sorted(d.footprints["z"]) == [4, 5]


@pytest.mark.parametrize(
    ("dump", "message"),
    [
        ("0x10: next=0x99\nx = 0x10", "0x10.next points at 0x99, which is not an allocated"),
        ("0x10: next=0\nx = 0x30", "variable x points at 0x30"),
        ("0x10: prev=0\nx = 0x10", "field 'prev', out of range"),
        ("0x10: next=0\n0x10: next=0", "cell 0x10 is given twice"),
        ("0: next=0", "null cannot be an allocated cell"),
        ("0x10 next 0", "neither a cell"),
        ("0x10: next=zz\n", "'zz' is not an address"),
        ("0x10: next\n", "'next' is not a field=ADDRESS pointer"),
    ],
)
def test_the_parser_refuses_bad_dumps_naming_the_problem(dump: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_heap(dump)


def test_heap_from_cells_refuses_what_the_parser_refuses() -> None:
    with pytest.raises(ValueError, match="dangling"):
        heap_from_cells({16: {"next": 32}}, {"x": 16})
    with pytest.raises(ValueError, match="out of range"):
        heap_from_cells({16: {"down": 0}}, {"x": 16})
    with pytest.raises(TypeError, match="address"):
        heap_from_cells({16: {"next": "0x20"}}, {"x": 16})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="keyed by addresses"):
        heap_from_cells({"0x10": {"next": None}}, {"x": 16})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("dump", "message"),
    [
        ("0x10: next=0 left=0\nx = 0x10", "a list cell has exactly"),
        ("0x10: next=0\nx = 0x10\ny = 0x10", "two program variables point at one cell"),
        ("0x10: next=0x20\n0x20: left=0 right=0\nx = 0x10", "points into a tree cell"),
        ("0x10: left=0x20 right=0x20\n0x20: left=0 right=0\nx = 0x10", "reached twice"),
        ("0x10: next=0\n0x20: next=0\nx = 0x10", "reached from no program variable"),
        ("0x10: next=0\nw = 0x10", "the heap names variables \\['w'\\]"),
    ],
)
def test_describe_refuses_heaps_outside_the_grammar(dump: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        describe(parse_heap(dump))


def test_canonical_form_ignores_existential_names_and_atom_order() -> None:
    a = Formula(("t1",), (Atom("ls", "x", "t1"), Atom("ls", "y", "t1"), Atom("none", "z"),
                          Atom("ls", "t1", "null")))  # fmt: skip
    b = Formula(("u",), (Atom("ls", "u", "null"), Atom("none", "z"), Atom("ls", "y", "u"),
                         Atom("ls", "x", "u")))  # fmt: skip
    c = Formula(("t1",), (Atom("ls", "x", "t1"), Atom("ls", "y", "t1"), Atom("none", "z"),
                          Atom("ls", "t1", "t1")))  # fmt: skip
    assert a.canonical() == b.canonical() != c.canonical()
    with pytest.raises(ValueError, match="predicate"):
        Atom("dll", "x")
    with pytest.raises(ValueError, match="only ls has an end"):
        Atom("tree", "x", "y")


def test_every_formula_is_distinct_needed_and_sampled_heaps_describe_back_to_it() -> None:
    formulas = enumerate_formulas()
    keys = [f.canonical() for f in formulas]
    assert len(set(keys)) == len(keys) == 423
    assert {len(f.existentials) for f in formulas} == {0, 1, 2}
    assert len(enumerate_formulas(max_existentials=0)) < len(enumerate_formulas(max_existentials=1))
    rng = random.Random(0)
    for formula in formulas:
        for _ in range(3):
            heap = sample_heap(formula, rng)
            assert describe(heap).formula.canonical() == formula.canonical()


def test_sampled_heaps_vary_and_stay_within_the_sizes_asked() -> None:
    formula = Formula((), (Atom("ls", "x", "null"), Atom("tree", "y"), Atom("none", "z")))
    rng = random.Random(1)
    sizes = {sample_heap(formula, rng, max_segment=3, max_tree=2).num_cells for _ in range(200)}
    assert sizes == {2, 3, 4, 5}
    with pytest.raises(ValueError, match="max_segment"):
        sample_heap(formula, rng, max_segment=0)
    with pytest.raises(ValueError, match="no atom for variable"):
        sample_heap(Formula((), (Atom("none", "x"),)), rng)


def test_algorithm_1_steps_carry_the_annotations_and_targets_of_each_step() -> None:
    heap = parse_heap(PANHANDLE)
    steps = prediction_steps(heap)
    channels = annotation_names()
    kinds = [s.kind for s in steps]
    # one existential: yes, pick it, no; then x (ls), y (ls), z (tree), t1 (ls)
    assert kinds == ["exists", "pick", "exists",
                     "predicate", "end", "covered", "predicate", "end", "covered",
                     "predicate", "covered", "predicate", "end", "covered"]  # fmt: skip
    assert [s.target for s in steps if s.kind == "exists"] == [1, 0]
    assert steps[1].nodes == (1,)
    named = channels.index("is_named")
    assert steps[0].x[1, named] == 0 and steps[2].x[1, named] == 1
    assert [s.target for s in steps if s.kind == "predicate"] == [0, 0, 1, 0]
    assert [s.nodes for s in steps if s.kind == "end"] == [(1,), (1,), (3,)]
    active = channels.index("active")
    last = steps[-1]
    assert int(torch.nonzero(last.x[:, active]).flatten()) == 1  # t1's node
    visited = channels.index("visited")
    assert last.x[:, visited].tolist() == [1, 0, 0, 1, 1, 1, 0]  # x, y and z's atoms done
    assert last.visited is not None and last.visited.tolist() == [1, 1, 1, 1, 1, 1, 0]
    assert steps[0].x[0, channels.index("x")] == 1 and steps[0].x[6, channels.index("null")] == 1
