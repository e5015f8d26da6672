"""Training and evaluation of GG-NN / GGS-NN on the generated tasks, ours or PyG's conv.

One model per task and question type, as in the paper. Node answers use node selection,
yes/no answers a graph-level readout; bAbI 19, shortest path and Eulerian circuit are
GGS-NN sequences, trained with the true intermediate annotations fed back (teacher forcing)
and supervised, and evaluated without them: a sequence counts only when every step is right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch_geometric
from torch import Tensor, nn
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from paperports.adapters.babi import TASKS, BabiGraphs
from paperports.integrations.pyg import GGNN, GGSNN, NodeSelection

__all__ = ["Settings", "accuracy_after_training", "heldout_accuracy", "make_model", "train_model"]


@dataclass(frozen=True)
class Settings:
    """Model and training settings shared by every task."""

    hidden: int = 10
    steps: int = 5
    updates: int = 400
    batch_size: int = 10
    lr: float = 0.01
    test_size: int = 500


class _UntypedConv(nn.Module):
    """``torch_geometric.nn.GatedGraphConv`` called as ours is, ``conv(x, edge_index,
    edge_type)``: blind to edge types and to the direction against the edges."""

    def __init__(self, hidden: int, steps: int) -> None:
        super().__init__()
        self.conv = torch_geometric.nn.GatedGraphConv(hidden, steps)

    def forward(self, x: Tensor, edge_index: Tensor, edge_type: Tensor | None) -> Tensor:
        out: Tensor = self.conv(x, edge_index)
        return out


class PygGGNN(GGNN):
    """:class:`GGNN` with ``torch_geometric.nn.GatedGraphConv``."""

    def __init__(self, *args: object, hidden: int, steps: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.conv = _UntypedConv(hidden, steps)


class PygGGSNN(GGSNN):
    """:class:`GGSNN` with ``torch_geometric.nn.GatedGraphConv``."""

    def __init__(self, *args: object, hidden: int, steps: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.conv_o = _UntypedConv(hidden, steps)


def make_model(task: str, variant: str, settings: Settings) -> nn.Module:
    """The model for ``task``: ``variant`` ``"ours"`` or ``"pyg"``."""
    spec = TASKS[task]
    common: dict[str, Any] = {
        "annotation_channels": spec.annotation_channels,
        "hidden_channels": settings.hidden,
        "num_layers": settings.steps,
    }
    sequence = spec.answer.endswith("sequence")
    kind = "graph" if spec.answer.startswith("class") else "node_selection"
    out = max(2, len(spec.classes))
    if variant == "ours":
        if sequence:
            return GGSNN(**common, num_edge_types=len(spec.edge_types), task=kind, out_channels=out)
        return GGNN(**common, num_edge_types=len(spec.edge_types), task=kind, out_channels=out)
    if variant != "pyg":
        raise ValueError(f"variant must be 'ours' or 'pyg', got {variant!r}")
    if sequence:
        return PygGGSNN(
            **common, task=kind, out_channels=out, hidden=settings.hidden, steps=settings.steps
        )
    return PygGGNN(
        **common, task=kind, out_channels=out, hidden=settings.hidden, steps=settings.steps
    )


def _sequence_length(batch: Batch) -> int:
    return int(batch.y.size(1))


def _loss(model: nn.Module, batch: Batch) -> Tensor:
    if isinstance(model, GGSNN):
        k = _sequence_length(batch)
        truth = [batch.annotations[:, i] for i in range(k - 1)]
        outputs, predicted = model(batch, k, annotations=truth)
        return model.loss(outputs, batch.y, batch, predicted, truth)
    assert isinstance(model, GGNN)
    return model.loss(model(batch), batch)


@torch.no_grad()
def _correct(model: nn.Module, batch: Batch, stop_channel: int | None = None) -> Tensor:
    """Per graph: whether the whole answer is right. A sequence of varying length
    (``stop_channel``: the annotation channel of the node that ends it) is right when the
    model's outputs up to the first time it outputs that node are the answer: the model
    decides the length."""
    model.eval()
    if isinstance(model, GGSNN):
        k = _sequence_length(batch)
        outputs, _ = model(batch, k)
        num_graphs = batch.num_graphs
        steps = []
        for out in outputs:
            if model.task == "graph":
                steps.append(out.argmax(-1))
            else:
                steps.append(NodeSelection.predict(out, batch.batch, num_graphs))
        predicted = torch.stack(steps, dim=1)
        valid = batch.y >= 0
        right: Tensor = ((predicted == batch.y) | ~valid).all(dim=1)
        if stop_channel is not None:
            stop = NodeSelection.predict(batch.x[:, stop_channel], batch.batch, num_graphs)
            ends = predicted == stop[:, None]
            # the length the model gave: up to its first output of the stop node
            first = torch.where(ends.any(dim=1), ends.float().argmax(dim=1) + 1, k + 1)
            right &= first == valid.sum(dim=1)
        return right
    assert isinstance(model, GGNN)
    right = model.predict(model(batch), batch) == batch.y.view(-1)
    return right


def train_model(
    task: str, num_train: int, seed: int, variant: str, settings: Settings
) -> tuple[nn.Module, list[float]]:
    """Train a model of ``variant`` on ``num_train`` generated stories (seed ``seed``); the
    model and its training loss at every update."""
    torch.manual_seed(seed)
    train = BabiGraphs(task, num_train, seed=seed)
    model = make_model(task, variant, settings)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    generator = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    while len(losses) < settings.updates:
        for batch in DataLoader(
            train, batch_size=settings.batch_size, shuffle=True, generator=generator
        ):
            model.train()
            optimizer.zero_grad()
            loss = _loss(model, batch)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == settings.updates:
                break
    return model, losses


def heldout_accuracy(model: nn.Module, task: str, seed: int, settings: Settings) -> float:
    """The accuracy on ``settings.test_size`` fresh stories (seed ``10_000 + seed``)."""
    test = BabiGraphs(task, settings.test_size, seed=10_000 + seed)
    batch = next(iter(DataLoader(test, batch_size=len(test))))
    return float(_correct(model, batch, TASKS[task].stop_channel).float().mean())


def accuracy_after_training(
    task: str, num_train: int, seed: int, variant: str, settings: Settings
) -> float:
    """Train on ``num_train`` generated stories (seed ``seed``) and return the accuracy on
    ``settings.test_size`` fresh ones."""
    model, _ = train_model(task, num_train, seed, variant, settings)
    return heldout_accuracy(model, task, seed, settings)
