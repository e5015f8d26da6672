r"""``ToEdgeType``: the ``edge_type`` vector of GG-NN from the other ways PyG holds typed
edges (a ``HeteroData`` with one node type, or a one-hot ``edge_attr``)."""

from typing import Union

import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.transforms import BaseTransform

from paperports._checks import check_bool, values_known

__all__ = ["ToEdgeType"]


class ToEdgeType(BaseTransform):
    r"""Gives a graph the integer ``edge_type`` that :class:`GatedGraphConv`, :class:`GGNN`
    and :class:`GGSNN` read (Li et al. 2016: one propagation matrix per edge type), from
    the two other forms of typed edges in PyG:

    - a :class:`~torch_geometric.data.HeteroData` with **one node type** and several
      relations, the natural PyG form of a typed graph (for example a heap graph whose
      pointer fields are relations): converted by its own
      :meth:`~torch_geometric.data.HeteroData.to_homogeneous`, the relation of each edge
      numbered in the order of ``data.edge_types``;
    - a :class:`~torch_geometric.data.Data` whose ``edge_attr`` is **one-hot**,
      ``(num_edges, num_edge_types)`` (as Devign-style code graphs carry their edge
      kinds): ``edge_type = edge_attr.argmax(-1)``, after checking that every row holds
      exactly one 1 and zeros elsewhere (a multi-hot or weighted row has no single type).

    A ``Data`` that already has ``edge_type`` is returned as it is. As every PyG transform,
    it works on a shallow copy: the input graph keeps its ``edge_attr``.

    Args:
        attr (str, optional): The one-hot edge attribute. (default: :obj:`"edge_attr"`)
        remove_attr (bool, optional): Drop ``attr`` once converted. (default: :obj:`True`)
    """

    def __init__(self, attr: str = "edge_attr", remove_attr: bool = True) -> None:
        if not isinstance(attr, str) or not attr:
            raise TypeError(f"ToEdgeType: attr must be an attribute name, got {attr!r}")
        self.attr = attr
        self.remove_attr = check_bool("remove_attr", remove_attr, who="ToEdgeType")

    def forward(self, data: Union[Data, HeteroData]) -> Data:  # type: ignore[override]
        if isinstance(data, HeteroData):
            return self._from_hetero(data)
        if not isinstance(data, Data):
            raise TypeError(
                f"ToEdgeType takes a torch_geometric Data or HeteroData, got {type(data).__name__}"
            )
        if getattr(data, "edge_type", None) is not None:
            return data
        one_hot = getattr(data, self.attr, None)
        if one_hot is None:
            raise ValueError(
                f"ToEdgeType: the graph has neither edge_type nor a one-hot {self.attr!r} "
                "to read the edge types from"
            )
        data.edge_type = self._types(one_hot, data.num_edges)
        if self.remove_attr:
            del data[self.attr]
        return data

    def _types(self, one_hot: object, num_edges: int) -> torch.Tensor:
        if not isinstance(one_hot, torch.Tensor) or one_hot.dim() != 2:
            shape = tuple(one_hot.shape) if isinstance(one_hot, torch.Tensor) else None
            raise ValueError(
                f"ToEdgeType: {self.attr} must be one-hot, (num_edges, num_edge_types); got "
                f"{shape if shape is not None else type(one_hot).__name__}"
            )
        if one_hot.size(0) != num_edges:
            raise ValueError(
                f"ToEdgeType: {self.attr} must have one row per edge ({num_edges}), got "
                f"{one_hot.size(0)}"
            )
        if values_known(one_hot):
            hot = one_hot == 1
            bad = ~((hot | (one_hot == 0)).all(-1) & (hot.sum(-1) == 1))
            if bool(bad.any()):
                row = int(bad.nonzero()[0])
                raise ValueError(
                    f"ToEdgeType: {self.attr} must be one-hot, exactly one 1 per edge and "
                    f"zeros elsewhere; edge {row} has {one_hot[row].tolist()}"
                )
        return one_hot.argmax(-1)

    def _from_hetero(self, data: HeteroData) -> Data:
        if len(data.node_types) != 1:
            raise ValueError(
                f"ToEdgeType: GG-NN has one kind of node state, so a HeteroData needs one "
                f"node type; this one has {data.node_types}. Encode the node types in the "
                "annotations x (for example with data.to_homogeneous()'s node_type) instead"
            )
        store = data[data.node_types[0]]
        for edge_type in data.edge_types:
            for key in data[edge_type].keys():  # noqa: SIM118 (a storage, not a dict)
                if key not in ("edge_index", "num_edges"):
                    raise ValueError(
                        f"ToEdgeType: relation {edge_type} carries {key!r}, which GG-NN does "
                        "not read; drop it before converting (its edges keep their type)"
                    )
        homogeneous = data.to_homogeneous(add_node_type=False, add_edge_type=True)
        if "x" in store and getattr(homogeneous, "x", None) is None:
            homogeneous.x = store.x
        return homogeneous

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(attr={self.attr!r})"
