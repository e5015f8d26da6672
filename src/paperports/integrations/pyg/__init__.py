"""PyTorch Geometric plugins (``pip install "paperports[pyg]"``): GG-NN and GGS-NN.

- :class:`GatedGraphConv`: the gated graph convolution of Li et al. (2016) with edge types
  and directions, a ``MessagePassing`` layer;
- :class:`GatedGraphReadout` (an ``Aggregation``) and :class:`NodeSelection`: the paper's
  graph-level and node-selection outputs;
- :class:`GGNN` and :class:`GGSNN`: the models on PyG ``Data`` / ``Batch`` objects;
- :class:`PaperGRUCell`: the GRU as the paper writes it;
- :class:`ToEdgeType`: the ``edge_type`` vector from a ``HeteroData`` with one node type
  or a one-hot ``edge_attr``;
- :class:`TorchNeighborSampler`: ``NeighborLoader``'s neighbour sampling in torch
  operations (no ``pyg-lib`` needed), in both edge directions where the layer needs them.
"""

from paperports._imports import require

require("pyg", "torch_geometric")

from paperports.integrations.pyg.gated_graph_conv import GatedGraphConv  # noqa: E402
from paperports.integrations.pyg.ggnn import GGNN, GGSNN  # noqa: E402
from paperports.integrations.pyg.gru import PaperGRUCell  # noqa: E402
from paperports.integrations.pyg.neighbor_sampler import TorchNeighborSampler  # noqa: E402
from paperports.integrations.pyg.readouts import GatedGraphReadout, NodeSelection  # noqa: E402
from paperports.integrations.pyg.transforms import ToEdgeType  # noqa: E402

__all__ = [
    "GGNN",
    "GGSNN",
    "GatedGraphConv",
    "GatedGraphReadout",
    "NodeSelection",
    "PaperGRUCell",
    "ToEdgeType",
    "TorchNeighborSampler",
]
