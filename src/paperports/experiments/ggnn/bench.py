"""``paperports bench ggnn``: our GatedGraphConv against PyG's, and typed against single-type.

Forward and backward on one random graph of 10,000 nodes and 50,000 edges, 64 channels,
5 propagation steps, one process, same thread count; the two sides of each row alternate
(:func:`paired_median_times`):

1. one edge type with PyG's settings (``bidirectional=False, share_weights=False,
   gru="torch", propagation_bias=False``, PyG's weights loaded) against
   ``torch_geometric.nn.GatedGraphConv``;
2. 4 edge types x 2 directions against our own single-type layer with the same GRU.

The typed layer does 8 times the message transform of the single-type one: per step
``K * D * N * C^2`` multiply-adds for the messages against about ``6 * N * C^2`` for the
GRU, so its floor is about ``(8 + 6) / (1 + 6) = 2`` times the single-type time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch_geometric
from torch import nn

from paperports.benchmarking import BenchResult, BenchRow, paired_median_times
from paperports.integrations.pyg import GatedGraphConv
from paperports.registry import RunContext

NODES, EDGES, CHANNELS, STEPS, TYPES = 10_000, 50_000, 64, 5, 4


def _step(conv: nn.Module, *args: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        conv.zero_grad(set_to_none=True)
        conv(*args).sum().backward()

    return run


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
    t_ours, t_pyg = paired_median_times(
        _step(ours, x, edge_index), _step(pyg, x, edge_index), repeats=15, warmup=2
    )
    ctx.log(f"  single type: ours {t_ours * 1e3:.0f} ms, PyG {t_pyg * 1e3:.0f} ms")
    rows.append(
        BenchRow(
            "1 edge type, PyG settings / PyG GatedGraphConv",
            t_ours,
            t_pyg,
            "s",
            "ratio <= 1.0",
            extra=extra,
        )
    )
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
                "ratio <= 1.5",
                extra=extra | {"edge_types": TYPES, "gru": gru},
            )
        )
    return BenchResult("ggnn", "torch_geometric.nn.GatedGraphConv; our single-type layer", rows)
