r"""A GGS-NN that writes a heap's separation-logic formula (Li et al. 2016, section 7).

The paper breaks the formula into the steps of its Algorithm 1 and gives each step its own
GG-NN over the heap graph (separate propagation models for the outputs and for the
annotation updates, 10 propagation steps):

1. while another existential is needed (graph-level class, :math:`D = 16`):
   pick the cell to name (node selection, :math:`D = 16`) and turn on its ``is_named``;
2. for each program variable, then each existential, with ``active`` on its node: pick the
   predicate ``ls`` / ``tree`` / ``none`` (graph-level class, :math:`D = 8`); for ``ls``
   pick the node the segment ends at (node selection, :math:`D = 8`); then predict the
   cells the atom covers, the ``visited`` annotation of the next step (per node, sigmoid,
   :math:`D = 8`).

The intermediate annotations are observed in training (each step is trained on the true
annotations) and predicted at test time. Two choices the paper does not spell out are
ours: the node selections are restricted to nodes that can be the answer (a cell not yet
named for step 1, a named node for a list's end), and the predicted ``visited``
probabilities are rounded before they are fed on.

:class:`FormulaPredictor` holds the five GG-NNs; :meth:`FormulaPredictor.fit` trains them
(Adam, minibatches of 20 graphs, graph-level classes balanced within each minibatch, as the
paper) and :meth:`FormulaPredictor.predict` runs Algorithm 1 on many heaps at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Batch, Data
from torch_geometric.utils import scatter

from paperports._checks import check_float, check_int
from paperports.adapters.heap_graphs import (
    FIELDS,
    NULL,
    PREDICATES,
    VARIABLES,
    Atom,
    Formula,
    Heap,
    annotation_names,
    initial_annotations,
    prediction_steps,
)
from paperports.experiments.ggnn.common import PygGGNN
from paperports.integrations.pyg import GGNN

__all__ = ["COMPONENTS", "Component", "FormulaPredictor", "heap_graph"]


@dataclass(frozen=True)
class Component:
    """One GG-NN of the pipeline: its output model, classes and state size."""

    task: str
    out_channels: int
    hidden: int


COMPONENTS: dict[str, Component] = {
    "exists": Component("graph", 2, 16),
    "pick": Component("node_selection", 2, 16),
    "predicate": Component("graph", len(PREDICATES), 8),
    "end": Component("node_selection", 2, 8),
    "covered": Component("node", 1, 8),
}
"""The paper's section 7.3: 16-dimensional states for the existentials' two steps, 8 for
the others."""


def heap_graph(heap: Heap, variables: Sequence[str] = VARIABLES) -> Data:
    """The PyG graph of ``heap`` with Algorithm 1's first annotations: the input of
    :meth:`FormulaPredictor.predict` for one heap."""
    return _example(heap.edges(), initial_annotations(heap, variables))


def _example(heap_edges: tuple[Tensor, Tensor], step_x: Tensor, **targets: Tensor) -> Data:
    edge_index, edge_type = heap_edges
    return Data(x=step_x, edge_index=edge_index, edge_type=edge_type, **targets)


class FormulaPredictor(nn.Module):
    """The five GG-NNs of Algorithm 1 over heap graphs with :data:`FIELDS` as edge types.

    Args:
        variables: The program variables (one annotation channel each).
        num_layers: Propagation steps of every GG-NN (the paper: 10).
        conv: ``"ours"`` (:class:`~paperports.integrations.pyg.GatedGraphConv`: the fields as
            edge types, messages both ways) or ``"pyg"`` (``torch_geometric.nn.
            GatedGraphConv``: one edge type, messages along the pointers only), to show what
            the paper's edge types and directions buy.
    """

    def __init__(
        self, variables: Sequence[str] = VARIABLES, num_layers: int = 10, conv: str = "ours"
    ) -> None:
        super().__init__()
        if conv not in ("ours", "pyg"):
            raise ValueError(f"conv must be 'ours' or 'pyg', got {conv!r}")
        self.variables = tuple(variables)
        self.channels = annotation_names(self.variables)
        width = len(self.channels)
        models: dict[str, nn.Module] = {}
        for name, c in COMPONENTS.items():
            common: dict[str, Any] = {
                "annotation_channels": width,
                "hidden_channels": max(c.hidden, width),
                "num_layers": num_layers,
                "task": c.task,
                "out_channels": c.out_channels,
            }
            if conv == "ours":
                models[name] = GGNN(**common, num_edge_types=len(FIELDS))
            else:
                models[name] = PygGGNN(**common, hidden=max(c.hidden, width), steps=num_layers)
        self.models = nn.ModuleDict(models)

    def _run(self, name: str, batch: Batch) -> Tensor:
        out: Tensor = self.models[name](
            batch.x, batch.edge_index, batch.edge_type, batch.batch, batch.num_graphs
        )
        return out

    # ------------------------------------------------------------------ training

    def examples(self, heaps: Sequence[Heap]) -> dict[str, list[Data]]:
        """Every step of Algorithm 1 on ``heaps``, as training graphs per component."""
        out: dict[str, list[Data]] = {name: [] for name in COMPONENTS}
        for heap in heaps:
            edges = heap.edges()
            for step in prediction_steps(heap, variables=self.variables):
                if step.kind in ("exists", "predicate"):
                    data = _example(edges, step.x, y=torch.tensor([step.target]))
                elif step.kind in ("pick", "end"):
                    valid = torch.zeros(step.x.size(0))
                    valid[list(step.nodes)] = 1
                    data = _example(edges, step.x, valid=valid)
                else:
                    assert step.visited is not None
                    data = _example(edges, step.x, visited=step.visited)
                out[step.kind].append(data)
        return out

    def loss(self, name: str, batch: Batch) -> Tensor:
        """The component's loss on a batch of its examples: cross-entropy of the class, the
        negative log of the probability given to the right nodes, or the binary
        cross-entropy of the covered cells."""
        out = self._run(name, batch)
        task = COMPONENTS[name].task
        if task == "graph":
            return F.cross_entropy(out, batch.y)
        if task == "node":
            return F.binary_cross_entropy_with_logits(out.squeeze(-1), batch.visited)
        right = scatter(out.exp() * batch.valid, batch.batch, dim_size=batch.num_graphs)
        return -torch.log(right.clamp_min(1e-30)).mean()

    def fit(
        self,
        heaps: Sequence[Heap],
        updates: int,
        *,
        seed: int = 0,
        batch_size: int = 20,
        lr: float = 0.005,
        progress: Callable[[range, str], Any] | None = None,
    ) -> dict[str, list[float]]:
        """Train each component for ``updates`` Adam steps on minibatches of ``batch_size``
        of its examples from ``heaps`` (graph-level classes balanced within a minibatch);
        the losses per component."""
        who = "FormulaPredictor.fit"
        updates = check_int("updates", updates, minimum=1, who=who)
        batch_size = check_int("batch_size", batch_size, minimum=1, who=who)
        lr = check_float("lr", lr, minimum=0.0, open_low=True, who=who)
        rng = random.Random(seed)
        torch.manual_seed(seed)
        examples = self.examples(heaps)
        losses: dict[str, list[float]] = {}
        for name, data in examples.items():
            model = self.models[name]
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            if COMPONENTS[name].task == "graph":
                draw = _balanced(data, batch_size, rng)
            else:
                draw = _uniform(data, batch_size, rng)
            steps = range(updates) if progress is None else progress(range(updates), name)
            losses[name] = []
            self.train()
            for _ in steps:
                optimizer.zero_grad()
                loss = self.loss(name, Batch.from_data_list(draw()))
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
                losses[name].append(loss.item())
        self.eval()
        return losses

    @torch.no_grad()
    def step_accuracy(self, heaps: Sequence[Heap]) -> dict[str, float]:
        """Each component's accuracy on the true annotations of ``heaps``' steps (a class,
        a right node, every cell's covered-or-not right)."""
        self.eval()
        result = {}
        for name, data in self.examples(heaps).items():
            batch = Batch.from_data_list(data)
            out = self._run(name, batch)
            task = COMPONENTS[name].task
            if task == "graph":
                right = out.argmax(-1) == batch.y
            elif task == "node":
                wrong = ((out.squeeze(-1) > 0).float() != batch.visited).float()
                right = scatter(wrong, batch.batch, dim_size=batch.num_graphs, reduce="sum") == 0
            else:
                pick = _argmax_per_graph(out, batch.batch, batch.num_graphs)
                right = batch.valid[pick] > 0
            result[name] = float(right.float().mean())
        return result

    # ------------------------------------------------------------------ prediction

    @torch.no_grad()
    def predict(
        self,
        heaps: Sequence[Heap],
        max_existentials: int = 4,
        groups: Sequence[int] | None = None,
    ) -> list[Formula]:
        """Algorithm 1 on every heap at once, with the predicted annotations: the formula of
        each heap (existentials named ``t1, t2, …`` in the order they were picked).

        ``groups`` (one id per heap) turns on the paper's batch prediction (section 7.4):
        heaps of one group are snapshots of one program and get one formula. Each step's
        graph-level classes add their log-probabilities over the group; a list's end is the
        name (program variable, existential or null) whose nodes score highest summed over
        the group; the cell picked for an existential, and the cells an atom covers, are
        each heap's own."""
        self.eval()
        named_c, active_c, visited_c = (
            self.channels.index(c) for c in ("is_named", "active", "visited")
        )
        max_existentials = check_int(
            "max_existentials", max_existentials, minimum=0, who="FormulaPredictor.predict"
        )
        if not heaps:
            return []
        if groups is None:
            groups = range(len(heaps))
        if len(groups) != len(heaps):
            raise ValueError(f"groups must hold one id per heap ({len(heaps)}), got {len(groups)}")
        ids = {g: k for k, g in enumerate(dict.fromkeys(groups))}
        group = torch.tensor([ids[g] for g in groups])
        num_groups = len(ids)

        def decide(logits: Tensor) -> Tensor:
            """The class each graph's group chooses: summed log-probabilities."""
            total = scatter(logits.log_softmax(-1), group, dim=0, dim_size=num_groups)
            chosen: Tensor = total.argmax(-1)[group]
            return chosen

        batch = Batch.from_data_list([heap_graph(h, self.variables) for h in heaps])
        ptr, n = batch.ptr, batch.num_graphs
        existentials: list[list[int]] = [[] for _ in heaps]  # nodes, in batch numbering
        searching = torch.ones(n, dtype=torch.bool)
        for _ in range(max_existentials):
            more = decide(self._run("exists", batch)).bool() & searching
            searching = more
            if not bool(more.any()):
                break
            allowed = batch.x[:, named_c] == 0
            node = _argmax_per_graph(self._run("pick", batch), batch.batch, n, allowed)
            for g in torch.nonzero(more).flatten().tolist():
                existentials[g].append(int(node[g]))
                batch.x[int(node[g]), named_c] = 1
        roots = [
            [(v, int(ptr[g]) + h.node_of(h.variables.get(v))) for v in self.variables]
            + [(f"t{k + 1}", node) for k, node in enumerate(existentials[g])]
            for g, h in enumerate(heaps)
        ]
        candidates = [
            _names_of_nodes(r, int(ptr[g]) + h.null)
            for g, (r, h) in enumerate(zip(roots, heaps, strict=True))
        ]
        atoms: list[list[Atom]] = [[] for _ in heaps]
        for i in range(max(len(r) for r in roots)):
            here = [g for g in range(n) if i < len(roots[g])]
            batch.x[:, active_c] = 0
            for g in here:
                batch.x[roots[g][i][1], active_c] = 1
            predicate = decide(self._run("predicate", batch))
            end_scores = self._run("end", batch)
            totals: dict[int, dict[str, float]] = {}
            for g in here:
                scores = totals.setdefault(int(group[g]), {})
                for cell, name in candidates[g]:
                    scores[name] = scores.get(name, 0.0) + float(end_scores[cell])
            covered = self._run("covered", batch).squeeze(-1) > 0
            for g in here:
                name, kind = roots[g][i][0], PREDICATES[int(predicate[g])]
                scores = totals[int(group[g])]
                last = max(scores, key=lambda t: scores[t]) if kind == "ls" else None
                atoms[g].append(Atom(kind, name, last))
            in_here = torch.zeros(n, dtype=torch.bool)
            in_here[here] = True
            update = in_here[batch.batch]
            batch.x[update, visited_c] = covered[update].float()
        return [
            Formula(tuple(f"t{k + 1}" for k in range(len(existentials[g]))), tuple(atoms[g]))
            for g in range(n)
        ]


def _names_of_nodes(roots: list[tuple[str, int]], null: int) -> list[tuple[int, str]]:
    """Each named node once with its name: ``null`` for the null node (also where a
    variable is null), else the first variable or existential on it."""
    names: dict[int, str] = {}
    for name, node in [*reversed(roots), (NULL, null)]:
        names[node] = name  # the earlier names, and null, overwrite
    return list(names.items())


def _argmax_per_graph(
    log_probs: Tensor, index: Tensor, num_graphs: int, allowed: Tensor | None = None
) -> Tensor:
    """The node (in batch numbering) of highest score in each graph, among ``allowed``."""
    scores = log_probs if allowed is None else log_probs.masked_fill(~allowed, float("-inf"))
    best = scatter(scores, index, dim=0, dim_size=num_graphs, reduce="max")
    position = torch.arange(scores.numel())
    is_best = scores >= best[index]
    first = torch.full((num_graphs,), scores.numel())
    return first.scatter_reduce(0, index[is_best], position[is_best], reduce="amin")


def _uniform(data: list[Data], batch_size: int, rng: random.Random) -> Callable[[], list[Data]]:
    """Minibatches drawn without replacement within each."""

    def draw() -> list[Data]:
        return rng.sample(data, min(batch_size, len(data)))

    return draw


def _balanced(data: list[Data], batch_size: int, rng: random.Random) -> Callable[[], list[Data]]:
    """Minibatches with the same number of examples of each class present (the paper's
    balancing for graph-level classes)."""
    by_class: dict[int, list[Data]] = {}
    for d in data:
        by_class.setdefault(int(d.y), []).append(d)
    classes = sorted(by_class)

    def draw() -> list[Data]:
        return [rng.choice(by_class[classes[k % len(classes)]]) for k in range(batch_size)]

    return draw
