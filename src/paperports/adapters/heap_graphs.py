"""Heap graphs and separation-logic shape formulas, for the GG-NN paper's program verification.

Li et al. (2016, section 7) learn to describe a program's heap in a restricted separation
logic. A *heap graph* has one node per allocated cell, one edge per pointer field (the
field is the edge type: ``next`` for list cells, ``left`` / ``right`` for tree cells), a
node for ``null``, and the program variables as labels on the cells they point at. A
*formula* is ``∃t1 … tn. a1 * … * am`` where each atom is ``ls(a, b)`` (a non-empty list
segment from ``a`` to ``b``), ``tree(a)`` (a binary tree rooted at ``a``) or ``none(a)``
(``a`` is null); existential variables name the cells a shape needs that no program
variable points at (where two lists join, where a list enters a cycle).

Everything the experiment needs comes from here:

- :class:`Heap` and :func:`parse_heap` / :func:`heap_from_cells`: a heap from a memory dump
  (``0x10: next=0x20`` per cell, ``x = 0x10`` per variable), refused with the line or cell
  named when a pointer dangles or a field is not one of :data:`FIELDS`;
- :class:`Formula` with its canonical form (existentials renamed in the order a walk from
  the program variables meets them, atoms in that order): two formulas are equivalent here
  when their canonical forms are equal, the paper's measure;
- :func:`enumerate_formulas`: every formula over the program variables with up to
  ``max_existentials`` existentials, each existential needed (two atoms end at it);
- :func:`sample_heap`: a random heap that satisfies a formula (segment lengths and tree
  shapes drawn), with its cells shuffled;
- :func:`describe`: a heap's formula, computed exactly, with the cell each name denotes
  (the labels of the generated data; it refuses heaps outside the grammar);
- :func:`prediction_steps`: the supervision of the paper's Algorithm 1 for one heap: the
  node annotations and the target of every step (more existentials?, which node, which
  predicate, which list end, which cells the atom covers).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = [
    "FIELDS",
    "NULL",
    "PREDICATES",
    "VARIABLES",
    "Atom",
    "Description",
    "Formula",
    "Heap",
    "Step",
    "annotation_names",
    "describe",
    "enumerate_formulas",
    "heap_from_cells",
    "initial_annotations",
    "parse_heap",
    "prediction_steps",
    "sample_heap",
]

FIELDS: tuple[str, ...] = ("next", "left", "right")
"""The pointer fields, in edge-type order: list cells have ``next``, tree cells ``left`` and
``right``."""
LIST_FIELDS = ("next",)
TREE_FIELDS = ("left", "right")
NULL = "null"
PREDICATES: tuple[str, ...] = ("ls", "tree", "none")
"""The atoms' predicates, in class order."""
VARIABLES: tuple[str, ...] = ("x", "y", "z")
"""The program variables of the paper's data set (three)."""


def annotation_names(variables: Sequence[str] = VARIABLES) -> tuple[str, ...]:
    """The node annotation channels: one per program variable (it points here), then
    ``null``, ``is_named``, ``active`` (the atom being predicted is rooted here) and
    ``visited`` (an atom already predicted covers this cell), the labels of the paper's
    Algorithm 1."""
    return (*variables, "null", "is_named", "active", "visited")


# ---------------------------------------------------------------------------- formulas


@dataclass(frozen=True)
class Atom:
    """``ls(root, end)``, ``tree(root)`` or ``none(root)``; names are program variables,
    existentials or ``"null"`` (as an end)."""

    predicate: str
    root: str
    end: str | None = None

    def __post_init__(self) -> None:
        if self.predicate not in PREDICATES:
            raise ValueError(f"predicate must be one of {PREDICATES}, got {self.predicate!r}")
        if (self.predicate == "ls") != (self.end is not None):
            raise ValueError(f"only ls has an end: {self.predicate}({self.root}, {self.end})")

    def __str__(self) -> str:
        if self.predicate == "ls":
            return f"ls({self.root}, {self.end})"
        return f"{self.predicate}({self.root})"


@dataclass(frozen=True)
class Formula:
    """``∃ existentials. atoms[0] * atoms[1] * …``: one atom per program variable and per
    existential."""

    existentials: tuple[str, ...]
    atoms: tuple[Atom, ...]

    def __str__(self) -> str:
        body = " * ".join(str(a) for a in self.atoms)
        if not self.existentials:
            return body
        return f"exists {', '.join(self.existentials)}. {body}"

    def canonical(self, variables: Sequence[str] = VARIABLES) -> str:
        """The formula with its existentials renamed ``t1, t2, …`` in the order a walk from
        the program variables (in ``variables`` order, following list ends) meets them, and
        its atoms in that order: equal for formulas that differ only in those names and in
        the order of their atoms (the paper's test of equivalence)."""
        by_root = {a.root: a for a in self.atoms}
        order: list[str] = []
        rename: dict[str, str] = {}
        queue = [v for v in variables if v in by_root]
        while queue:
            name = queue.pop(0)
            if name in order:
                continue
            order.append(name)
            end = by_root[name].end
            if end is not None and end in self.existentials and end not in rename:
                rename[end] = f"t{len(rename) + 1}"
                queue.append(end)
        missing = [a.root for a in self.atoms if a.root not in order]
        if missing:
            return f"unreachable({', '.join(sorted(missing))}) " + str(self)

        def renamed(n: str | None) -> str | None:
            return rename.get(n, n) if n is not None else None

        atoms = tuple(
            Atom(by_root[n].predicate, rename.get(n, n), renamed(by_root[n].end)) for n in order
        )
        return str(Formula(tuple(sorted(rename.values())), atoms))


def _needed(formula_ends: Mapping[str, str | None], existentials: Iterable[str]) -> bool:
    """Whether every existential is needed: at least two ``ls`` atoms end at it."""
    ends = list(formula_ends.values())
    return all(ends.count(t) >= 2 for t in existentials)


def enumerate_formulas(
    variables: Sequence[str] = VARIABLES, max_existentials: int = 2
) -> list[Formula]:
    """Every formula over ``variables`` (each ``none``, ``tree`` or the root of a list
    segment) whose list segments end at a program variable's cell, at an existential or at
    null, with up to ``max_existentials`` existentials, each needed (two segments end at it)
    and reached from a variable; one formula per canonical form, in a fixed order."""
    if max_existentials < 0:
        raise ValueError(f"max_existentials must be >= 0, got {max_existentials}")
    seen: dict[str, Formula] = {}
    for kinds in itertools.product(("none", "tree", "ls"), repeat=len(variables)):
        listed = [v for v, k in zip(variables, kinds, strict=True) if k == "ls"]
        for n in range(max_existentials + 1 if listed else 1):
            exists = tuple(f"t{i + 1}" for i in range(n))
            roots = [*listed, *exists]
            for ends in itertools.product([*roots, NULL], repeat=len(roots)):
                by_root = dict(zip(roots, ends, strict=True))
                if not _needed(by_root, exists):
                    continue
                atoms = [
                    Atom(k, v, by_root[v] if k == "ls" else None)
                    for v, k in zip(variables, kinds, strict=True)
                ] + [Atom("ls", t, by_root[t]) for t in exists]
                formula = Formula(exists, tuple(atoms))
                key = formula.canonical(variables)
                if not key.startswith("unreachable"):
                    seen.setdefault(key, formula)
    return [seen[k] for k in sorted(seen)]


# ---------------------------------------------------------------------------- heaps


@dataclass
class Heap:
    """A heap: each cell's pointer fields (``None`` is null) and the cell each program
    variable points at (``None`` for null). Cells are numbered ``0 … num_cells - 1``; in the
    graph, node ``num_cells`` is null."""

    fields: list[dict[str, int | None]]
    variables: dict[str, int | None]
    addresses: list[int] = field(default_factory=list)
    """The cells' addresses in the dump they were read from (empty for generated heaps)."""

    @property
    def num_cells(self) -> int:
        return len(self.fields)

    @property
    def null(self) -> int:
        """The node of ``null`` in the graph."""
        return self.num_cells

    def node_of(self, cell: int | None) -> int:
        return self.null if cell is None else cell

    def edges(self) -> tuple[Tensor, Tensor]:
        """``edge_index`` ``(2, E)`` (cell → target, null as node ``num_cells``) and
        ``edge_type`` ``(E,)`` (the field's index in :data:`FIELDS`)."""
        src, dst, kind = [], [], []
        for cell, pointers in enumerate(self.fields):
            for name, target in pointers.items():
                src.append(cell)
                dst.append(self.node_of(target))
                kind.append(FIELDS.index(name))
        edge_index = torch.tensor([src, dst], dtype=torch.long).reshape(2, -1)
        return edge_index, torch.tensor(kind, dtype=torch.long)

    def _cell_name(self, cell: int) -> str:
        return hex(self.addresses[cell]) if self.addresses else f"cell {cell}"


def heap_from_cells(
    cells: Mapping[int, Mapping[str, int | None]],
    variables: Mapping[str, int | None],
    *,
    null: int = 0,
) -> Heap:
    """A :class:`Heap` from a memory dump: ``cells`` maps each allocated address to its
    pointer fields (field name → address; ``null`` or ``None`` for a null pointer) and
    ``variables`` each program variable to an address (or null).

    Raises:
        ValueError: a field not in :data:`FIELDS` (out of range), a pointer or variable to an
            address that is not an allocated cell (dangling), the null address allocated.
    """
    if not isinstance(cells, Mapping) or not isinstance(variables, Mapping):
        raise TypeError("cells and variables must be mappings (address -> fields, name -> address)")
    bad = [a for a in cells if not isinstance(a, int) or isinstance(a, bool)]
    if bad:
        raise TypeError(f"cells must be keyed by addresses (int), got {bad[0]!r}")
    if null in cells:
        raise ValueError(f"address {hex(null)} is null and cannot be an allocated cell")
    addresses = sorted(cells)
    index = {a: i for i, a in enumerate(addresses)}

    def target(value: int | None, where: str) -> int | None:
        if value is None or value == null:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{where} must be an address (int) or None, got {value!r}")
        if value not in index:
            raise ValueError(
                f"{where} points at {hex(value)}, which is not an allocated cell (a dangling "
                f"pointer); the cells are {', '.join(hex(a) for a in addresses) or 'none'}"
            )
        return index[value]

    fields: list[dict[str, int | None]] = []
    for address in addresses:
        pointers = cells[address]
        if not isinstance(pointers, Mapping):
            raise TypeError(f"cell {hex(address)}: its fields must be a mapping, got {pointers!r}")
        row: dict[str, int | None] = {}
        for name, value in pointers.items():
            if name not in FIELDS:
                raise ValueError(
                    f"cell {hex(address)} has field {name!r}, out of range: the pointer fields "
                    f"are {', '.join(FIELDS)}"
                )
            row[name] = target(value, f"cell {hex(address)}.{name}")
        fields.append(row)
    bound = {str(v): target(a, f"variable {v}") for v, a in variables.items()}
    return Heap(fields, bound, addresses)


_CELL = re.compile(r"^(\w+)\s*:\s*(.*)$")
_POINTER = re.compile(r"^(\w+)=(\w+)$")
_VARIABLE = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(\w+)$")


def _address(text: str, line: int) -> int | None:
    if text == NULL:
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError(f"line {line}: {text!r} is not an address (0x10, 16 or null)") from None


def parse_heap(text: str) -> Heap:
    """A heap from its text dump: one line per cell, ``ADDRESS: field=ADDRESS …`` (fields
    from :data:`FIELDS`; ``0`` or ``null`` is null), one per program variable,
    ``name = ADDRESS``; blank lines and ``#`` comments are skipped::

        0x10: next=0x20
        0x20: next=null
        x = 0x10
        y = null

    Raises:
        ValueError: a line of neither form, a repeated cell, or what
            :func:`heap_from_cells` refuses (dangling pointers, out-of-range fields), with
            the line or cell named.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    cells: dict[int, dict[str, int | None]] = {}
    variables: dict[str, int | None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        variable = _VARIABLE.match(line)
        cell = _CELL.match(line)
        if variable and not cell:
            name = variable.group(1)
            if name in variables:
                raise ValueError(f"line {number}: variable {name!r} is given twice")
            variables[name] = _address(variable.group(2), number)
            continue
        if not cell:
            raise ValueError(
                f"line {number}: {raw.strip()!r} is neither a cell ('0x10: next=0x20') nor a "
                "variable ('x = 0x10')"
            )
        address = _address(cell.group(1), number)
        if address is None or address == 0:
            raise ValueError(f"line {number}: null cannot be an allocated cell")
        if address in cells:
            raise ValueError(f"line {number}: cell {hex(address)} is given twice")
        pointers: dict[str, int | None] = {}
        for item in cell.group(2).split():
            pointer = _POINTER.match(item)
            if not pointer:
                raise ValueError(f"line {number}: {item!r} is not a field=ADDRESS pointer")
            pointers[pointer.group(1)] = _address(pointer.group(2), number)
        cells[address] = pointers
    return heap_from_cells(cells, variables)


# ---------------------------------------------------------------------------- sampling


def sample_heap(
    formula: Formula,
    rng: random.Random,
    *,
    max_segment: int = 4,
    max_tree: int = 5,
    variables: Sequence[str] = VARIABLES,
) -> Heap:
    """A random heap satisfying ``formula``: each list segment 1 … ``max_segment`` cells,
    each tree 1 … ``max_tree`` cells of random shape, the cells in random order."""
    if max_segment < 1 or max_tree < 1:
        raise ValueError(f"max_segment and max_tree must be >= 1, got {max_segment}, {max_tree}")
    by_root = {a.root: a for a in formula.atoms}
    missing = [v for v in variables if v not in by_root]
    if missing:
        raise ValueError(f"the formula has no atom for variable(s) {', '.join(missing)}")
    fields: list[dict[str, int | None]] = []
    first: dict[str, int | None] = {}
    for name, atom in by_root.items():  # every root gets its first cell
        if atom.predicate == "none":
            first[name] = None
        else:
            first[name] = len(fields)
            fields.append({})
    for name, atom in by_root.items():
        root = first[name]
        if atom.predicate == "ls":
            assert root is not None and atom.end is not None
            cell = root
            for _ in range(rng.randint(1, max_segment) - 1):
                fields.append({})
                fields[cell]["next"] = len(fields) - 1
                cell = len(fields) - 1
            fields[cell]["next"] = None if atom.end == NULL else first[atom.end]
        elif atom.predicate == "tree":
            assert root is not None
            fields[root] = {"left": None, "right": None}
            open_slots = [(root, "left"), (root, "right")]
            for _ in range(rng.randint(1, max_tree) - 1):
                parent, side = open_slots.pop(rng.randrange(len(open_slots)))
                fields.append({"left": None, "right": None})
                fields[parent][side] = len(fields) - 1
                open_slots += [(len(fields) - 1, "left"), (len(fields) - 1, "right")]
    order = list(range(len(fields)))
    rng.shuffle(order)
    new = {old: new for new, old in enumerate(order)}
    shuffled: list[dict[str, int | None]] = [{} for _ in fields]
    for old, pointers in enumerate(fields):
        shuffled[new[old]] = {k: (None if t is None else new[t]) for k, t in pointers.items()}
    bound = {v: (None if first[v] is None else new[first[v]]) for v in variables}  # type: ignore[index]
    return Heap(shuffled, bound)


# ---------------------------------------------------------------------------- description


@dataclass(frozen=True)
class Description:
    """A heap's formula, with the graph node each name denotes and each atom's footprint
    (the cells it covers)."""

    formula: Formula
    nodes: dict[str, int]
    footprints: dict[str, tuple[int, ...]]


def describe(heap: Heap, variables: Sequence[str] = VARIABLES) -> Description:
    """The formula of ``heap`` (existentials named in canonical order), computed exactly.
    A variable of ``variables`` that the heap does not bind is null (``none``).

    Raises:
        ValueError: the heap is outside the grammar: a variable not in ``variables``, two
            variables on one cell, a cell with both list and tree fields, trees that share or
            cycle, a list that runs into a tree (or back), cells no variable reaches.
    """
    unknown = sorted(set(heap.variables) - set(variables))
    if unknown:
        raise ValueError(f"the heap names variables {unknown}; the variables are {variables}")
    bound = {v: heap.variables.get(v) for v in variables}
    cells = [c for c in bound.values() if c is not None]
    if len(set(cells)) < len(cells):
        raise ValueError("two program variables point at one cell; each cell is named once here")
    kinds: list[str] = []
    for cell, pointers in enumerate(heap.fields):
        names = set(pointers)
        if names == set(LIST_FIELDS):
            kinds.append("ls")
        elif names == set(TREE_FIELDS):
            kinds.append("tree")
        else:
            raise ValueError(
                f"{heap._cell_name(cell)} has fields {sorted(names)}: a list cell has exactly "
                f"{list(LIST_FIELDS)}, a tree cell exactly {list(TREE_FIELDS)}"
            )
    footprints: dict[str, tuple[int, ...]] = {}
    atoms: dict[str, Atom] = {}
    covered: set[int] = set()
    for v, root in bound.items():
        if root is None:
            atoms[v] = Atom("none", v)
            footprints[v] = ()
        elif kinds[root] == "tree":
            atoms[v] = Atom("tree", v)
            footprints[v] = _tree(heap, kinds, root, covered)
    # The list part: named cells are the variables' and those two segments reach.
    roots = [c for v, c in bound.items() if c is not None and kinds[c] == "ls"]
    reached, indegree = set(roots), dict.fromkeys(roots, 0)
    stack = list(roots)
    while stack:
        cell = stack.pop()
        target = heap.fields[cell]["next"]
        if target is None:
            continue
        if kinds[target] != "ls":
            raise ValueError(f"{heap._cell_name(cell)}.next points into a tree cell")
        indegree[target] = indegree.get(target, 0) + 1
        if target not in reached:
            reached.add(target)
            stack.append(target)
    name_of = {c: v for v, c in bound.items() if c is not None and kinds[c] == "ls"}
    start_of = {v: c for c, v in name_of.items()}
    joins = {c for c in reached if indegree[c] >= 2 and c not in name_of}
    order = [v for v in variables if v in start_of]
    existentials: list[str] = []
    for name in order:  # grows as existentials are named
        segment, here = [start_of[name]], heap.fields[start_of[name]]["next"]
        while here is not None and here not in name_of and here not in joins:
            segment.append(here)
            here = heap.fields[here]["next"]
        if here is None:
            end = NULL
        elif here in name_of:
            end = name_of[here]
        else:  # a join, reached here first: name it
            end = f"t{len(existentials) + 1}"
            existentials.append(end)
            name_of[here] = end
            start_of[end] = here
            order.append(end)
        atoms[name] = Atom("ls", name, end)
        footprints[name] = tuple(segment)
        covered.update(segment)
    unreached = sorted(set(range(heap.num_cells)) - covered)
    if unreached:
        shown = ", ".join(heap._cell_name(c) for c in unreached[:5])
        raise ValueError(f"cells {shown} are reached from no program variable (garbage)")
    nodes = {v: heap.node_of(c) for v, c in bound.items()}
    nodes.update({t: start_of[t] for t in existentials})
    nodes[NULL] = heap.null
    formula = Formula(tuple(existentials), tuple(atoms[n] for n in [*variables, *existentials]))
    return Description(formula, nodes, footprints)


def _tree(heap: Heap, kinds: list[str], root: int, covered: set[int]) -> tuple[int, ...]:
    """The cells of the tree at ``root``, refused if it shares a cell or points into a list."""
    cells, stack = [], [root]
    while stack:
        cell = stack.pop()
        if cell in covered:
            raise ValueError(f"{heap._cell_name(cell)} is reached twice: trees share no cells")
        if kinds[cell] != "tree":
            raise ValueError(f"a tree's child {heap._cell_name(cell)} is a list cell")
        covered.add(cell)
        cells.append(cell)
        stack += [c for f in TREE_FIELDS if (c := heap.fields[cell][f]) is not None]
    return tuple(cells)


# ---------------------------------------------------------------------------- Algorithm 1


@dataclass(frozen=True)
class Step:
    """One step of Algorithm 1 with its supervision: the node annotations ``x``
    ``(num_nodes, channels)`` it starts from, and its target:

    - ``"exists"``: ``target`` 1 if another existential is needed, else 0;
    - ``"pick"``: ``nodes``, the cells that may be named next (any is right);
    - ``"predicate"``: ``target``, the class of the active root's predicate;
    - ``"end"``: ``nodes``, the one node the active list segment ends at;
    - ``"covered"``: ``visited``, the cells covered once this atom is added.
    """

    kind: str
    x: Tensor
    target: int = -1
    nodes: tuple[int, ...] = ()
    visited: Tensor | None = None


def initial_annotations(heap: Heap, variables: Sequence[str] = VARIABLES) -> Tensor:
    """Algorithm 1, line 1: each variable's channel on its cell (on null when null), ``null``
    and ``is_named`` on the null node and on every variable's node."""
    channels = annotation_names(variables)
    x = torch.zeros(heap.num_cells + 1, len(channels))
    x[heap.null, channels.index("null")] = 1
    x[heap.null, channels.index("is_named")] = 1
    for k, v in enumerate(variables):
        node = heap.node_of(heap.variables.get(v))
        x[node, k] = 1
        x[node, channels.index("is_named")] = 1
    return x


def prediction_steps(
    heap: Heap, description: Description | None = None, variables: Sequence[str] = VARIABLES
) -> list[Step]:
    """Algorithm 1 on ``heap`` with the true answers: the existentials' loop (is another one
    needed, which cell), then one atom per variable and existential (its predicate, a list's
    end, the cells it covers), each step with the annotations it starts from."""
    description = description or describe(heap, variables)
    channels = annotation_names(variables)
    named, active, visited = (channels.index(c) for c in ("is_named", "active", "visited"))
    formula, nodes = description.formula, description.nodes
    x = initial_annotations(heap, variables)
    steps: list[Step] = []
    remaining = [nodes[t] for t in formula.existentials]
    while True:
        steps.append(Step("exists", x.clone(), target=int(bool(remaining))))
        if not remaining:
            break
        steps.append(Step("pick", x.clone(), nodes=tuple(remaining)))
        x[remaining.pop(0), named] = 1
    by_root = {a.root: a for a in formula.atoms}
    for name in [*variables, *formula.existentials]:
        atom = by_root[name]
        x[:, active] = 0
        x[nodes[name], active] = 1
        steps.append(Step("predicate", x.clone(), target=PREDICATES.index(atom.predicate)))
        if atom.predicate == "ls":
            assert atom.end is not None
            steps.append(Step("end", x.clone(), nodes=(nodes[atom.end],)))
        after = x[:, visited].clone()
        after[list(description.footprints[name])] = 1
        steps.append(Step("covered", x.clone(), visited=after))
        x[:, visited] = after
    return steps
