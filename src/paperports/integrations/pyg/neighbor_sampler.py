r"""``TorchNeighborSampler``: PyG's neighbour sampling in torch operations, for
``NeighborLoader`` on machines without ``pyg-lib`` or ``torch-sparse``, and in both edge
directions for :class:`GatedGraphConv` with ``bidirectional=True``."""

from __future__ import annotations

import warnings
from typing import Any, Literal, Optional, Union

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler import NeighborSampler, NumNeighbors, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from paperports._checks import check_bool, check_choice, check_int

__all__ = ["TorchNeighborSampler"]

_DIRECTIONS = ("forward", "backward", "both")
_SUBGRAPH_TYPES = ("directional", "bidirectional")


class TorchNeighborSampler(NeighborSampler):
    r"""The neighbour sampler of :class:`~torch_geometric.loader.NeighborLoader` (Hamilton
    et al. 2017, as PyG samples it), written in torch operations, for homogeneous graphs:

    .. code-block:: python

        sampler = TorchNeighborSampler(data, num_neighbors=[-1, -1, -1])
        loader = NeighborLoader(data, num_neighbors=[-1, -1, -1], batch_size=64,
                                neighbor_sampler=sampler)

    Starting from the seed nodes :math:`S_0`, hop :math:`h` draws for every node of
    :math:`S_{h-1}` up to ``num_neighbors[h-1]`` of its edges, uniformly (``-1``: all of
    them; ``replace=True``: exactly that many, with replacement), and :math:`S_h` is the
    nodes those edges reach that no earlier hop reached. The subgraph holds the seeds
    first, then each hop's new nodes in the order they were reached; its ``edge_index``
    keeps every edge's own direction, and ``e_id`` and every edge attribute
    (``edge_type`` included) follow the edges, as with PyG's own sampler.

    Which edges a node draws from is ``sample_direction``:

    - ``"forward"`` (PyG's default): its incoming edges, the ones a ``MessagePassing``
      layer reads with ``flow="source_to_target"``;
    - ``"backward"``: its outgoing edges;
    - ``"both"``: both, each edge taken once, which a layer passing messages in both
      directions needs: :class:`GatedGraphConv` with ``bidirectional=True`` (the paper's
      :math:`\mathbf{W}_\text{in}` and :math:`\mathbf{W}_\text{out}`) reads a node's
      outgoing edges too, so with ``"forward"`` sampling its output at the seeds is not the
      full graph's even when every neighbour is sampled.

    With every neighbour sampled (``-1``) over at least as many hops as the layer's
    propagation steps, a layer's output at the seeds equals its output on the whole graph
    (tested against full-graph propagation).

    PyG's ``NeighborSampler`` calls ``pyg-lib`` or ``torch-sparse``, whose builds follow
    each torch release; this one needs neither. It is slower than ``pyg-lib`` on large
    graphs (its hops are torch operations over all the frontier's candidate edges) and
    leaves out what only those libraries' samplers offer: temporal, weighted and disjoint
    sampling, induced subgraphs and heterogeneous graphs (convert a ``HeteroData`` with
    one node type with :class:`ToEdgeType`).

    Args:
        data (Data): The graph.
        num_neighbors (List[int]): Edges drawn per node at each hop (``-1``: all).
        subgraph_type (str, optional): :obj:`"directional"` or :obj:`"bidirectional"`
            (PyG's: every sampled edge also reversed). (default: :obj:`"directional"`)
        replace (bool, optional): Draw with replacement. (default: :obj:`False`)
        sample_direction (str, optional): :obj:`"forward"`, :obj:`"backward"` or
            :obj:`"both"`. (default: :obj:`"forward"`)

    ``NeighborLoader`` takes the hops from the sampler it is given, not from its own
    ``num_neighbors`` argument: pass the same list to both.
    """

    def __init__(
        self,
        data: Data,
        num_neighbors: Union[list[int], NumNeighbors],
        subgraph_type: Union[SubgraphType, str] = "directional",
        replace: bool = False,
        sample_direction: Literal["forward", "backward", "both"] = "forward",
    ) -> None:
        who = "TorchNeighborSampler"
        if not isinstance(data, Data):
            raise TypeError(
                f"{who}: data must be a homogeneous torch_geometric Data, got "
                f"{type(data).__name__} (a HeteroData with one node type converts with "
                "paperports' ToEdgeType)"
            )
        if data.edge_index is None:
            raise ValueError(f"{who}: data has no edge_index to sample from")
        subgraph = SubgraphType(subgraph_type).value
        check_choice("subgraph_type", subgraph, _SUBGRAPH_TYPES, who=who)
        check_choice("sample_direction", sample_direction, _DIRECTIONS, who=who)
        hops = num_neighbors.values if isinstance(num_neighbors, NumNeighbors) else num_neighbors
        if not isinstance(hops, (list, tuple)) or not hops:
            raise TypeError(
                f"{who}: num_neighbors must be a non-empty list of per-hop counts, got {hops!r}"
            )
        for hop, count in enumerate(hops):
            check_int(f"num_neighbors[{hop}]", count, minimum=-1, who=who)
        with warnings.catch_warnings():  # PyG warns that it lacks pyg-lib: we do not need it
            warnings.filterwarnings("ignore", message=".*without a 'pyg-lib' installation")
            super().__init__(
                data,
                list(hops),
                subgraph_type=subgraph,
                replace=check_bool("replace", replace, who=who),
                sample_direction="forward",
            )
        self.sample_direction = sample_direction  # type: ignore[assignment]
        # (pointer, the neighbour at each position, its edge id, whether it is the source)
        self._adjacencies: list[tuple[Tensor, Tensor, Tensor, bool]] = []
        source, target = data.edge_index.cpu().long()
        num_nodes = int(data.num_nodes)
        if sample_direction in ("forward", "both"):
            self._adjacencies.append((*_compressed(target, source, num_nodes), True))
        if sample_direction in ("backward", "both"):
            self._adjacencies.append((*_compressed(source, target, num_nodes), False))
        self._num_edges = int(source.numel())

    @property
    def edge_permutation(self) -> None:  # type: ignore[override]
        """None: the sampled edges' ids are the graph's own edge indices."""
        return None

    def _sample(  # type: ignore[override]
        self, seed: Tensor, seed_time: Optional[Tensor] = None, **kwargs: Any
    ) -> SamplerOutput:
        if isinstance(seed, dict):
            raise TypeError("TorchNeighborSampler samples homogeneous graphs only")
        if seed_time is not None:
            raise ValueError(
                "TorchNeighborSampler does not sample by time: input_time and time_attr "
                "need PyG's NeighborSampler with pyg-lib"
            )
        seed = seed.cpu().long()
        if torch.unique(seed).numel() != seed.numel():
            raise ValueError(
                "TorchNeighborSampler: the seed nodes of one batch must be distinct (input "
                "nodes repeated in one batch)"
            )
        local = torch.full((self.num_nodes,), -1, dtype=torch.long)
        local[seed] = torch.arange(seed.numel())
        taken = torch.zeros(self._num_edges, dtype=torch.bool)
        nodes, rows, cols, edges = [seed], [], [], []
        num_sampled_nodes, num_sampled_edges = [seed.numel()], []
        frontier, reached = seed, seed.numel()
        for count in self.num_neighbors.get_mapped_values():
            sources, targets, ids, neighbours = [], [], [], []
            for pointer, neighbour, edge_id, is_source in self._adjacencies:
                position, centre = _draw(pointer, frontier, int(count), self.replace)
                other = neighbour[position]
                sources.append(other if is_source else centre)
                targets.append(centre if is_source else other)
                ids.append(edge_id[position])
                neighbours.append(other)
            source, target, edge = torch.cat(sources), torch.cat(targets), torch.cat(ids)
            if len(self._adjacencies) > 1:  # an edge reached from both of its ends once
                keep = _first_occurrences(edge)
                keep = keep[~taken[edge[keep]]]
                source, target, edge = source[keep], target[keep], edge[keep]
                taken[edge] = True
            candidates = torch.cat(neighbours)
            fresh = candidates[_first_occurrences(candidates)]
            fresh = fresh[local[fresh] < 0]
            local[fresh] = torch.arange(reached, reached + fresh.numel())
            reached += fresh.numel()
            nodes.append(fresh)
            rows.append(local[source])
            cols.append(local[target])
            edges.append(edge)
            num_sampled_nodes.append(fresh.numel())
            num_sampled_edges.append(edge.numel())
            frontier = fresh
        return SamplerOutput(
            node=torch.cat(nodes),
            row=torch.cat(rows),
            col=torch.cat(cols),
            edge=torch.cat(edges),
            batch=None,
            num_sampled_nodes=num_sampled_nodes,
            num_sampled_edges=num_sampled_edges,
        )


def _compressed(by: Tensor, other: Tensor, num_nodes: int) -> tuple[Tensor, Tensor, Tensor]:
    """The edges grouped by ``by`` (CSC for targets, CSR for sources): the pointer, the
    other end at each position and the edge's id."""
    order = torch.argsort(by, stable=True)
    pointer = torch.zeros(num_nodes + 1, dtype=torch.long)
    pointer[1:] = torch.cumsum(torch.bincount(by, minlength=num_nodes), 0)
    return pointer, other[order], order


def _draw(pointer: Tensor, centres: Tensor, count: int, replace: bool) -> tuple[Tensor, Tensor]:
    """Positions of up to ``count`` edges per centre (all for ``-1``), and each one's centre."""
    start = pointer[centres]
    degree = pointer[centres + 1] - start
    if replace and count >= 0:
        drawn = torch.where(degree > 0, count, 0)
        centre_of = torch.repeat_interleave(torch.arange(centres.numel()), drawn)
        offset = (torch.rand(centre_of.numel()) * degree[centre_of]).long()
        return start[centre_of] + offset, centres[centre_of]
    centre_of = torch.repeat_interleave(torch.arange(centres.numel()), degree)
    first = torch.cumsum(degree, 0) - degree
    rank = torch.arange(centre_of.numel()) - first[centre_of]
    if count >= 0:  # a uniform draw of ``count`` per centre: its offsets shuffled, the first kept
        order = torch.argsort(torch.rand(centre_of.numel()))
        order = order[torch.argsort(centre_of[order], stable=True)]  # shuffled within centres
        keep = rank < count
        return start[centre_of[keep]] + rank[order][keep], centres[centre_of[keep]]
    return start[centre_of] + rank, centres[centre_of]


def _first_occurrences(values: Tensor) -> Tensor:
    """Indices of each distinct value's first occurrence, in the order they occur."""
    unique, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((unique.numel(),), values.numel(), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(values.numel()), reduce="amin")
    return torch.sort(first).values
