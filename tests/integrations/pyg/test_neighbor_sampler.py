"""TorchNeighborSampler: PyG's NeighborLoader sampling a typed graph larger than one batch,
against full-graph propagation at the seeds."""

from __future__ import annotations

import pytest
import torch
import torch_geometric.typing
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.sampler import NeighborSampler

from paperports.integrations.pyg import GatedGraphConv, TorchNeighborSampler

NUM_NODES, NUM_EDGES, NUM_TYPES, STEPS = 600, 900, 3, 3


def _graph(seed: int = 0) -> Data:
    """A sparse typed graph: three hops from a batch of seeds reach a part of it only."""
    generator = torch.Generator().manual_seed(seed)
    return Data(
        x=torch.randn(NUM_NODES, 4, generator=generator),
        edge_index=torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=generator),
        edge_type=torch.randint(0, NUM_TYPES, (NUM_EDGES,), generator=generator),
    )


def _loader(data: Data, hops: list[int], **kwargs: object) -> NeighborLoader:
    sampler = TorchNeighborSampler(data, hops, **kwargs)  # type: ignore[arg-type]
    return NeighborLoader(data, hops, batch_size=32, shuffle=True, neighbor_sampler=sampler)


@torch.no_grad()
def _largest_error(conv: GatedGraphConv, data: Data, loader: NeighborLoader) -> float:
    full = conv(data.x, data.edge_index, data.edge_type)
    largest, batches = 0.0, 0
    for batch in loader:
        assert batch.num_nodes < data.num_nodes  # a subgraph, not the whole graph
        seeds = batch.n_id[: batch.batch_size]
        out = conv(batch.x, batch.edge_index, batch.edge_type)[: batch.batch_size]
        largest = max(largest, float((out - full[seeds]).abs().max()))
        batches += 1
    assert batches == -(-NUM_NODES // 32)
    return largest


@pytest.mark.parametrize("gru", ["paper", "torch"])
def test_every_neighbour_over_the_layers_steps_gives_the_full_graphs_output(gru: str) -> None:
    torch.manual_seed(0)
    data = _graph()
    conv = GatedGraphConv(8, STEPS, NUM_TYPES, bidirectional=False, gru=gru).eval()
    assert _largest_error(conv, data, _loader(data, [-1] * STEPS)) < 1e-5
    # one hop short of the propagation steps, the seeds miss what lies three edges away
    assert _largest_error(conv, data, _loader(data, [-1] * (STEPS - 1))) > 1e-3


def test_a_bidirectional_layer_needs_both_directions_sampled() -> None:
    torch.manual_seed(0)
    data = _graph(1)
    conv = GatedGraphConv(8, STEPS, NUM_TYPES, bidirectional=True).eval()
    both = _loader(data, [-1] * STEPS, sample_direction="both")
    assert _largest_error(conv, data, both) < 1e-5
    # incoming edges only: the paper's W_out messages from a seed's successors are missing
    assert _largest_error(conv, data, _loader(data, [-1] * STEPS)) > 1e-3


@pytest.mark.parametrize("direction", ["forward", "backward", "both"])
def test_the_subgraph_carries_each_sampled_edge_with_its_type(direction: str) -> None:
    torch.manual_seed(1)
    data = _graph()
    for batch in _loader(data, [2, 3], sample_direction=direction):
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])
        assert torch.equal(batch.edge_type, data.edge_type[batch.e_id])
        assert torch.equal(batch.x, data.x[batch.n_id])
        assert batch.e_id.unique().numel() == batch.e_id.numel()  # no edge twice
        assert batch.n_id.unique().numel() == batch.n_id.numel()
        assert batch.num_sampled_nodes[0] == batch.batch_size
        assert sum(batch.num_sampled_nodes) == batch.num_nodes
        assert sum(batch.num_sampled_edges) == batch.num_edges


def test_a_hop_draws_at_most_its_count_per_node_and_all_when_fewer() -> None:
    torch.manual_seed(2)
    data = _graph()
    in_degree = torch.bincount(data.edge_index[1], minlength=NUM_NODES)
    for count in (1, 2):
        for batch in _loader(data, [count]):
            targets = batch.n_id[batch.edge_index[1]]
            drawn = torch.bincount(targets, minlength=NUM_NODES)[batch.n_id[: batch.batch_size]]
            wanted = in_degree[batch.n_id[: batch.batch_size]].clamp(max=count)
            assert torch.equal(drawn, wanted)


def test_with_replacement_every_node_with_edges_draws_exactly_its_count() -> None:
    torch.manual_seed(3)
    data = _graph()
    in_degree = torch.bincount(data.edge_index[1], minlength=NUM_NODES)
    for batch in _loader(data, [4], replace=True):
        seeds = batch.n_id[: batch.batch_size]
        hop = batch.num_sampled_edges[0]
        drawn = torch.bincount(batch.n_id[batch.edge_index[1, :hop]], minlength=NUM_NODES)
        assert torch.equal(drawn[seeds], torch.where(in_degree[seeds] > 0, 4, 0))


def test_the_draw_is_uniform_over_a_nodes_edges() -> None:
    # one node with 6 incoming edges, 2 drawn 3,000 times: each edge about 1,000 times
    data = Data(x=torch.zeros(7, 1), edge_index=torch.tensor([[1, 2, 3, 4, 5, 6], [0] * 6]))
    sampler = TorchNeighborSampler(data, [2])
    torch.manual_seed(4)
    counts = torch.zeros(6)
    for _ in range(3000):
        out = sampler._sample(torch.tensor([0]))
        assert out.edge.numel() == 2 and out.edge.unique().numel() == 2
        counts += torch.bincount(out.edge, minlength=6)
    assert bool(((counts - 1000).abs() < 120).all()), counts


def test_the_same_seed_draws_the_same_subgraphs() -> None:
    data = _graph()

    def first_batch() -> torch.Tensor:
        torch.manual_seed(5)
        return next(iter(_loader(data, [2, 2]))).e_id

    assert torch.equal(first_batch(), first_batch())


def test_link_neighbor_loader_samples_around_each_edges_ends() -> None:
    data = _graph()
    sampler = TorchNeighborSampler(data, [-1, -1])
    loader = LinkNeighborLoader(data, [-1, -1], batch_size=16, neighbor_sampler=sampler)
    batch = next(iter(loader))
    ends = batch.n_id[batch.edge_label_index]
    assert torch.equal(ends, data.edge_index[:, batch.input_id])
    assert torch.equal(batch.edge_type, data.edge_type[batch.e_id])


@pytest.mark.skipif(
    not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE),
    reason="PyG's own NeighborSampler needs pyg-lib or torch-sparse, not installed here",
)
def test_every_neighbour_reaches_the_nodes_and_edges_pygs_sampler_reaches() -> None:
    data = _graph()
    seeds = torch.arange(0, NUM_NODES, 7)
    ours = TorchNeighborSampler(data, [-1, -1])._sample(seeds)
    pygs = NeighborSampler(data, [-1, -1])._sample(seeds)
    assert set(ours.node.tolist()) == set(pygs.node.tolist())
    theirs = NeighborSampler(data, [-1, -1]).edge_permutation
    pyg_edges = pygs.edge if theirs is None else theirs[pygs.edge]
    assert set(ours.edge.tolist()) == set(pyg_edges.tolist())


def test_bad_input_is_refused_with_the_argument_named() -> None:
    data = _graph()
    hetero = HeteroData()
    hetero["cell"].x = torch.zeros(2, 1)
    with pytest.raises(TypeError, match=r"homogeneous.*ToEdgeType"):
        TorchNeighborSampler(hetero, [2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="subgraph_type"):
        TorchNeighborSampler(data, [2], subgraph_type="induced")
    with pytest.raises(ValueError, match="sample_direction"):
        TorchNeighborSampler(data, [2], sample_direction="sideways")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num_neighbors"):
        TorchNeighborSampler(data, [])
    with pytest.raises(ValueError, match=r"num_neighbors\[1\]"):
        TorchNeighborSampler(data, [2, -2])
    with pytest.raises(TypeError, match=r"num_neighbors\[0\]"):
        TorchNeighborSampler(data, [2.5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="replace"):
        TorchNeighborSampler(data, [2], replace="yes")  # type: ignore[arg-type]
    sampler = TorchNeighborSampler(data, [2])
    with pytest.raises(ValueError, match="distinct"):
        sampler._sample(torch.tensor([3, 3]))
    with pytest.raises(ValueError, match="time"):
        sampler._sample(torch.tensor([3]), torch.tensor([1.0]))


def test_a_sampled_batch_without_edge_types_is_refused_by_a_typed_layer() -> None:
    data = _graph()
    del data.edge_type
    batch = next(iter(_loader(data, [-1, -1])))
    conv = GatedGraphConv(8, 2, NUM_TYPES)
    with pytest.raises(ValueError, match=r"edge_type is required.*num_edge_types=3"):
        conv(batch.x, batch.edge_index, batch.get("edge_type"))
