r"""GG-NN and GGS-NN (Li et al. 2016): the propagation model with its output models."""

# No `from __future__ import annotations`: TorchScript reads the real annotations.
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Batch, Data

from paperports._checks import check_bool, check_choice, check_index_tensor, check_int, values_known
from paperports.integrations.pyg.gated_graph_conv import GatedGraphConv, _as_edge_index
from paperports.integrations.pyg.readouts import GatedGraphReadout, NodeSelection

__all__ = ["GGNN", "GGSNN"]

_TASKS = ("graph", "node", "node_selection")


def _dtype_of(module: nn.Module) -> torch.dtype:
    """The floating dtype of ``module``'s parameters (float32 unless ``.double()``...)."""
    return next(module.parameters()).dtype


def _graph_args(
    data: Data | Batch, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor, int]:
    """``x, edge_index, edge_type, batch, ptr, num_graphs`` of a ``Data`` or ``Batch``, with
    the annotations ``x`` (often integers or booleans) cast to ``dtype``, the model's. The
    edges come from ``edge_index`` or, failing that, from a sparse ``adj_t`` (PyG's
    transposed adjacency, as ``T.ToSparseTensor`` leaves it), for graphs of one edge type."""
    if not isinstance(data, (Data, Batch)):
        raise TypeError(f"data must be a torch_geometric Data or Batch, got {type(data).__name__}")
    x = data.x
    edge_index = data.edge_index
    edge_type = getattr(data, "edge_type", None)
    adj_t = getattr(data, "adj_t", None)
    if edge_index is None and adj_t is not None:
        if edge_type is not None:
            raise ValueError(
                "edge types need an `edge_index`: `T.ToSparseTensor` merges parallel edges, "
                "so `edge_type` no longer lines up with `adj_t`; keep the `edge_index`"
            )
        edge_index, values = _as_edge_index(adj_t, None)
        if values is not None:
            raise ValueError(
                "`adj_t` holds values other than 1 (edge weights or attributes), which the "
                "GG-NN models do not read; give the structure alone (`T.ToSparseTensor("
                "attr=None)`) or an `edge_index`"
            )
    if x is None or edge_index is None:
        raise ValueError(
            "the graph needs node annotations `x` and an `edge_index` (or a sparse `adj_t`)"
        )
    if not isinstance(x, Tensor) or x.is_complex():
        raise TypeError(f"data.x must be a real tensor of annotations, got {type(x).__name__}")
    x = x.to(dtype)
    batch = getattr(data, "batch", None)
    ptr = getattr(data, "ptr", None)
    if batch is None:  # one graph
        batch = torch.zeros(x.size(0), dtype=torch.long, device=x.device)
        if ptr is None:
            ptr = torch.tensor([0, x.size(0)], device=x.device)
    if ptr is None:
        counts = torch.bincount(batch)
        ptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    num_graphs = ptr.numel() - 1
    return x, edge_index, edge_type, batch, ptr, num_graphs


def _check_sizes(
    who: str, annotation_channels: int, hidden_channels: int, num_layers: int, out_channels: int
) -> None:
    for name, value in [
        ("annotation_channels", annotation_channels),
        ("hidden_channels", hidden_channels),
        ("num_layers", num_layers),
        ("out_channels", out_channels),
    ]:
        check_int(name, value, minimum=1, who=who)
    if hidden_channels < annotation_channels:
        raise ValueError(
            f"{who}: hidden_channels ({hidden_channels}) must be >= annotation_channels "
            f"({annotation_channels}): the annotations are padded into the state"
        )


def _class_targets(name: str, target: Tensor, num_classes: int, count: int) -> Tensor:
    """Class targets: ``count`` integers in ``[0, num_classes)``."""
    if not isinstance(target, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(target).__name__}")
    if target.numel() != count:
        raise ValueError(f"{name} must hold {count} classes, got shape {tuple(target.shape)}")
    return check_index_tensor(
        name, target.reshape(-1), low=0, high=num_classes, what="out_channels, the classes"
    )


class _NodeLinear(nn.Linear):
    """The per-node output of ``task="node"``: a linear layer that takes (and ignores) the
    batch arguments of the other output models, so that the three share one call."""

    def forward(
        self,
        x: Tensor,
        index: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        dim_size: Optional[int] = None,
    ) -> Tensor:
        return F.linear(x, self.weight, self.bias)


def _output_model(
    task: str, in_channels: int, hidden_channels: int, out_channels: int
) -> tuple[nn.Module, Optional[nn.Module]]:
    """The output model (called as ``output(hx, batch, ptr, num_graphs)``) and, for graph
    outputs, the classifier on the readout."""
    check_choice("task", task, _TASKS)
    if task == "graph":
        readout = GatedGraphReadout(in_channels, hidden_channels)
        return readout, nn.Linear(hidden_channels, out_channels)
    if task == "node":
        return _NodeLinear(in_channels, out_channels), None
    return NodeSelection(in_channels), None


def _num_graphs(
    x: Tensor, batch: Optional[Tensor], batch_size: Optional[int]
) -> tuple[Tensor, int]:
    """The batch vector (all zeros for one graph) and the number of graphs: ``batch_size``
    when given, else one more than the largest graph id (PyG's pooling convention)."""
    if batch is None:
        batch = torch.zeros(x.size(0), dtype=torch.long, device=x.device)
        return batch, 1 if batch_size is None else batch_size
    if batch_size is not None:
        return batch, batch_size
    if batch.numel() == 0:
        return batch, 0
    return batch, int(batch.max()) + 1


class _GraphModel(nn.Module):
    """What GG-NN and GGS-NN share: their inputs, as tensors or as a PyG ``Data``."""

    @torch.jit.unused
    def _graph_inputs(
        self,
        who: str,
        x: Any,
        edge_index: Optional[Tensor],
        edge_type: Optional[Tensor],
        batch: Optional[Tensor],
        batch_size: Optional[int],
    ) -> tuple[Tensor, Tensor, Optional[Tensor], Optional[Tensor], Optional[int]]:
        """``x, edge_index, edge_type, batch, batch_size`` from tensors or from a ``Data`` /
        ``Batch`` (its ``x``, ``edge_index`` or ``adj_t``, ``edge_type``, ``batch``); integer
        or boolean annotations cast to the model's dtype."""
        dtype = _dtype_of(self)
        if isinstance(x, (Data, Batch)):
            given = [n for n, v in [("edge_index", edge_index), ("edge_type", edge_type),
                                    ("batch", batch)] if v is not None]  # fmt: skip
            if given:
                raise ValueError(
                    f"{who}: pass either a Data / Batch or tensors, not both: the Data holds "
                    f"the graph, so {', '.join(given)} cannot go beside it"
                )
            x, edge_index, edge_type, batch, ptr, _ = _graph_args(x, dtype)
            batch_size = ptr.numel() - 1
            return x, edge_index, edge_type, batch, batch_size
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{who} takes node annotations x and an edge_index as tensors, or a "
                f"torch_geometric Data or Batch; got x of type {type(x).__name__}"
            )
        if edge_index is None:
            raise ValueError(
                f"{who}: edge_index is missing; pass x, edge_index (and edge_type, batch) as "
                "tensors, or one Data / Batch"
            )
        if not x.is_floating_point() and not x.is_complex():
            x = x.to(dtype)
        if batch_size is not None:
            batch_size = check_int("batch_size", batch_size, minimum=0, who=who)
            if batch is None and batch_size != 1:
                raise ValueError(
                    f"{who}: batch_size={batch_size} needs the batch vector (one graph id per "
                    "node); without it the nodes are one graph"
                )
        elif batch is not None and not values_known(batch):
            raise ValueError(
                f"{who}: pass batch_size with a batch vector whose values are not known "
                "(meta device, tracing): the number of graphs cannot be read from it"
            )
        if batch is not None and batch.dtype != torch.long:
            batch = check_index_tensor("batch", batch, low=0, high=None, who=who)
        return x, edge_index, edge_type, batch, batch_size

    def _output(self, h: Tensor, x: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
        """The output model on ``[h_v^(T), x_v]``, then the classifier of graph outputs."""
        # output and classifier are the subclasses' (set by _output_model)
        out: Tensor = self.output(torch.cat([h, x], dim=-1), batch, None, num_graphs)  # type: ignore[operator]
        if self.classifier is not None:
            out = self.classifier(out)  # type: ignore[operator]
        return out


class GGNN(_GraphModel):
    r"""A gated graph neural network (Li et al. 2016, section 3): node states initialised
    from the annotations, ``num_layers`` steps of :class:`GatedGraphConv`, then an output
    model on :math:`[\mathbf{h}_v^{(T)}, \mathbf{x}_v]`:

    - ``task="graph"``: :class:`GatedGraphReadout` (to ``hidden_channels``) then a linear
      layer: logits per graph
      ``(num_graphs, out_channels)`` (for example a yes/no answer);
    - ``task="node"``: a linear layer per node, ``(num_nodes, out_channels)``;
    - ``task="node_selection"``: :class:`NodeSelection`, log-probabilities over the nodes
      of each graph, ``(num_nodes,)`` (the bAbI answers that are an entity).

    ``forward`` takes tensors, as PyG's models do: ``model(x, edge_index, edge_type=None,
    batch=None, batch_size=None)``, with ``batch`` the graph id of each node (PyG's batch
    vector; all nodes one graph when left out) and ``batch_size`` the number of graphs
    (read off ``batch`` when left out). As a convenience it also takes one PyG ``Data`` or
    ``Batch``, ``model(data)``, with ``x`` (annotations), ``edge_index`` and, for several
    edge types, ``edge_type``; a graph of one edge type may give a sparse ``adj_t`` instead
    of the ``edge_index`` (``T.ToSparseTensor(attr=None, layout=torch.sparse_csr)``).
    The tensor form scripts (``torch.jit.script(model)``) and is what PyG's ``Explainer``
    calls.

    Args:
        annotation_channels (int): Size of the annotations :math:`\mathbf{x}_v`.
        hidden_channels (int): Size of the node states; at least ``annotation_channels``.
        num_layers (int): Propagation steps :math:`T`.
        num_edge_types (int, optional): Edge types. (default: :obj:`1`)
        task (str, optional): ``"graph"``, ``"node"`` or ``"node_selection"``.
            (default: :obj:`"graph"`)
        out_channels (int, optional): Classes for ``"graph"`` and ``"node"``.
            (default: :obj:`2`)
        **conv_kwargs: Further arguments of :class:`GatedGraphConv` (``bidirectional``,
            ``gru``, ``aggr``, ...).
    """

    def __init__(
        self,
        annotation_channels: int,
        hidden_channels: int,
        num_layers: int,
        num_edge_types: int = 1,
        task: str = "graph",
        out_channels: int = 2,
        **conv_kwargs: Any,
    ) -> None:
        super().__init__()
        _check_sizes("GGNN", annotation_channels, hidden_channels, num_layers, out_channels)
        check_choice("task", task, _TASKS, who="GGNN")
        self.task = task
        self.out_channels = out_channels
        self.conv: nn.Module = GatedGraphConv(
            hidden_channels, num_layers, num_edge_types, **conv_kwargs
        )
        width = hidden_channels + annotation_channels
        self.output, self.classifier = _output_model(task, width, hidden_channels, out_channels)

    def propagate(self, x: Tensor, edge_index: Tensor, edge_type: Optional[Tensor]) -> Tensor:
        """The propagation model: ``self.conv`` on the annotations. A subclass that swaps
        in another conv (for example one without edge types) overrides this."""
        out: Tensor = self.conv(x, edge_index, edge_type)
        return out

    def forward(
        self,
        x: Tensor,
        edge_index: Optional[Tensor] = None,
        edge_type: Optional[Tensor] = None,
        batch: Optional[Tensor] = None,
        batch_size: Optional[int] = None,
    ) -> Tensor:
        """Logits per graph or per node, or per-node log-probabilities (node selection).

        Args:
            x: Node annotations ``(num_nodes, annotation_channels)``, or a ``Data`` /
                ``Batch`` holding the whole graph (then no other argument).
            edge_index: ``(2, num_edges)``, or a sparse adjacency for one edge type.
            edge_type: ``(num_edges,)`` types, needed for several edge types.
            batch: ``(num_nodes,)`` graph id of each node.
            batch_size: The number of graphs.
        """
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            x, edge_index, edge_type, batch, batch_size = self._graph_inputs(
                "GGNN", x, edge_index, edge_type, batch, batch_size
            )
        assert edge_index is not None
        batch, num_graphs = _num_graphs(x, batch, batch_size)
        h = self.propagate(x, edge_index, edge_type)
        return self._output(h, x, batch, num_graphs)

    def loss(self, out: Tensor, data: Data | Batch) -> Tensor:
        """The task's loss against ``data.y``: cross-entropy per graph or per node; for node
        selection, the NLL of the target node (``data.y``: its index within its graph)."""
        y = getattr(data, "y", None)
        if y is None:
            raise ValueError("data.y is missing: the loss needs the targets")
        if self.task == "node_selection":
            _, _, _, _, ptr, _ = _graph_args(data)
            return NodeSelection.loss(out, y.view(-1), ptr)
        target = _class_targets("data.y", y, self.out_channels, out.shape[0])
        return F.cross_entropy(out, target)

    def predict(self, out: Tensor, data: Data | Batch) -> Tensor:
        """The predicted class per graph / node, or the selected node of each graph."""
        if self.task == "node_selection":
            _, _, _, batch, _, num_graphs = _graph_args(data)
            return NodeSelection.predict(out, batch, num_graphs)
        return out.argmax(-1)


class GGSNN(_GraphModel):
    r"""A gated graph *sequence* neural network (Li et al. 2016, section 4): a sequence of
    outputs :math:`o^{(1)} \dots o^{(K)}`. At step :math:`k` the node states start from the
    annotations :math:`\mathcal{X}^{(k)}`; :math:`\mathcal{F}_o` propagates and predicts
    :math:`o^{(k)}`, and :math:`\mathcal{F}_\mathcal{X}` propagates and predicts the next
    annotations

    .. math::
        \mathbf{x}_v^{(k+1)} = \sigma\big(j(\mathbf{h}_v^{(k,T)}, \mathbf{x}_v^{(k)})\big),

    with the propagation shared between the two (``share_propagation=True``) or separate.
    Trained end to end; when the true intermediate annotations are known they can supervise
    :math:`\mathcal{F}_\mathcal{X}` and be fed as the next input (teacher forcing), as the
    paper does for bAbI 19 and the sequence tasks.

    ``forward`` takes tensors, ``model(x, edge_index, edge_type=None, batch=None,
    num_steps=K)``, or one ``Data`` / ``Batch``, ``model(data, num_steps=K)``; ``num_steps``
    may be fixed at construction instead. The tensor form scripts.

    Args:
        annotation_channels (int): Size of the annotations.
        hidden_channels (int): Size of the node states.
        num_layers (int): Propagation steps per output step.
        num_edge_types (int, optional): Edge types. (default: :obj:`1`)
        task (str, optional): Output per step: ``"graph"`` (classes per graph, e.g. a
            direction) or ``"node_selection"`` (a node per graph, e.g. the next node of a
            path). (default: :obj:`"graph"`)
        out_channels (int, optional): Classes for ``"graph"``. (default: :obj:`2`)
        share_propagation (bool, optional): One propagation model for
            :math:`\mathcal{F}_o` and :math:`\mathcal{F}_\mathcal{X}`. (default: :obj:`True`)
        num_steps (int, optional): The number of outputs :math:`K` when ``forward`` is not
            given one. (default: :obj:`None`: ``forward`` needs ``num_steps``)
        **conv_kwargs: Further arguments of :class:`GatedGraphConv`.
    """

    def __init__(
        self,
        annotation_channels: int,
        hidden_channels: int,
        num_layers: int,
        num_edge_types: int = 1,
        task: str = "graph",
        out_channels: int = 2,
        share_propagation: bool = True,
        num_steps: Optional[int] = None,
        **conv_kwargs: Any,
    ) -> None:
        super().__init__()
        check_choice("task", task, ("graph", "node_selection"), who="GGSNN")
        _check_sizes("GGSNN", annotation_channels, hidden_channels, num_layers, out_channels)
        check_bool("share_propagation", share_propagation, who="GGSNN")
        if num_steps is not None:
            num_steps = check_int("num_steps", num_steps, minimum=1, who="GGSNN")
        self.num_steps = num_steps
        self.task = task
        self.out_channels = out_channels
        self.annotation_channels = annotation_channels
        self.conv_o: nn.Module = GatedGraphConv(
            hidden_channels, num_layers, num_edge_types, **conv_kwargs
        )
        self.conv_x = (
            None
            if share_propagation
            else GatedGraphConv(hidden_channels, num_layers, num_edge_types, **conv_kwargs)
        )
        width = hidden_channels + annotation_channels
        self.output, self.classifier = _output_model(task, width, hidden_channels, out_channels)
        self.annotation = nn.Linear(width, annotation_channels)  # j

    def forward(
        self,
        x: Tensor,
        edge_index: Optional[Tensor] = None,
        edge_type: Optional[Tensor] = None,
        batch: Optional[Tensor] = None,
        num_steps: Optional[int] = None,
        annotations: Optional[list[Tensor]] = None,
        batch_size: Optional[int] = None,
    ) -> tuple[list[Tensor], list[Tensor]]:
        """Run ``num_steps`` output steps.

        Args:
            x: The first annotations ``X^(1)``, ``(num_nodes, annotation_channels)``, or a
                ``Data`` / ``Batch`` holding the graphs with them (then ``model(data,
                num_steps)``, as before tensors were taken).
            edge_index, edge_type, batch, batch_size: The graphs, as in :class:`GGNN`.
            num_steps: Outputs to produce, ``K``; defaults to the constructor's.
            annotations: Optional true annotations ``X^(2) .. X^(K)`` (each
                ``(num_nodes, annotation_channels)``), fed as the next input instead of the
                predicted ones (teacher forcing).

        Returns:
            ``(outputs, predicted_annotations)``: ``K`` outputs (logits per graph, or
            log-probabilities per node) and the ``K - 1`` predicted annotation
            probabilities :math:`\\mathcal{X}^{(2)} \\dots \\mathcal{X}^{(K)}`.
        """
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            if isinstance(x, (Data, Batch)) and isinstance(edge_index, int):
                num_steps, edge_index = edge_index, None  # model(data, K)
            x, edge_index, edge_type, batch, batch_size = self._graph_inputs(
                "GGSNN", x, edge_index, edge_type, batch, batch_size
            )
            num_steps = self._check_steps(x, num_steps, annotations)
        assert edge_index is not None
        steps = num_steps if num_steps is not None else self.num_steps
        assert steps is not None
        batch, num_graphs = _num_graphs(x, batch, batch_size)
        outputs: list[Tensor] = []
        predicted: list[Tensor] = []
        for k in range(steps):
            h = self.conv_o(x, edge_index, edge_type)
            outputs.append(self._output(h, x, batch, num_graphs))
            if k == steps - 1:
                break
            if self.conv_x is not None:
                h = self.conv_x(x, edge_index, edge_type)
            next_x = torch.sigmoid(self.annotation(torch.cat([h, x], dim=-1)))
            predicted.append(next_x)
            x = annotations[k].to(next_x.dtype) if annotations is not None else next_x
        return outputs, predicted

    @torch.jit.unused
    def _check_steps(
        self, x: Tensor, num_steps: Optional[int], annotations: Optional[list[Tensor]]
    ) -> int:
        """``num_steps`` (or the constructor's), checked with the teacher-forced
        annotations against it and against ``x``."""
        if num_steps is None:
            num_steps = self.num_steps
            if num_steps is None:
                raise ValueError(
                    "GGSNN: num_steps is needed, the number of outputs K: pass it to forward "
                    "(model(data, num_steps=K)) or to the constructor (GGSNN(..., num_steps=K))"
                )
        num_steps = check_int("num_steps", num_steps, minimum=1, who="GGSNN")
        if annotations is not None and len(annotations) != num_steps - 1:
            raise ValueError(
                f"annotations must hold the {num_steps - 1} true annotations X^(2)..X^(K), "
                f"got {len(annotations)}"
            )
        for k, given in enumerate(annotations or []):
            if not isinstance(given, Tensor) or tuple(given.shape) != tuple(x.shape):
                shown = tuple(given.shape) if isinstance(given, Tensor) else type(given).__name__
                raise ValueError(
                    f"annotations[{k}] must be (num_nodes, annotation_channels) = "
                    f"{tuple(x.shape)}, like data.x; got {shown}"
                )
        return num_steps

    def loss(
        self,
        outputs: list[Tensor],
        targets: Tensor,
        data: Data | Batch,
        predicted: list[Tensor] | None = None,
        annotations: list[Tensor] | None = None,
    ) -> Tensor:
        """Sum over steps of the output loss (``targets``: ``(num_graphs, K)``, a class or a
        within-graph node index per step, ``-1`` past the end of a shorter sequence), plus
        the binary cross-entropy of the predicted annotations against the true ones when both
        are given. Steps past a sequence's end (and the annotations that would feed them)
        are left out, so that sequences of different lengths train in one batch."""
        _, _, _, batch, ptr, num_graphs = _graph_args(data)
        if targets.shape != (num_graphs, len(outputs)):
            raise ValueError(
                f"targets must be (num_graphs, num_steps) = ({num_graphs}, {len(outputs)}), "
                f"got {tuple(targets.shape)}"
            )
        valid = targets >= 0
        if values_known(targets):
            if bool((targets < -1).any()):
                raise ValueError("targets must be >= 0, or -1 past the end of a sequence")
            if not bool(valid[:, 0].all()):
                raise ValueError(
                    "target must be a class or node at every graph's first step: -1 marks "
                    "steps past the end of a sequence, and each has one output at least"
                )
            if bool((valid[:, 1:] & ~valid[:, :-1]).any()):
                raise ValueError(
                    "targets of -1 must come after a sequence's outputs, not between them"
                )
        total = outputs[0].new_zeros(())
        for k, out in enumerate(outputs):
            keep = valid[:, k]
            if not bool(keep.any()):
                continue
            if self.task == "graph":
                target = _class_targets(f"targets[:, {k}]", targets[keep, k], self.out_channels,
                                        int(keep.sum()))  # fmt: skip
                total = total + F.cross_entropy(out[keep], target)
            else:
                total = total + NodeSelection.loss(out, targets[:, k], ptr, mask=keep)
        if predicted is not None and annotations is not None:
            if len(predicted) != len(annotations) or len(predicted) != len(outputs) - 1:
                raise ValueError(
                    f"predicted and annotations must hold one fewer than the {len(outputs)} "
                    f"outputs (X^(2)..X^(K)): {len(predicted)} predicted annotations, "
                    f"{len(annotations)} true ones"
                )
            for k, (p, a) in enumerate(zip(predicted, annotations, strict=True)):
                a = a.to(p.dtype)
                if a.shape != p.shape or (
                    values_known(a) and not bool(((a >= 0) & (a <= 1)).all())
                ):
                    raise ValueError(
                        f"annotations[{k}] must be {tuple(p.shape)} with values in [0, 1], "
                        "the true annotation probabilities"
                    )
                nodes = valid[:, k + 1][batch]  # X^(k+2) feeds output k + 1
                if bool(nodes.any()):
                    total = total + F.binary_cross_entropy(p[nodes], a[nodes])
        return total
