"""PyG's ``Explainer`` on our layer and models at their defaults (bidirectional, typed):
GNNExplainer and the Captum-based explainer, for node and graph tasks."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor
from torch_geometric.explain import Explainer, GNNExplainer
from torch_geometric.explain.algorithm import CaptumExplainer
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks

from paperports.integrations.pyg import GGNN, GatedGraphConv

# 0 -> 1 -> 2 and, apart, 3 -> 4. Node 0 receives nothing along the edges: whatever reaches
# it comes against the edge direction, which only a bidirectional layer passes.
EDGE_INDEX = torch.tensor([[0, 1, 3], [1, 2, 4]])
EDGE_TYPE = torch.tensor([0, 1, 0])
BATCH = torch.tensor([0, 0, 0, 1, 1])


def _x() -> Tensor:
    return torch.rand(5, 2, generator=torch.Generator().manual_seed(0))


def test_an_edge_mask_gates_both_directions_of_its_edge() -> None:
    """With the mask of edge 0 -> 1 at zero, the layer computes what it computes without
    that edge, in both directions (the explainer's one entry per edge covers both)."""
    torch.manual_seed(0)
    conv = GatedGraphConv(6, 2, num_edge_types=2)
    x = _x()
    mask = torch.tensor([0.0, 1.0, 1.0])
    set_masks(conv, mask, EDGE_INDEX, apply_sigmoid=False)
    try:
        masked = conv(x, EDGE_INDEX, EDGE_TYPE)
    finally:
        clear_masks(conv)
    torch.testing.assert_close(masked, conv(x, EDGE_INDEX[:, 1:], EDGE_TYPE[1:]))
    assert (masked - conv(x, EDGE_INDEX, EDGE_TYPE)).abs().max() > 1e-4


def _explainer(model: GGNN, algorithm: object, task_level: str) -> Explainer:
    return Explainer(
        model,
        algorithm,  # type: ignore[arg-type]
        explanation_type="model",
        node_mask_type="attributes",
        edge_mask_type="object",
        model_config={
            "mode": "multiclass_classification",
            "task_level": task_level,
            "return_type": "raw",
        },
    )


def _algorithms() -> list[object]:
    pytest.importorskip("captum")
    return [GNNExplainer(epochs=20), CaptumExplainer("IntegratedGradients")]


@pytest.mark.parametrize("which", [0, 1], ids=["GNNExplainer", "Captum"])
def test_node_explanations_reach_against_the_edge_direction(which: int) -> None:
    torch.manual_seed(1)
    model = GGNN(2, 6, 2, num_edge_types=2, task="node", out_channels=3)
    explanation = _explainer(model, _algorithms()[which], "node")(
        _x(), EDGE_INDEX, edge_type=EDGE_TYPE, index=0
    )
    explanation.validate(raise_on_error=True)
    edge_mask = explanation.edge_mask.abs()
    assert edge_mask.shape == (3,)
    # 0 -> 1 reaches node 0 in one step against its direction, 1 -> 2 in two; 3 -> 4 never
    assert edge_mask[0] > 0 and edge_mask[1] > 0 and edge_mask[2] == 0
    assert explanation.node_mask.shape == (5, 2)
    assert explanation.node_mask[3:].abs().sum() == 0  # the other component is irrelevant


@pytest.mark.parametrize("which", [0, 1], ids=["GNNExplainer", "Captum"])
def test_graph_explanations_cover_the_explained_graph(which: int) -> None:
    torch.manual_seed(2)
    model = GGNN(2, 6, 2, num_edge_types=2, task="graph", out_channels=3)
    explanation = _explainer(model, _algorithms()[which], "graph")(
        _x(), EDGE_INDEX, edge_type=EDGE_TYPE, batch=BATCH, index=1
    )
    edge_mask = explanation.edge_mask.abs()
    assert edge_mask[2] > 0 and edge_mask[:2].sum() == 0  # graph 1 is 3 -> 4 alone
    assert explanation.node_mask[:3].abs().sum() == 0
