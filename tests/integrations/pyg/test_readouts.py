"""The paper's output models as PyG aggregations: per graph, with DataLoader batches."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from paperports.integrations.pyg import GatedGraphReadout, NodeSelection


def test_gated_readout_is_equation_7_per_graph() -> None:
    torch.manual_seed(0)
    readout = GatedGraphReadout(5, 4)
    x = torch.randn(7, 5)
    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    out = readout(x, batch)
    assert out.shape == (3, 4)
    for g in range(3):
        nodes = x[batch == g]
        expected = torch.tanh(
            (torch.sigmoid(readout.i(nodes)) * torch.tanh(readout.j(nodes))).sum(0)
        )
        torch.testing.assert_close(out[g], expected)
    ptr = torch.tensor([0, 3, 5, 7])
    torch.testing.assert_close(readout(x, ptr=ptr), out)
    assert readout(x).shape == (1, 4)  # no batch: one graph


def test_gated_readout_with_the_dataloader_and_an_empty_graph_slot() -> None:
    torch.manual_seed(1)
    readout = GatedGraphReadout(3, 2)
    graphs = [
        Data(x=torch.randn(n, 3), edge_index=torch.empty(2, 0, dtype=torch.long)) for n in (2, 4, 3)
    ]
    batch = next(iter(DataLoader(graphs, batch_size=3)))
    out = readout(batch.x, batch.batch, dim_size=4)
    assert out.shape == (4, 2)
    torch.testing.assert_close(out[3], torch.zeros(2))  # tanh(0): a graph with no node
    for g, data in enumerate(graphs):
        torch.testing.assert_close(out[g], readout(data.x)[0])


def test_node_selection_is_a_softmax_within_each_graph() -> None:
    torch.manual_seed(2)
    select = NodeSelection(4)
    x = torch.randn(6, 4)
    batch = torch.tensor([0, 0, 1, 1, 1, 2])
    ptr = torch.tensor([0, 2, 5, 6])
    log_probs = select(x, batch, num_graphs=3)
    sums = torch.zeros(3).index_add_(0, batch, log_probs.exp())
    torch.testing.assert_close(sums, torch.ones(3))
    assert log_probs[5] == 0.0  # a one-node graph selects its node for sure
    target = torch.tensor([1, 0, 0])
    expected = -(log_probs[1] + log_probs[2] + log_probs[5]) / 3
    torch.testing.assert_close(NodeSelection.loss(log_probs, target, ptr), expected)
    chosen = NodeSelection.predict(log_probs, batch, 3)
    for g in range(3):
        local = log_probs[ptr[g] : ptr[g + 1]]
        assert chosen[g] == local.argmax()


def test_node_selection_loss_reads_only_the_graphs_the_mask_keeps() -> None:
    torch.manual_seed(0)
    sel = NodeSelection(3)
    x = torch.randn(7, 3)
    ptr = torch.tensor([0, 3, 5, 7])
    index = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    log_probs = sel(x, index, ptr, 3)
    target = torch.tensor([2, -1, 1])  # graph 1's sequence is over: no target
    keep = target >= 0
    expected = -(log_probs[0 + 2] + log_probs[5 + 1]) / 2
    assert torch.allclose(NodeSelection.loss(log_probs, target, ptr, mask=keep), expected)
    with pytest.raises(ValueError, match=r"\[0, inf\)"):
        NodeSelection.loss(log_probs, target, ptr)  # without the mask, -1 is refused
    with pytest.raises(ValueError, match="graph 2 has 2 nodes"):
        NodeSelection.loss(log_probs, torch.tensor([2, -1, 5]), ptr, mask=keep)
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        NodeSelection.loss(log_probs, target, ptr, mask=keep.long())
