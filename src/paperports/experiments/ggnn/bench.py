"""``paperports bench ggnn``: our GatedGraphConv against PyG's, and typed against single-type.

Forward and backward on one random graph of 10,000 nodes and 50,000 edges, 64 channels,
5 propagation steps, one process, same thread count; the two sides of each row alternate
(:func:`paired_median_times`):

1. one edge type with PyG's settings (``bidirectional=False, share_weights=False,
   gru="torch", propagation_bias=False``, PyG's weights loaded) against
   ``torch_geometric.nn.GatedGraphConv``, five times (the goal holds in every run);
2. the paper's GRU (:class:`PaperGRUCell`) against ``torch.nn.GRUCell``, 5 steps of a
   10,000 x 64 state, forward and backward;
3. 4 edge types x 2 directions against our own single-type layer with the same GRU;
4. peak memory of one forward and backward on a graph of 1,000,000 edges (200,000 nodes),
   each side in a fresh process: our typed layer against PyG's layer, and against our own
   typed layer on a quarter of the graph (linear memory gives 4).

The typed layer does 8 times the message transform of the single-type one: per step
``K * D * N * C^2`` multiply-adds for the messages against about ``6 * N * C^2`` for the
GRU, so its floor is about ``(8 + 6) / (1 + 6) = 2`` times the single-type time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch_geometric
from torch import nn

from paperports.benchmarking import BenchResult, BenchRow, paired_median_times, peak_memory_mb
from paperports.integrations.pyg import GatedGraphConv, PaperGRUCell
from paperports.registry import RunContext

NODES, EDGES, CHANNELS, STEPS, TYPES = 10_000, 50_000, 64, 5, 4
LARGE_NODES, LARGE_EDGES = 200_000, 1_000_000
PYG_RUNS = 5


def _step(conv: nn.Module, *args: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        conv.zero_grad(set_to_none=True)
        conv(*args).sum().backward()

    return run


def _gru_steps(cell: nn.Module, generator: torch.Generator) -> Callable[[], None]:
    a = torch.randn(NODES, CHANNELS, generator=generator)
    h0 = torch.randn(NODES, CHANNELS, generator=generator)

    def run() -> None:
        cell.zero_grad(set_to_none=True)
        h = h0
        for _ in range(STEPS):
            h = cell(a, h)
        h.sum().backward()  # type: ignore[no-untyped-call]

    return run


def _peak_step_memory(layer: str, nodes: int, edges: int) -> Callable[[], object]:
    """One forward and backward of the layer on a random graph, for
    :func:`~paperports.benchmarking.peak_memory_mb` (in a fresh process)."""
    torch.set_num_threads(2)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(nodes, 16, generator=generator)
    edge_index = torch.randint(0, nodes, (2, edges), generator=generator)
    edge_type = torch.randint(0, TYPES, (edges,), generator=generator)
    if layer == "pyg":
        conv: nn.Module = torch_geometric.nn.GatedGraphConv(CHANNELS, STEPS)
        args: tuple[torch.Tensor, ...] = (x, edge_index)
    else:
        conv = GatedGraphConv(CHANNELS, STEPS, num_edge_types=TYPES)
        args = (x, edge_index, edge_type)
    return lambda: conv(*args).sum().backward()


def _memory_rows(ctx: RunContext) -> list[BenchRow]:
    measured = {}
    for key, layer, nodes, edges in [
        ("typed", "ours", LARGE_NODES, LARGE_EDGES),
        ("pyg", "pyg", LARGE_NODES, LARGE_EDGES),
        ("typed quarter", "ours", LARGE_NODES // 4, LARGE_EDGES // 4),
    ]:
        measured[key] = peak_memory_mb(_peak_step_memory, layer, nodes, edges)
        ctx.log(f"  peak memory, {key}: {measured[key]:.0f} MB")
    extra = {"nodes": LARGE_NODES, "edges": LARGE_EDGES, "channels": CHANNELS, "steps": STEPS}
    return [
        BenchRow(
            "peak memory, 1M edges: 4 types x 2 directions / PyG GatedGraphConv",
            measured["typed"],
            measured["pyg"],
            "MB",
            "report",
            extra=extra | {"edge_types": TYPES},
        ),
        BenchRow(
            "peak memory, 4 types x 2 directions: 1M edges / 250k edges",
            measured["typed"],
            measured["typed quarter"],
            "MB",
            "ratio <= 4.4 (linear: 4)",
            extra=extra | {"edge_types": TYPES, "smaller": [LARGE_NODES // 4, LARGE_EDGES // 4]},
        ),
    ]


def bench(ctx: RunContext) -> BenchResult:
    generator = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(NODES, 16, generator=generator)
    edge_index = torch.randint(0, NODES, (2, EDGES), generator=generator)
    edge_type = torch.randint(0, TYPES, (EDGES,), generator=generator)
    extra = {"nodes": NODES, "edges": EDGES, "channels": CHANNELS, "steps": STEPS}
    rows = []

    pyg = torch_geometric.nn.GatedGraphConv(CHANNELS, STEPS)
    ours = GatedGraphConv(
        CHANNELS,
        STEPS,
        bidirectional=False,
        share_weights=False,
        gru="torch",
        propagation_bias=False,  # PyG's layer has none
    )
    ours.load_state_dict(pyg.state_dict())
    ratios = []
    for run in range(PYG_RUNS):
        t_ours, t_pyg = paired_median_times(
            _step(ours, x, edge_index), _step(pyg, x, edge_index), repeats=9, warmup=2
        )
        ratios.append(t_ours / t_pyg)
        ctx.log(
            f"  single type, run {run + 1}: ours {t_ours * 1e3:.0f} ms, PyG {t_pyg * 1e3:.0f} ms"
        )
    rows.append(
        BenchRow(
            "1 edge type, PyG settings / PyG GatedGraphConv",
            t_ours,
            t_pyg,
            "s",
            "ratio <= 1.0",
            extra=extra | {"runs": PYG_RUNS, "run_ratios": ratios, "worst_ratio": max(ratios)},
        )
    )
    t_paper, t_torch = paired_median_times(
        _gru_steps(PaperGRUCell(CHANNELS, CHANNELS), generator),
        _gru_steps(nn.GRUCell(CHANNELS, CHANNELS), generator),
        repeats=15,
        warmup=2,
    )
    ctx.log(f"  GRU: paper {t_paper * 1e3:.0f} ms, torch {t_torch * 1e3:.0f} ms")
    rows.append(
        BenchRow(
            "paper GRU / torch GRUCell",
            t_paper,
            t_torch,
            "s",
            "ratio <= 1.05",
            extra={"nodes": NODES, "channels": CHANNELS, "steps": STEPS},
        )
    )
    # the share of (node, edge type, direction) rows that receive a message
    slots = torch.cat([edge_type, edge_type + TYPES]) * NODES + edge_index.flip(0).reshape(-1)
    occupied = torch.unique(slots).numel() / (NODES * 2 * TYPES)
    for gru in ("paper", "torch"):
        typed = GatedGraphConv(CHANNELS, STEPS, num_edge_types=TYPES, bidirectional=True, gru=gru)
        single = GatedGraphConv(CHANNELS, STEPS, bidirectional=False, gru=gru)
        t_typed, t_single = paired_median_times(
            _step(typed, x, edge_index, edge_type),
            _step(single, x, edge_index),
            repeats=15,
            warmup=2,
        )
        ctx.log(
            f"  {gru} GRU: 4 types x 2 directions {t_typed * 1e3:.0f} ms, "
            f"single {t_single * 1e3:.0f} ms"
        )
        rows.append(
            BenchRow(
                f"4 types x 2 directions / our 1 type ({gru} GRU)",
                t_typed,
                t_single,
                "s",
                "ratio <= 1.7",
                extra=extra | {"edge_types": TYPES, "gru": gru, "occupied_rows": occupied},
            )
        )
    rows.extend(_memory_rows(ctx))
    return BenchResult("ggnn", "torch_geometric.nn.GatedGraphConv; our single-type layer", rows)
