"""GGNN and GGSNN trained under `DistributedDataParallel` over a `DistributedSampler` of
graph batches, two gloo processes on CPU, end where one process with the same global
batches ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DistributedSampler
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from paperports.adapters.babi import TASKS, BabiGraphs
from paperports.integrations.pyg import GGNN, GGSNN

from .._distributed import gloo_group, settle, spawn

GLOBAL_BATCH, STEPS = 8, 3


def _model(kind: str) -> GGNN | GGSNN:
    torch.manual_seed(0)
    spec = TASKS["babi4"]
    cls = GGNN if kind == "ggnn" else GGSNN
    return cls(spec.annotation_channels, 8, 3, len(spec.edge_types), task="node_selection").double()


def _loss(model: torch.nn.Module, module: GGNN | GGSNN, batch: Batch) -> torch.Tensor:
    """GGNN: the selected node's NLL; GGSNN: two output steps, each to select it."""
    if isinstance(module, GGNN):
        return module.loss(model(batch), batch)
    outputs, _ = model(batch, num_steps=2)
    return module.loss(outputs, batch.y.view(-1, 1).repeat(1, 2), batch)


def _dataset() -> BabiGraphs:
    return BabiGraphs("babi4", num_examples=GLOBAL_BATCH * STEPS, seed=3)


def _train(model: torch.nn.Module, loader: DataLoader, module: GGNN | GGSNN) -> list[float]:
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for batch in loader:
        batch.x = batch.x.double()
        optimizer.zero_grad()
        loss = _loss(model, module, batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _worker(rank: int, port: int, kind: str, out_dir: str) -> None:
    with gloo_group(rank, port):
        model = _model(kind)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        dataset = _dataset()
        sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=False)
        loader = DataLoader(dataset, batch_size=GLOBAL_BATCH // 2, sampler=sampler)
        _train(ddp, loader, model)
        if rank == 0:
            torch.save(model.state_dict(), Path(out_dir) / "weights.pt")
        settle()
        del ddp  # before the group goes (see settle)


@pytest.mark.parametrize("kind", ["ggnn", "ggsnn"])
def test_two_processes_train_as_one_with_the_same_global_batches(kind: str, tmp_path: Path) -> None:
    spawn(_worker, kind, str(tmp_path))
    model = _model(kind)
    dataset = _dataset()
    # one process: batches of 8 in order; the two processes' samplers split each into the
    # even and the odd positions, 4 graphs each
    losses = _train(model, DataLoader(dataset, batch_size=GLOBAL_BATCH), model)
    assert len(losses) == STEPS and losses[-1] < losses[0]
    two = torch.load(tmp_path / "weights.pt")
    for name, weight in model.state_dict().items():
        torch.testing.assert_close(two[name], weight, msg=name)


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pyg_ddp.py"


def _example(processes: int, out: Path, *arguments: str) -> dict[str, torch.Tensor]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
        launcher += [str(processes)]
    command = [*launcher, str(EXAMPLE), "--out", str(out), "--steps", "3", "--batch", "8"]
    done = subprocess.run([*command, *arguments], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "metrics.json").read_text())["examples_per_second"] > 0
    return torch.load(out / "weights.pt")  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "arguments",
    [("--mode", "graphs"), ("--mode", "neighbors", "--neighbors", "-1")],
    ids=["graphs", "neighbors"],
)
def test_the_example_under_torchrun_trains_as_one_process(
    arguments: tuple[str, ...], tmp_path: Path
) -> None:
    """`examples/pyg_ddp.py`, which `benchmarks/scale_out.py` times, launched as a user
    launches it."""
    one = _example(1, tmp_path / "one", *arguments)
    two = _example(2, tmp_path / "two", *arguments)
    for name, weight in one.items():
        torch.testing.assert_close(two[name], weight, rtol=1e-4, atol=1e-5, msg=name)
