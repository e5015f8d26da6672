"""ToEdgeType: typed graphs from a HeteroData with one node type or a one-hot edge_attr."""

from __future__ import annotations

import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import DataLoader

from paperports.integrations.pyg import GGNN, ToEdgeType

EDGE_INDEX = torch.tensor([[0, 1, 2, 4, 4], [1, 2, 3, 0, 2]])
EDGE_TYPE = torch.tensor([0, 0, 0, 1, 1])


def _heap_graph() -> HeteroData:
    """Cells with a `next` and a `data` field: a typed graph in PyG's own typed form."""
    data = HeteroData()
    data["cell"].x = torch.rand(5, 2, generator=torch.Generator().manual_seed(0))
    data["cell"].y = torch.tensor([1])
    data["cell", "next", "cell"].edge_index = EDGE_INDEX[:, :3]
    data["cell", "data", "cell"].edge_index = EDGE_INDEX[:, 3:]
    return data


def test_a_heterodata_graph_gives_the_typed_graph_its_relations_number() -> None:
    hetero = _heap_graph()
    data = ToEdgeType()(hetero)
    assert torch.equal(data.edge_index, EDGE_INDEX) and torch.equal(data.edge_type, EDGE_TYPE)
    assert torch.equal(data.x, hetero["cell"].x) and torch.equal(data.y, hetero["cell"].y)
    torch.manual_seed(0)
    model = GGNN(2, 6, 2, num_edge_types=2)
    torch.testing.assert_close(model(data), model(hetero["cell"].x, EDGE_INDEX, EDGE_TYPE))


def test_a_one_hot_edge_attr_becomes_edge_type_and_batches() -> None:
    one_hot = torch.nn.functional.one_hot(EDGE_TYPE, 3).float()
    data = Data(x=torch.rand(5, 2), edge_index=EDGE_INDEX, edge_attr=one_hot)
    typed = ToEdgeType()(data)
    assert torch.equal(typed.edge_type, EDGE_TYPE) and "edge_attr" not in typed
    assert "edge_attr" in data  # the input is left as it was
    assert "edge_attr" in ToEdgeType(remove_attr=False)(data)
    batch = next(iter(DataLoader([typed, typed], batch_size=2)))
    assert torch.equal(batch.edge_type, EDGE_TYPE.repeat(2))
    already = Data(x=torch.rand(5, 2), edge_index=EDGE_INDEX, edge_type=EDGE_TYPE)
    assert ToEdgeType()(already).edge_type is already.edge_type
