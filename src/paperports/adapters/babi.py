"""bAbI tasks and the GG-NN paper's sequence tasks as graphs, for GG-NN / GGS-NN (Li et al. 2016).

The paper's encoding (section 5.1): each fact "A rel B" is a directed edge ``A -> B`` of type
``rel``; the question's arguments are one-hot node annotations (one channel per argument);
the answer is a node of the graph (node selection), a class of the graph (yes / no), or a
sequence of either. One model per question type.

Two sources give the same :class:`Story` objects:

- :func:`generate_task`: offline generators for bAbI tasks 4 (two-argument relations), 15
  (basic deduction), 16 (basic induction), 18 (size reasoning) and 19 (path finding), and the
  paper's two sequence tasks, shortest path and Eulerian circuit (a random graph plus a
  distractor component). Their outputs vary in length, as the paper's: a shortest path of
  one of ``PATH_LENGTHS`` edges, a cycle of one of ``CIRCUIT_SIZES`` nodes, drawn per story
  (a batch's answers are padded with ``-1`` to its longest);
- :func:`parse_symbolic`: the symbolic format that the paper's own pre-processing writes from
  the real bAbI files (``src type tgt`` per fact, ``? qtype arg... answer...`` per question,
  blank lines between stories, 1-based ids), with :func:`parse_dictionary` for its
  ``name=id`` files.

:func:`to_data` turns a story and one of its questions into a PyG ``Data``;
:class:`BabiGraphs` is the ``InMemoryDataset`` of one task and question type.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from paperports._checks import check_int
from paperports._imports import require

require("pyg", "torch_geometric", feature="paperports.adapters.babi")

from torch_geometric.data import Data, InMemoryDataset  # noqa: E402

__all__ = [
    "TASKS",
    "BabiGraphs",
    "Question",
    "Story",
    "TaskSpec",
    "generate_task",
    "parse_dictionary",
    "parse_symbolic",
    "to_data",
]


@dataclass(frozen=True)
class Question:
    """One question about a story: its type, the argument nodes (annotated, one channel each)
    and the answer: node ids for node answers, class ids for graph answers; several for a
    sequence. ``steps`` are the intermediate annotations of a sequence task, when known: for
    each step after the first, the node marked in each annotation channel."""

    type: int
    args: tuple[int, ...]
    answer: tuple[int, ...]
    steps: tuple[tuple[int, ...], ...] = ()


@dataclass
class Story:
    """Facts ``(source, edge type, target)`` over node ids, and questions about them."""

    facts: list[tuple[int, int, int]]
    questions: list[Question] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskSpec:
    """What a task's graphs look like."""

    name: str
    edge_types: tuple[str, ...]
    question_types: tuple[str, ...]
    annotation_channels: int
    answer: str
    """``"node"`` (select a node), ``"class"`` (classify the graph), ``"node_sequence"`` or
    ``"class_sequence"``."""
    classes: tuple[str, ...] = ()
    stop_channel: int | None = None
    """For node sequences of varying length: the annotation channel whose node ends the
    sequence (the goal of a shortest path, the start of a circuit): a model's output
    sequence is over once it outputs that node."""


DIRECTIONS = ("north", "south", "east", "west")
PATH_LENGTHS = (2, 3, 4)
"""Edges on the unique shortest path of the shortest-path task (its output length), one
drawn per story."""
CIRCUIT_SIZES = (4, 5, 6)
"""Nodes on the cycle of the Eulerian-circuit task (one output fewer), one drawn per story."""
_OPPOSITE = {0: 1, 1: 0, 2: 3, 3: 2}
_STEP = {0: (0, 1), 1: (0, -1), 2: (1, 0), 3: (-1, 0)}

TASKS: dict[str, TaskSpec] = {
    "babi4": TaskSpec("two-argument relations", DIRECTIONS, DIRECTIONS, 1, "node"),
    "babi15": TaskSpec("basic deduction", ("is", "afraid_of"), ("afraid_of",), 1, "node"),
    "babi16": TaskSpec("basic induction", ("is", "has_color"), ("has_color",), 1, "node"),
    "babi18": TaskSpec(
        "size reasoning",
        ("fits_in", "bigger_than"),
        ("fits_in", "bigger_than"),
        2,
        "class",
        ("no", "yes"),
    ),
    "babi19": TaskSpec(
        "path finding", DIRECTIONS, ("path",), 2, "class_sequence", ("n", "s", "e", "w")
    ),
    "shortest_path": TaskSpec(
        "shortest path", ("edge",), ("path",), 2, "node_sequence", stop_channel=1
    ),
    "eulerian": TaskSpec(
        "Eulerian circuit", ("edge",), ("circuit",), 2, "node_sequence", stop_channel=0
    ),
}

_PLACES = ("kitchen", "office", "garden", "hallway", "bathroom", "bedroom")
_SPECIES = ("mouse", "sheep", "wolf", "cat")
_NAMES = ("gertrude", "winona", "jessica", "emily")
_ANIMALS = ("lily", "bernhard", "greg", "julius", "brian")
_KINDS = ("swan", "lion", "frog", "rhino")
_COLORS = ("white", "gray", "yellow", "green")
_OBJECTS = ("box", "chocolate", "chest", "container", "suitcase", "box_of_chocolates")


def _babi4(rng: random.Random, question_type: int) -> Story:
    while True:
        a, b, c = rng.sample(range(len(_PLACES)), 3)
        r1, r2 = rng.sample(range(4), 2)
        facts = [(a, r1, b), (c, r2, b) if rng.random() < 0.5 else (b, r2, c)]
        # what the facts imply: X r Y, and Y opposite(r) X
        implied = {(s, r, t) for s, r, t in facts} | {(t, _OPPOSITE[r], s) for s, r, t in facts}
        asked = [(s, t) for s, r, t in implied if r == question_type]
        rng.shuffle(asked)
        for answer, argument in asked:
            candidates = {s for s, r, t in implied if r == question_type and t == argument}
            if len(candidates) == 1:
                names = {i: _PLACES[i] for i in (a, b, c)}
                return Story(facts, [Question(question_type, (argument,), (answer,))], names)


def _babi15(rng: random.Random, question_type: int) -> Story:
    species = list(range(4))
    names = list(range(4, 8))
    fear = {s: rng.choice([t for t in species if t != s]) for s in species}
    kind = {n: rng.choice(species) for n in names}
    facts = [(s, 1, fear[s]) for s in species] + [(n, 0, kind[n]) for n in names]
    rng.shuffle(facts)
    who = rng.choice(names)
    labels = {i: _SPECIES[i] for i in species} | {n: _NAMES[n - 4] for n in names}
    return Story(facts, [Question(question_type, (who,), (fear[kind[who]],))], labels)


def _babi16(rng: random.Random, question_type: int) -> Story:
    kinds, colors = list(range(4)), list(range(4, 8))
    animals = list(range(8, 13))
    while True:
        kind = {a: rng.choice(kinds) for a in animals}
        color = {a: rng.choice(colors) for a in animals}
        asked = rng.choice(animals)
        peers = [a for a in animals if a != asked and kind[a] == kind[asked]]
        if not peers:
            continue
        # induction: every peer of the asked animal has the same colour, the answer
        for a in peers:
            color[a] = color[asked]
        facts = [(a, 0, kind[a]) for a in animals]
        facts += [(a, 1, color[a]) for a in animals if a != asked]
        rng.shuffle(facts)
        labels = (
            {k: _KINDS[k] for k in kinds}
            | {c: _COLORS[c - 4] for c in colors}
            | {a: _ANIMALS[a - 8] for a in animals}
        )
        return Story(facts, [Question(question_type, (asked,), (color[asked],))], labels)


def _two_fact_pairs(bigger: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pairs ``(big, small)`` whose shortest derivation from the known "``big`` is
    bigger than ``small``" facts takes exactly two of them: the real task's questions."""
    smaller: dict[int, list[int]] = {}
    for big, small in sorted(bigger):
        smaller.setdefault(big, []).append(small)
    pairs = []
    for start in sorted(smaller):
        distance, _ = _bfs_paths(smaller, start)
        pairs += [(start, t) for t, d in sorted(distance.items()) if d == 2]
    return pairs


def _babi18(rng: random.Random, question_type: int) -> Story:
    # The logic of bAbI's own size-reasoning generator: a chain of two facts guarantees a
    # question; 2-7 more facts are added while some pair still needs exactly two facts;
    # every question is about such a pair (one fact never suffices, more are never needed).
    order = rng.sample(range(len(_OBJECTS)), len(_OBJECTS))  # biggest first
    rank = {o: i for i, o in enumerate(order)}
    chain = sorted(rng.sample(order, 3), key=rank.__getitem__)
    bigger = {(chain[0], chain[1]), (chain[1], chain[2])}
    for _ in range(rng.randint(2, 7)):
        for _attempt in range(100):
            x, y = sorted(rng.sample(order, 2), key=rank.__getitem__)
            if (x, y) not in bigger and _two_fact_pairs(bigger | {(x, y)}):
                bigger.add((x, y))
                break
    big, small = rng.choice(_two_fact_pairs(bigger))
    facts = [(s, 0, b) if rng.random() < 0.5 else (b, 1, s) for b, s in sorted(bigger)]
    rng.shuffle(facts)
    # type 0: "Does a fit in b?"; type 1: "Is a bigger than b?"; yes and no equally often
    yes = rng.random() < 0.5
    if question_type == 0:
        a, b = (small, big) if yes else (big, small)
    else:
        a, b = (big, small) if yes else (small, big)
    return Story(
        facts, [Question(question_type, (a, b), (int(yes),))], {o: _OBJECTS[o] for o in order}
    )


def _routes(squares: set[tuple[int, int]], start: tuple[int, int], goal: tuple[int, int]) -> int:
    """The number of simple paths from ``start`` to ``goal`` over neighbouring squares."""

    def walk(square: tuple[int, int], seen: frozenset[tuple[int, int]]) -> int:
        if square == goal:
            return 1
        total = 0
        for dx, dy in _STEP.values():
            step = (square[0] + dx, square[1] + dy)
            if step in squares and step not in seen:
                total += walk(step, seen | {step})
        return total

    return walk(start, frozenset([start]))


def _babi19(rng: random.Random, question_type: int) -> Story:
    while True:
        first = rng.randrange(4)
        second = rng.choice([d for d in range(4) if d != _OPPOSITE[first]])
        positions = {(0, 0): 0}
        mid = _STEP[first]
        end = (mid[0] + _STEP[second][0], mid[1] + _STEP[second][1])
        if end == (0, 0):
            continue
        positions[mid] = 1
        positions[end] = 2
        facts: list[tuple[int, int, int]] = []

        def relate(
            p: tuple[int, int],
            q: tuple[int, int],
            d: int,
            facts: list[tuple[int, int, int]] = facts,
            positions: dict[tuple[int, int], int] = positions,
        ) -> None:
            # "q is d of p", stated from either side
            if rng.random() < 0.5:
                facts.append((positions[q], d, positions[p]))
            else:
                facts.append((positions[p], _OPPOSITE[d], positions[q]))

        relate((0, 0), mid, first)
        relate(mid, end, second)
        # Two decoys, as bAbI's own path-finding generator places them: each next to one of
        # the places named before the previous decoy (so the first hangs off the start or the
        # middle), never on a taken square and never opening a second route between start and
        # goal through neighbouring squares.
        for node in (3, 4):
            while True:
                anchor = rng.choice([p for p, i in positions.items() if i < node - 1])
                d = rng.randrange(4)
                spot = (anchor[0] + _STEP[d][0], anchor[1] + _STEP[d][1])
                if spot not in positions and _routes(set(positions) | {spot}, (0, 0), end) == 1:
                    break
            positions[spot] = node
            relate(anchor, spot, d)
        rng.shuffle(facts)
        perm = rng.sample(range(len(_PLACES)), len(_PLACES))  # random names for the ids
        facts = [(perm[s], r, perm[t]) for s, r, t in facts]
        used = set(positions.values())
        names = {perm[i]: _PLACES[perm[i]] for i in used}
        # after the first move the walker stands at the middle place; the goal stays
        question = Question(
            question_type, (perm[0], perm[2]), (first, second), steps=((perm[1], perm[2]),)
        )
        return Story(facts, [question], names)


def _bfs_paths(
    adjacency: dict[int, list[int]], start: int
) -> tuple[dict[int, int], dict[int, int]]:
    """Distances from ``start`` and the number of shortest paths to each node."""
    distance, count = {start: 0}, {start: 1}
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for v in adjacency.get(u, []):
            if v not in distance:
                distance[v] = distance[u] + 1
                count[v] = count[u]
                queue.append(v)
            elif distance[v] == distance[u] + 1:
                count[v] += count[u]
    return distance, count


def _random_component(
    rng: random.Random, nodes: list[int], edges: int
) -> list[tuple[int, int, int]]:
    pairs = [(u, v) for u in nodes for v in nodes if u != v]
    return [(u, 0, v) for u, v in rng.sample(pairs, min(edges, len(pairs)))]


def _shortest_path(rng: random.Random, question_type: int) -> Story:
    while True:
        main = list(range(8))
        distractor = list(range(8, 12))
        facts = _random_component(rng, main, 12) + _random_component(rng, distractor, 5)
        adjacency: dict[int, list[int]] = {}
        for u, _, v in facts:
            adjacency.setdefault(u, []).append(v)
        start = rng.choice(main)
        distance, count = _bfs_paths(adjacency, start)
        length = rng.choice(PATH_LENGTHS)
        ends = [v for v in main if distance.get(v) == length and count[v] == 1]
        if not ends:
            continue
        end = rng.choice(ends)
        path = [end]
        while path[-1] != start:
            v = path[-1]
            path.append(
                next(
                    u for u in adjacency if v in adjacency[u] and distance.get(u) == distance[v] - 1
                )
            )
        path.reverse()
        # annotations: the node reached so far (channel 0) and the goal (channel 1)
        steps = tuple((node, end) for node in path[1:-1])
        return Story(facts, [Question(question_type, (start, end), tuple(path[1:]), steps)])


def _eulerian(rng: random.Random, question_type: int) -> Story:
    size = rng.choice(CIRCUIT_SIZES)
    cycle = rng.sample(range(size), size)
    distractor = list(range(size, size + 3))
    facts = []
    for ring in (cycle, distractor):
        for i, u in enumerate(ring):
            v = ring[(i + 1) % len(ring)]
            facts += [(u, 0, v), (v, 0, u)]  # undirected: both directions
    rng.shuffle(facts)
    # The question marks the start (channel 0) and the node of the first move (channel 1);
    # each output is the next node of the walk, and the annotations then mark the previous
    # node (channel 0) and the current one (channel 1), which fixes the direction.
    walk = [*cycle, cycle[0]]
    circuit = tuple(walk[2:])
    steps = tuple((walk[i], walk[i + 1]) for i in range(1, len(walk) - 2))
    return Story(facts, [Question(question_type, (walk[0], walk[1]), circuit, steps)])


_GENERATORS: dict[str, Callable[[random.Random, int], Story]] = {
    "babi4": _babi4,
    "babi15": _babi15,
    "babi16": _babi16,
    "babi18": _babi18,
    "babi19": _babi19,
    "shortest_path": _shortest_path,
    "eulerian": _eulerian,
}


def generate_task(
    task: str, num_stories: int, seed: int = 0, question_type: int = 0
) -> list[Story]:
    """Generate ``num_stories`` stories of ``task`` (a key of :data:`TASKS`), each with one
    question of ``question_type``; the same seed gives the same stories.

    Raises:
        ValueError: an unknown task or question type, or ``num_stories < 1``.
    """
    if task not in _GENERATORS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(_GENERATORS)}")
    spec = TASKS[task]
    num_stories = check_int("num_stories", num_stories, who="generate_task")
    seed = check_int("seed", seed, who="generate_task")
    question_type = check_int("question_type", question_type, who="generate_task")
    if not 0 <= question_type < len(spec.question_types):
        raise ValueError(
            f"{task} has question types 0..{len(spec.question_types) - 1} "
            f"({', '.join(spec.question_types)}), got {question_type}"
        )
    if num_stories < 1:
        raise ValueError(f"num_stories must be >= 1, got {num_stories}")
    rng = random.Random(f"{task}/{question_type}/{seed}")
    return [_GENERATORS[task](rng, question_type) for _ in range(num_stories)]


def parse_symbolic(text: str, answers_per_question: int = 1) -> list[Story]:
    """Parse the symbolic bAbI format of the paper's pre-processing.

    A story is a block of lines, blank lines between stories. A fact line is
    ``source edge_type target``; a question line is ``? question_type arg ... answer ...``,
    whose last ``answers_per_question`` numbers are the answer (2 for bAbI 19's two
    directions). All ids are 1-based in the file and 0-based in the result.

    Raises:
        ValueError: a line that is neither, naming its number.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be the file's text (str), got {type(text).__name__}")
    check_int("answers_per_question", answers_per_question, minimum=1, who="parse_symbolic")
    stories: list[Story] = []
    current = Story([])
    for number, raw in enumerate(text.splitlines(), start=1):
        tokens = raw.split()
        if not tokens:
            if current.facts or current.questions:
                stories.append(current)
                current = Story([])
            continue
        try:
            if tokens[0] == "?":
                values = [_id(t) for t in tokens[1:]]
                if len(values) < 2 + answers_per_question:
                    raise ValueError("too few numbers")
                current.questions.append(
                    Question(
                        values[0],
                        tuple(values[1:-answers_per_question]),
                        tuple(values[-answers_per_question:]),
                    )
                )
            else:
                if len(tokens) != 3:
                    raise ValueError("a fact has three numbers")
                source, edge_type, target = (_id(t) for t in tokens)
                current.facts.append((source, edge_type, target))
        except ValueError as err:
            raise ValueError(
                f"line {number}: {raw.strip()!r} is neither a fact 'src type tgt' nor a "
                f"question '? qtype args... answer' ({err})"
            ) from None
    if current.facts or current.questions:
        stories.append(current)
    return stories


def _id(token: str) -> int:
    """A 1-based id of the symbolic files, 0-based."""
    value = int(token)
    if value < 1:
        raise ValueError(f"ids are 1-based, got {value}")
    return value - 1


def parse_dictionary(text: str) -> dict[str, int]:
    """Parse a ``name=id`` dictionary of the paper's pre-processing (ids 1-based in the
    file, 0-based in the result).

    Raises:
        ValueError: a line that is not ``name=id``, or a name or an id given twice (one
            would silently replace or merge the other), naming the lines.
    """
    mapping: dict[str, int] = {}
    lines: dict[str, int] = {}
    names: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.strip().rpartition("=")
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"line {number}: {line.strip()!r} is not 'name=id' with a 1-based id")
        index = int(value) - 1
        if name in mapping:
            raise ValueError(
                f"line {number}: {name!r} is named again (line {lines[name]} gave it id "
                f"{mapping[name] + 1})"
            )
        if index in names:
            raise ValueError(
                f"line {number}: id {index + 1} is given again (line {lines[names[index]]} "
                f"gave it to {names[index]!r})"
            )
        mapping[name], lines[name], names[index] = index, number, name
    return mapping


def to_data(story: Story, question: Question, spec: TaskSpec, length: int | None = None) -> Data:
    """One question of a story as a PyG ``Data``.

    Nodes are the ids that occur in the facts or the question, renumbered ``0..n-1`` in
    order of id. ``x``: one annotation channel per question argument; ``edge_index`` and
    ``edge_type`` from the facts; ``y``: the answer, a node index within the graph (node
    answers) or a class (class answers), ``(1, K)`` for sequences. For sequences with known
    steps, ``annotations`` holds the true next annotations, ``(num_nodes, K - 1, channels)``
    (nodes first, so that batching concatenates them like ``x``). ``length`` pads a
    sequence's ``y`` with ``-1`` (and its annotations with zeros) to ``K = length`` outputs,
    so that answers of different lengths batch together.
    """
    for name, value, kind in [
        ("story", story, Story),
        ("question", question, Question),
        ("spec", spec, TaskSpec),
    ]:
        if not isinstance(value, kind):
            raise TypeError(
                f"to_data: {name} must be a {kind.__name__}, got {type(value).__name__}"
            )
    _check_against_spec(story, question, spec)
    ids = sorted(
        {s for s, _, _ in story.facts} | {t for _, _, t in story.facts} | set(question.args)
    )
    if spec.answer in ("node", "node_sequence"):
        missing = set(question.answer) - set(ids)
        if missing:
            raise ValueError(f"answer nodes {sorted(missing)} do not occur in the story")
    index = {node: i for i, node in enumerate(ids)}
    n = len(ids)
    if len(question.args) != spec.annotation_channels:
        raise ValueError(
            f"{spec.name} questions have {spec.annotation_channels} argument(s), got "
            f"{len(question.args)}"
        )
    x = torch.zeros(n, spec.annotation_channels)
    for channel, node in enumerate(question.args):
        x[index[node], channel] = 1.0
    edge_index = torch.tensor(
        [[index[s] for s, _, _ in story.facts], [index[t] for _, _, t in story.facts]],
        dtype=torch.long,
    ).view(2, -1)
    edge_type = torch.tensor([r for _, r, _ in story.facts], dtype=torch.long)
    if spec.answer in ("node", "node_sequence"):
        answer = [index[a] for a in question.answer]
    else:
        answer = list(question.answer)
    if length is not None and spec.answer.endswith("sequence"):
        length = check_int("length", length, minimum=len(answer), who="to_data")
        answer += [-1] * (length - len(answer))
    y = torch.tensor(answer, dtype=torch.long)
    if spec.answer.endswith("sequence"):
        y = y.view(1, -1)
    data = Data(x=x, edge_index=edge_index, edge_type=edge_type, y=y, num_nodes=n)
    if spec.answer.endswith("sequence") and question.steps:
        if len(question.steps) != len(question.answer) - 1:
            raise ValueError(
                f"a sequence of {len(question.answer)} outputs has {len(question.answer) - 1} "
                f"intermediate annotations, got {len(question.steps)}"
            )
        annotations = torch.zeros(n, y.size(1) - 1, spec.annotation_channels)
        for k, marked in enumerate(question.steps):
            for channel, node in enumerate(marked):
                annotations[index[node], k, channel] = 1.0
        data.annotations = annotations
    return data


def _check_against_spec(story: Story, question: Question, spec: TaskSpec) -> None:
    """Facts, question and answer within what the task's graphs can hold."""
    for i, (source, edge_type, target) in enumerate(story.facts):
        if min(source, target) < 0:
            raise ValueError(f"fact {i}: node ids must be >= 0, got {source} and {target}")
        if not 0 <= edge_type < len(spec.edge_types):
            raise ValueError(
                f"fact {i}: edge type {edge_type} is not one of {spec.name}'s "
                f"{len(spec.edge_types)} ({', '.join(spec.edge_types)}; 0-based)"
            )
    if not 0 <= question.type < len(spec.question_types):
        raise ValueError(
            f"question type {question.type} is not one of {spec.name}'s "
            f"{len(spec.question_types)} ({', '.join(spec.question_types)}; 0-based)"
        )
    if any(a < 0 for a in question.args):
        raise ValueError(f"question arguments must be node ids >= 0, got {question.args}")
    if not question.answer:
        raise ValueError("the question has no answer")
    if spec.answer in ("class", "class_sequence"):
        bad = [a for a in question.answer if not 0 <= a < len(spec.classes)]
        if bad:
            raise ValueError(
                f"answer classes {bad} are not among {spec.name}'s {len(spec.classes)} "
                f"({', '.join(spec.classes)}; 0-based)"
            )
    for k, marked in enumerate(question.steps):
        if len(marked) != spec.annotation_channels or any(n < 0 for n in marked):
            raise ValueError(
                f"steps[{k}] must name {spec.annotation_channels} node id(s) >= 0, got {marked}"
            )


class BabiGraphs(InMemoryDataset):  # type: ignore[misc]
    """The graphs of one task and question type, as a PyG ``InMemoryDataset``.

    Generated offline (``stories=None``) or built from stories a user parsed from the real
    bAbI files with :func:`parse_symbolic`; in the latter case only the questions of
    ``question_type`` are kept, as the paper trains one model per question type. Sequence
    answers are padded with ``-1`` to the longest among them.

    Args:
        task: A key of :data:`TASKS`.
        num_examples: Stories to generate (ignored when ``stories`` is given).
        seed: Generator seed; use different seeds for training and test sets.
        question_type: The question type to keep.
        stories: Stories to use instead of generating them.
        transform: A PyG transform applied at access.
    """

    def __init__(
        self,
        task: str,
        num_examples: int = 50,
        seed: int = 0,
        question_type: int = 0,
        stories: Sequence[Story] | None = None,
        transform: Callable[..., Any] | None = None,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; expected one of {sorted(TASKS)}")
        question_type = check_int("question_type", question_type, who="BabiGraphs")
        if stories is not None:
            if isinstance(stories, (str, bytes)) or not isinstance(stories, Sequence):
                raise TypeError(
                    f"BabiGraphs: stories must be a list of Story (from parse_symbolic or "
                    f"generate_task), got {type(stories).__name__}"
                )
            for i, story in enumerate(stories):
                if not isinstance(story, Story):
                    raise TypeError(
                        f"BabiGraphs: stories[{i}] must be a Story, got {type(story).__name__}"
                    )
        super().__init__(None, transform)
        self.task = task
        self.spec = TASKS[task]
        if stories is None:
            stories = generate_task(task, num_examples, seed, question_type)
        questions = [(s, q) for s in stories for q in s.questions if q.type == question_type]
        longest = max((len(q.answer) for _, q in questions), default=0)
        data_list = [to_data(story, q, self.spec, longest) for story, q in questions]
        if not data_list:
            raise ValueError(f"no question of type {question_type} in the stories")
        self.data, self.slices = self.collate(data_list)

    def __repr__(self) -> str:
        return f"BabiGraphs({self.task!r}, {len(self)})"
