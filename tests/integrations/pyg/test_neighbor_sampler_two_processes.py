"""GatedGraphConv trained on NeighborLoader subgraphs under `DistributedDataParallel`, two
gloo processes on CPU each sampling around half of every global batch's seed nodes, ends
where one process with the whole batches ends."""

from __future__ import annotations

from pathlib import Path

import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from paperports.integrations.pyg import GatedGraphConv, TorchNeighborSampler

from .._distributed import gloo_group, settle, spawn

NUM_NODES, NUM_EDGES, NUM_TYPES, STEPS = 300, 450, 3, 2
GLOBAL_BATCH, BATCHES = 40, 3
HOPS = [-1] * STEPS  # every neighbour over the layer's steps: the seeds' outputs are exact


class NodeClassifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = GatedGraphConv(8, STEPS, NUM_TYPES, bidirectional=True)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, data: Data) -> torch.Tensor:
        return self.head(self.conv(data.x, data.edge_index, data.edge_type))


def _graph() -> Data:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(NUM_NODES, 4, generator=generator, dtype=torch.float64)
    return Data(
        x=x,
        y=(x[:, 0] > 0).long(),
        edge_index=torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=generator),
        edge_type=torch.randint(0, NUM_TYPES, (NUM_EDGES,), generator=generator),
    )


def _model() -> NodeClassifier:
    torch.manual_seed(0)
    return NodeClassifier().double()


def _train(model: torch.nn.Module, data: Data, seeds: torch.Tensor, batch_size: int) -> None:
    sampler = TorchNeighborSampler(data, HOPS, sample_direction="both")
    loader = NeighborLoader(
        data, HOPS, input_nodes=seeds, batch_size=batch_size, neighbor_sampler=sampler
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for batch in loader:
        optimizer.zero_grad()
        logits = model(batch)[: batch.batch_size]
        torch.nn.functional.cross_entropy(logits, batch.y[: batch.batch_size]).backward()
        optimizer.step()


def _seeds(rank: int | None) -> torch.Tensor:
    """Global batch ``b`` is nodes ``b * 40 ..``; rank r samples its r-th half."""
    seeds = torch.arange(GLOBAL_BATCH * BATCHES).view(BATCHES, GLOBAL_BATCH)
    if rank is None:
        return seeds.flatten()
    return seeds.view(BATCHES, 2, GLOBAL_BATCH // 2)[:, rank].flatten()


def _worker(rank: int, port: int, out_dir: str) -> None:
    with gloo_group(rank, port):
        model = _model()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        _train(ddp, _graph(), _seeds(rank), GLOBAL_BATCH // 2)
        if rank == 0:
            torch.save(model.state_dict(), Path(out_dir) / "weights.pt")
        settle()
        del ddp  # before the group goes (see settle)


def test_two_processes_sampling_halves_of_each_batch_train_as_one(tmp_path: Path) -> None:
    spawn(_worker, str(tmp_path))
    model = _model()
    before = {name: weight.clone() for name, weight in model.state_dict().items()}
    _train(model, _graph(), _seeds(None), GLOBAL_BATCH)
    two = torch.load(tmp_path / "weights.pt")
    for name, weight in model.state_dict().items():
        assert not torch.equal(weight, before[name]), name  # it trained
        torch.testing.assert_close(two[name], weight, msg=name)
