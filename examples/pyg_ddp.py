"""GG-NN trained under `DistributedDataParallel` the PyG way, on one process or several:

    python examples/pyg_ddp.py --mode graphs --out /tmp/one
    torchrun --nproc_per_node 2 examples/pyg_ddp.py --mode graphs --out /tmp/two

`--mode graphs`: `GGNN` on bAbI 4 graphs, a `DistributedSampler` giving each process its
share of every global batch. `--mode neighbors`: `GatedGraphConv` with a linear head
classifying the nodes of one typed graph larger than a batch, each process sampling
subgraphs around its share of the seed nodes with `NeighborLoader` (`--neighbors` per hop
over two hops, in both directions, `TorchNeighborSampler`; `-1`: every neighbour, and then
the seeds' outputs are the full graph's, so one process and several train alike). On CPU
the processes talk through gloo; on GPUs, nccl. The first process writes `metrics.json`
(the training time, loading and sampling included, and the examples, graphs or seed nodes,
per second over all processes) and `weights.pt`. SGD with momentum: Adam's step, about
its learning rate whatever the gradient's size, would turn float rounding in a gradient
that should be zero (the node-selection score's bias, which the softmax over nodes
ignores) into a full step, and one process and two would part.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader, NeighborLoader

from paperports.adapters.babi import TASKS, BabiGraphs
from paperports.integrations.pyg import GGNN, GatedGraphConv, TorchNeighborSampler

NUM_NODES, NUM_EDGES, NUM_TYPES, NEIGHBORS = 20_000, 60_000, 3, 10


class NodeClassifier(torch.nn.Module):
    def __init__(self, steps: int) -> None:
        super().__init__()
        self.conv = GatedGraphConv(16, steps, NUM_TYPES)
        self.head = torch.nn.Linear(16, 2)

    def forward(self, data: Data) -> torch.Tensor:
        return self.head(self.conv(data.x, data.edge_index, data.edge_type))


def graph_batches(
    batch: int, steps: int, rank: int, world: int
) -> tuple[torch.nn.Module, Iterable[Data]]:
    spec = TASKS["babi4"]
    torch.manual_seed(0)
    model = GGNN(spec.annotation_channels, 8, 5, len(spec.edge_types), task="node_selection")
    dataset = BabiGraphs("babi4", num_examples=batch * steps, seed=0)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    return model, DataLoader(dataset, batch_size=batch // world, sampler=sampler)


def node_batches(
    batch: int, steps: int, rank: int, world: int, neighbors: int = NEIGHBORS
) -> tuple[torch.nn.Module, Iterable[Data]]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(NUM_NODES, 4, generator=generator)
    data = Data(
        x=x,
        y=(x[:, 0] > 0).long(),
        edge_index=torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=generator),
        edge_type=torch.randint(0, NUM_TYPES, (NUM_EDGES,), generator=generator),
    )
    hops = [neighbors, neighbors]
    seeds = torch.arange(batch * steps).view(steps, world, batch // world)[:, rank].flatten()
    sampler = TorchNeighborSampler(data, hops, sample_direction="both")
    loader = NeighborLoader(
        data, hops, input_nodes=seeds, batch_size=batch // world, neighbor_sampler=sampler
    )
    torch.manual_seed(0)
    return NodeClassifier(len(hops)), loader


def loss(model: torch.nn.Module, module: torch.nn.Module, batch: Data) -> torch.Tensor:
    if isinstance(module, GGNN):
        return module.loss(model(batch), batch)
    logits = model(batch)[: batch.batch_size]
    return torch.nn.functional.cross_entropy(logits, batch.y[: batch.batch_size])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["graphs", "neighbors"], default="graphs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--neighbors", type=int, default=NEIGHBORS)
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.batch % world or args.batch < world:
        parser.error(f"--batch must be a multiple of the {world} processes, got {args.batch}")
    if args.mode == "neighbors" and args.batch * args.steps > NUM_NODES:
        parser.error(f"--batch x --steps seed nodes must be at most the graph's {NUM_NODES}")
    if world > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if world > 1 else 0
    if args.mode == "graphs":
        module, batches = graph_batches(args.batch, args.steps, rank, world)
    else:
        module, batches = node_batches(args.batch, args.steps, rank, world, args.neighbors)
    model = torch.nn.parallel.DistributedDataParallel(module) if world > 1 else module
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    began = time.perf_counter()
    for batch in batches:
        optimizer.zero_grad()
        loss(model, module, batch).backward()
        optimizer.step()
    seconds = time.perf_counter() - began
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        metrics = {
            "train_runtime": seconds,
            "examples_per_second": args.batch * args.steps / seconds,
        }
        (args.out / "metrics.json").write_text(json.dumps(metrics) + "\n")
        torch.save(module.state_dict(), args.out / "weights.pt")
    if world > 1:
        dist.barrier()
        del model
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
