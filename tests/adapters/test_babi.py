"""bAbI and the sequence tasks as graphs: generators checked by independent solvers, the
symbolic-format parser on fixtures, the PyG encoding, and a GG-NN learning one task."""

from __future__ import annotations

import itertools
from collections import deque

import pytest
import torch
from torch_geometric.loader import DataLoader

from paperports.adapters.babi import (
    CIRCUIT_SIZES,
    PATH_LENGTHS,
    TASKS,
    BabiGraphs,
    Question,
    Story,
    generate_task,
    parse_dictionary,
    parse_symbolic,
    to_data,
)
from paperports.integrations.pyg import GGNN

STEP = {0: (0, 1), 1: (0, -1), 2: (1, 0), 3: (-1, 0)}


def test_generators_are_seeded() -> None:
    for task in TASKS:
        assert generate_task(task, 5, seed=3) == generate_task(task, 5, seed=3)
        assert generate_task(task, 5, seed=3) != generate_task(task, 5, seed=4)


def test_babi4_answers_follow_the_relations_both_ways() -> None:
    for r in range(4):
        for story in generate_task("babi4", 30, seed=r, question_type=r):
            q = story.questions[0]
            implied = {(s, t) for s, rel, t in story.facts if rel == r}
            implied |= {(t, s) for s, rel, t in story.facts if rel == (r ^ 1)}
            # "What is <r> of <arg>?": the unique X with X r arg
            assert {s for s, t in implied if t == q.args[0]} == {q.answer[0]}


def test_babi15_answer_is_what_the_species_fears() -> None:
    for story in generate_task("babi15", 30):
        q = story.questions[0]
        (kind,) = [t for s, r, t in story.facts if s == q.args[0] and r == 0]
        (feared,) = [t for s, r, t in story.facts if s == kind and r == 1]
        assert q.answer == (feared,)


def test_babi16_answer_is_induced_from_a_peer() -> None:
    for story in generate_task("babi16", 30):
        q = story.questions[0]
        (kind,) = [t for s, r, t in story.facts if s == q.args[0] and r == 0]
        peers = [s for s, r, t in story.facts if r == 0 and t == kind and s != q.args[0]]
        colors = {t for s, r, t in story.facts if r == 1 and s in peers}
        assert colors == {q.answer[0]}
        assert not any(s == q.args[0] and r == 1 for s, r, _ in story.facts)


def _fewest_facts(facts: list[tuple[int, int, int]], a: int, b: int) -> int | None:
    """How many facts the shortest derivation of "a is smaller than b" takes, by breadth-first
    search over the stated relations (None: not derivable)."""
    smaller = {(s, t) for s, r, t in facts if r == 0} | {(t, s) for s, r, t in facts if r == 1}
    distance, frontier = {a: 0}, [a]
    while frontier:
        node = frontier.pop(0)
        for s, t in smaller:
            if s == node and t not in distance:
                distance[t] = distance[node] + 1
                frontier.append(t)
    return distance.get(b)


@pytest.mark.parametrize("question_type", [0, 1])
def test_babi18_questions_need_exactly_two_facts_and_answers_follow_the_sizes(
    question_type: int,
) -> None:
    stories = generate_task("babi18", 300, question_type=question_type)
    answers = []
    for story in stories:
        q = story.questions[0]
        a, b = q.args
        assert 4 <= len(story.facts) <= 9
        forward, backward = _fewest_facts(story.facts, a, b), _fewest_facts(story.facts, b, a)
        assert {forward, backward} == {2, None}  # bAbI's own rule: exactly two facts
        a_is_smaller = forward == 2
        # type 0 asks "Does a fit in b?", type 1 "Is a bigger than b?"
        assert q.answer == (int(a_is_smaller if question_type == 0 else not a_is_smaller),)
        answers.append(q.answer[0])
    assert 0.4 < sum(answers) / len(answers) < 0.6  # yes and no equally likely


def _squares(story: Story) -> dict[int, tuple[int, int]]:
    """Each place's square, from the facts ("s is r of t"), with the start at (0, 0)."""
    position = {story.questions[0].args[0]: (0, 0)}
    for _ in range(len(story.facts)):
        for s, r, t in story.facts:
            dx, dy = STEP[r]
            if t in position and s not in position:
                position[s] = (position[t][0] + dx, position[t][1] + dy)
            if s in position and t not in position:
                position[t] = (position[s][0] - dx, position[s][1] - dy)
    return position


def test_babi19_directions_lead_from_start_to_end() -> None:
    for story in generate_task("babi19", 40):
        q = story.questions[0]
        position = _squares(story)
        x, y = position[q.args[0]]
        for d in q.answer:
            x, y = x + STEP[d][0], y + STEP[d][1]
        assert (x, y) == position[q.args[1]]


def test_babi19_has_two_decoys_and_one_route_as_babis_generator() -> None:
    """bAbI's path-finding stories: two moves, two decoy places, and no second way from
    start to goal even through squares that are neighbours without a stated fact."""
    for story in generate_task("babi19", 60, seed=3):
        q = story.questions[0]
        assert len(story.facts) == 4 and len(story.names) == 5
        position = _squares(story)
        squares = set(position.values())
        assert len(squares) == 5  # every place on its own square
        # count simple routes by breadth over partial paths
        goal, routes, partial = position[q.args[1]], 0, [[(0, 0)]]
        while partial:
            path = partial.pop()
            for dx, dy in STEP.values():
                nxt = (path[-1][0] + dx, path[-1][1] + dy)
                if nxt == goal:
                    routes += 1
                elif nxt in squares and nxt not in path:
                    partial.append([*path, nxt])
        assert routes == 1


def test_shortest_path_is_the_unique_shortest_path_of_varying_length() -> None:
    lengths = set()
    for story in generate_task("shortest_path", 40):
        q = story.questions[0]
        adjacency: dict[int, set[int]] = {}
        for s, _, t in story.facts:
            adjacency.setdefault(s, set()).add(t)
        start, end = q.args
        distance = {start: 0}
        queue = deque([start])
        while queue:
            u = queue.popleft()
            for v in adjacency.get(u, ()):
                if v not in distance:
                    distance[v] = distance[u] + 1
                    queue.append(v)
        assert distance[end] == len(q.answer) and q.answer[-1] == end
        path = (start, *q.answer)
        assert all(b in adjacency[a] for a, b in itertools.pairwise(path))
        lengths.add(len(q.answer))
    assert lengths == set(PATH_LENGTHS)


def test_eulerian_circuit_walks_every_edge_of_the_cycle_once() -> None:
    sizes = set()
    for story in generate_task("eulerian", 40):
        q = story.questions[0]
        walk = (*q.args, *q.answer)
        size = len(walk) - 1
        assert walk[0] == walk[-1] and size in CIRCUIT_SIZES
        used = {frozenset(e) for e in itertools.pairwise(walk)}
        cycle_edges = {frozenset((s, t)) for s, _, t in story.facts if s in walk and t in walk}
        assert used == cycle_edges and len(used) == size
        sizes.add(size)
    assert sizes == set(CIRCUIT_SIZES)


@pytest.mark.parametrize("task", ["shortest_path", "eulerian"])
def test_answers_of_different_lengths_are_padded_to_the_longest(task: str) -> None:
    graphs = BabiGraphs(task, 30, seed=3)
    stories = generate_task(task, 30, seed=3)
    longest = max(len(s.questions[0].answer) for s in stories)
    batch = next(iter(DataLoader(graphs, batch_size=30)))
    assert batch.y.shape == (30, longest)
    assert batch.annotations.shape[1:] == (longest - 1, 2)
    for story, y in zip(stories, batch.y, strict=True):
        k = len(story.questions[0].answer)
        assert (y[:k] >= 0).all() and (y[k:] == -1).all()
    data = to_data(stories[0], stories[0].questions[0], TASKS[task])  # no padding asked
    assert data.y.shape == (1, len(stories[0].questions[0].answer))
    with pytest.raises(ValueError, match="length"):
        to_data(stories[0], stories[0].questions[0], TASKS[task], length=1)


SYMBOLIC = """\
1 1 2
3 2 2
? 1 2 1

1 1 2
2 2 3
? 1 1 3 2
? 2 3 1 1
"""


def test_parse_symbolic_reads_the_papers_format() -> None:
    stories = parse_symbolic(SYMBOLIC)
    assert len(stories) == 2
    assert stories[0].facts == [(0, 0, 1), (2, 1, 1)]
    assert stories[0].questions[0].type == 0
    assert stories[0].questions[0].args == (1,) and stories[0].questions[0].answer == (0,)
    two = parse_symbolic(SYMBOLIC.split("\n\n")[1], answers_per_question=2)
    assert two[0].questions[0].args == (0,) and two[0].questions[0].answer == (2, 1)
    with pytest.raises(ValueError, match="line 2"):
        parse_symbolic("1 2 3\n1 2\n")
    with pytest.raises(ValueError, match="line 1"):
        parse_symbolic("? 1 2\n")


def test_parsed_and_generated_stories_give_the_same_graphs() -> None:
    generated = generate_task("babi15", 3, seed=9)
    lines = []
    for story in generated:
        lines += [f"{s + 1} {r + 1} {t + 1}" for s, r, t in story.facts]
        q = story.questions[0]
        lines.append(f"? {q.type + 1} {q.args[0] + 1} {q.answer[0] + 1}")
        lines.append("")
    parsed = parse_symbolic("\n".join(lines))
    spec = TASKS["babi15"]
    for a, b in zip(generated, parsed, strict=True):
        da, db = to_data(a, a.questions[0], spec), to_data(b, b.questions[0], spec)
        for key in ("x", "edge_index", "edge_type", "y"):
            assert torch.equal(da[key], db[key])
    dataset = BabiGraphs("babi15", stories=parsed)
    assert len(dataset) == 3


def test_parse_dictionary() -> None:
    assert parse_dictionary("n=1\ns=2\n\nfits in=3\n") == {"n": 0, "s": 1, "fits in": 2}
    with pytest.raises(ValueError, match="name=id"):
        parse_dictionary("north\n")


def test_to_data_encodes_facts_as_typed_edges_and_arguments_as_annotations() -> None:
    story = Story([(10, 1, 20), (20, 0, 30)])
    spec = TASKS["babi15"]
    from paperports.adapters.babi import Question

    data = to_data(story, Question(0, (10,), (30,)), spec)
    assert data.num_nodes == 3
    assert data.edge_index.tolist() == [[0, 1], [1, 2]] and data.edge_type.tolist() == [1, 0]
    assert data.x.tolist() == [[1.0], [0.0], [0.0]] and data.y.tolist() == [2]
    with pytest.raises(ValueError, match="argument"):
        to_data(story, Question(0, (10, 20), (30,)), spec)
    with pytest.raises(ValueError, match="do not occur"):
        to_data(story, Question(0, (10,), (99,)), spec)


def test_sequence_tasks_carry_intermediate_annotations() -> None:
    data = BabiGraphs("shortest_path", 4)
    batch = next(iter(DataLoader(data, batch_size=4)))
    longest = batch.y.shape[1]
    assert longest in PATH_LENGTHS
    assert batch.annotations.shape == (batch.num_nodes, longest - 1, 2)
    first = batch.annotations[:, 0]
    # the annotation after step 1 marks the first node of the path and, still, the goal
    for g in range(4):
        nodes = first[batch.ptr[g] : batch.ptr[g + 1]]
        assert nodes[:, 0].argmax().item() == batch.y[g, 0].item() and nodes[:, 0].sum() == 1
        assert torch.equal(nodes[:, 1], batch.x[batch.ptr[g] : batch.ptr[g + 1], 1])
    walk = BabiGraphs("eulerian", 2)[0]
    # Eulerian: after the first output, channel 0 marks the previous node, channel 1 the
    # current one (the node just output)
    assert walk.annotations[:, 0, 0].argmax() == walk.x[:, 1].argmax()
    assert walk.annotations[:, 0, 1].argmax() == walk.y[0, 0]


def test_bad_task_arguments() -> None:
    with pytest.raises(ValueError, match="unknown task"):
        generate_task("babi1", 3)
    with pytest.raises(ValueError, match="question types"):
        generate_task("babi15", 3, question_type=2)
    with pytest.raises(ValueError, match="unknown task"):
        BabiGraphs("babi99")


def test_ggnn_reaches_the_papers_accuracy_on_babi15_from_50_examples() -> None:
    """The paper: 100% on bAbI 15 with 50 training examples."""
    torch.manual_seed(0)
    train, test = BabiGraphs("babi15", 50, seed=0), BabiGraphs("babi15", 300, seed=1)
    model = GGNN(1, 8, 4, num_edge_types=2, task="node_selection")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(100):
        for batch in DataLoader(train, batch_size=10, shuffle=True):
            optimizer.zero_grad()
            model.loss(model(batch), batch).backward()
            optimizer.step()
    batch = next(iter(DataLoader(test, batch_size=300)))
    with torch.no_grad():
        accuracy = (model.predict(model(batch), batch) == batch.y).float().mean().item()
    assert accuracy == 1.0


@pytest.mark.parametrize("line", ["0 1 2", "1 -1 2", "? 1 0 2", "? 1 2 -3"])
def test_ids_are_one_based_and_zero_or_negative_ids_are_refused(line: str) -> None:
    """They became node or edge type -1 and failed later inside the conv."""
    with pytest.raises(ValueError, match=r"line 2: .*ids are 1-based"):
        parse_symbolic(f"1 1 2\n{line}\n? 1 1 2\n")


@pytest.mark.parametrize(
    ("story", "question", "match"),
    [
        (Story([(0, 4, 1)]), Question(0, (0,), (1,)), "edge type 4 is not one of"),
        (Story([(0, 0, 1)]), Question(2, (0,), (1,)), "question type 2 is not one of"),
        (Story([(0, 0, -1)]), Question(0, (0,), (1,)), "node ids must be >= 0"),
    ],
)
def test_to_data_refuses_what_the_task_cannot_hold(
    story: Story, question: Question, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        to_data(story, question, TASKS["babi15"])


def test_to_data_refuses_classes_and_directions_beyond_the_task() -> None:
    with pytest.raises(ValueError, match=r"answer classes \[2\]"):
        to_data(Story([(0, 0, 1)]), Question(0, (0, 1), (2,)), TASKS["babi18"])
    with pytest.raises(ValueError, match=r"answer classes \[4\]"):
        to_data(Story([(0, 0, 1)]), Question(0, (0, 1), (1, 4)), TASKS["babi19"])
