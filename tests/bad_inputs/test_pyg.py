"""Bad input to the PyG plugin (GatedGraphConv, readouts, GGNN, GGSNN, PaperGRUCell,
ToEdgeType)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch_geometric.data import Batch, Data, HeteroData

from paperports.integrations.pyg import (
    GGNN,
    GGSNN,
    GatedGraphConv,
    GatedGraphReadout,
    NodeSelection,
    PaperGRUCell,
    ToEdgeType,
)

from .conftest import assert_refused, case

DTYPES = [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool]
X = torch.randn(4, 2)
EDGES = torch.tensor([[0, 1, 2], [1, 2, 3]])
TYPES = torch.tensor([0, 1, 0])


def conv(**kw: Any) -> GatedGraphConv:
    return GatedGraphConv(**({"out_channels": 4, "num_layers": 2, "num_edge_types": 2} | kw))


def graph(**kw: Any) -> Data:
    return Data(**({"x": torch.ones(4, 1), "edge_index": EDGES, "edge_type": TYPES} | kw))


def _hetero(node_types: int, edge_attr: bool = False) -> HeteroData:
    """A typed graph as a HeteroData: cells (and papers) with two relations."""
    data = HeteroData()
    data["cell"].x = torch.ones(4, 1)
    data["cell", "next", "cell"].edge_index = EDGES
    data["cell", "data", "cell"].edge_index = EDGES.flip(0)
    if node_types == 2:
        data["paper"].x = torch.ones(2, 1)
    if edge_attr:
        data["cell", "next", "cell"].edge_attr = torch.ones(3, 2)
    return data


def two_graphs() -> Batch:
    return Batch.from_data_list([graph(y=torch.tensor([3])), graph(y=torch.tensor([1]))])


def ggnn(**kw: Any) -> GGNN:
    return GGNN(
        **(
            {"annotation_channels": 1, "hidden_channels": 4, "num_layers": 2, "num_edge_types": 2}
            | kw
        )
    )


def ggsnn(**kw: Any) -> GGSNN:
    return GGSNN(
        **(
            {"annotation_channels": 1, "hidden_channels": 4, "num_layers": 2, "num_edge_types": 2}
            | kw
        )
    )


CONFIG = [
    *[
        case(f"GatedGraphConv {k}={v!r}", lambda k=k, v=v: conv(**{k: v}), k)
        for k, v in [
            ("out_channels", 0),
            ("out_channels", 4.0),
            ("num_layers", 0),
            ("num_layers", "2"),
            ("num_edge_types", 0),
            ("num_edge_types", 1.5),
            ("bidirectional", None),
            ("share_weights", 1),
            ("bias", "yes"),
            ("propagation_bias", 0),
            ("gru", "lstm"),
            ("aggr", "median-ish"),
        ]
    ],
    *[
        case(f"GGNN {k}={v!r}", lambda k=k, v=v: ggnn(**{k: v}), k)
        for k, v in [
            ("annotation_channels", 0),
            ("hidden_channels", 0),
            ("num_layers", 2.5),
            ("task", "edge"),
            ("out_channels", 0),
            ("num_edge_types", -1),
        ]
    ],
    case(
        "GGNN state narrower than annotations",
        lambda: ggnn(annotation_channels=5),
        "hidden_channels",
        "annotation_channels",
    ),
    *[
        case(f"GGSNN {k}={v!r}", lambda k=k, v=v: ggsnn(**{k: v}), k)
        for k, v in [
            ("hidden_channels", -4),
            ("task", "node"),
            ("out_channels", 1.5),
            ("share_propagation", "no"),
        ]
    ],
    case("readout in_channels=0", lambda: GatedGraphReadout(0, 4), "in_channels"),
    case("readout out_channels=2.0", lambda: GatedGraphReadout(3, 2.0), "out_channels"),
    case("node selection in_channels=0", lambda: NodeSelection(0), "in_channels"),
    case("node selection hidden_channels=0", lambda: NodeSelection(3, 0), "hidden_channels"),
    case("GRU hidden_size=0", lambda: PaperGRUCell(3, 0), "hidden_size"),
    case("GRU input_size=1.5", lambda: PaperGRUCell(1.5, 3), "input_size"),
    case("GRU bias=None", lambda: PaperGRUCell(3, 3, None), "bias"),
]

DTYPE = [
    *[case(f"conv x {d}", lambda d=d: conv()(X.to(d), EDGES, TYPES), "x", str(d)) for d in DTYPES],
    case("double conv, float x", lambda: conv().double()(X, EDGES, TYPES), "float32", "float64"),
    case(
        "conv edge_index float", lambda: conv()(X, EDGES.float(), TYPES), "edge_index", "integers"
    ),
    case("conv edge_index bool", lambda: conv()(X, EDGES.bool(), TYPES), "edge_index"),
    case("conv edge_type float", lambda: conv()(X, EDGES, TYPES.float()), "edge_type", "integers"),
    case(
        "conv edge_weight int", lambda: conv()(X, EDGES, TYPES, torch.ones(3).long()), "edge_weight"
    ),
    case(
        "conv edge_weight float64",
        lambda: conv()(X, EDGES, TYPES, torch.ones(3).double()),
        "edge_weight",
    ),
    *[case(f"readout x {d}", lambda d=d: GatedGraphReadout(2, 4)(X.to(d)), "x") for d in DTYPES],
    *[case(f"node selection x {d}", lambda d=d: NodeSelection(2)(X.to(d)), "x") for d in DTYPES],
    *[
        case(f"GRU input {d}", lambda d=d: PaperGRUCell(2, 3)(X.to(d), torch.zeros(4, 3)), "input")
        for d in DTYPES
    ],
    case("GRU hx float64", lambda: PaperGRUCell(2, 3)(X, torch.zeros(4, 3).double()), "hx"),
    case(
        "GGNN complex annotations",
        lambda: ggnn()(graph(x=torch.ones(4, 1, dtype=torch.complex64))),
        "x",
    ),
    case(
        "node selection target float",
        lambda: GGNN(1, 4, 2, task="node_selection").loss(
            torch.zeros(4), graph(y=torch.tensor([0.5]))
        ),
        "target",
    ),
    case(
        "GGNN class target float",
        lambda: ggnn().loss(torch.zeros(1, 2), graph(y=torch.tensor([0.0]))),
        "data.y",
    ),
]

EMPTY = [
    case("GGSNN no steps", lambda: ggsnn()(graph(), num_steps=0), "num_steps"),
    case("GGNN no edge_index", lambda: ggnn()(Data(x=torch.ones(4, 1))), "edge_index"),
    case("GGNN no x", lambda: ggnn()(Data(edge_index=EDGES, num_nodes=4)), "x"),
    case("GGNN no y for the loss", lambda: ggnn().loss(torch.zeros(1, 2), graph()), "data.y"),
]

VALUES = [
    case("conv x 1-D", lambda: conv()(torch.ones(4), EDGES, TYPES), "x", "(num_nodes, channels)"),
    case(
        "conv x wider than the state",
        lambda: conv()(torch.ones(4, 9), EDGES, TYPES),
        "out_channels",
    ),
    case(
        "conv edge_index 3 rows", lambda: conv()(X, torch.zeros(3, 3).long(), TYPES), "edge_index"
    ),
    case("conv edge_index a list", lambda: conv()(X, [[0, 1], [1, 2]], TYPES), "edge_index"),
    case(
        "conv edge_index beyond nodes", lambda: conv()(X, EDGES + 4, TYPES), "edge_index", "[0, 4)"
    ),
    case("conv edge_index negative", lambda: conv()(X, EDGES - 1, TYPES), "edge_index"),
    case("conv edge_type missing", lambda: conv()(X, EDGES), "edge_type", "required"),
    case("conv edge_type beyond", lambda: conv()(X, EDGES, TYPES + 2), "edge_type", "[0, 2)"),
    case("conv edge_type negative", lambda: conv()(X, EDGES, TYPES - 1), "edge_type"),
    case("conv edge_type length", lambda: conv()(X, EDGES, TYPES[:2]), "edge_type", "(3,)"),
    case(
        "conv edge_type one-hot",
        lambda: conv()(X, EDGES, torch.eye(2)[TYPES].long()),
        "edge_type",
        "argmax",
    ),
    case("conv edge_type a list", lambda: conv()(X, EDGES, [0, 1, 0]), "edge_type"),
    case("conv edge_weight length", lambda: conv()(X, EDGES, TYPES, torch.ones(2)), "edge_weight"),
    case(
        "conv edge_type beside a sparse adjacency",
        lambda: conv()(X, _sparse(), TYPES),
        "edge_type",
        "sparse adjacency",
    ),
    case(
        "conv edge_weight beside a sparse adjacency",
        lambda: conv(num_edge_types=1)(X, _sparse(), None, torch.ones(3)),
        "edge_weight",
    ),
    case("conv sparse types beyond", lambda: conv()(X, _sparse(values=TYPES + 2)), "edge_type"),
    case(
        "conv sparse fractional types",
        lambda: conv()(X, _sparse(values=TYPES + 0.5)),
        "whole numbers",
    ),
    case("readout width", lambda: GatedGraphReadout(3, 4)(X), "3 channels"),
    case("readout index length", lambda: GatedGraphReadout(2, 4)(X, torch.tensor([0, 0])), "index"),
    case(
        "readout index negative",
        lambda: GatedGraphReadout(2, 4)(X, torch.tensor([0, 0, -1, 1])),
        "index",
    ),
    case(
        "readout index float",
        lambda: GatedGraphReadout(2, 4)(X, torch.tensor([0.0, 0, 1, 1])),
        "index",
    ),
    case(
        "readout index beyond dim_size",
        lambda: GatedGraphReadout(2, 4)(X, torch.tensor([0, 0, 1, 2]), dim_size=2),
        "index",
    ),
    case(
        "node selection index float",
        lambda: NodeSelection(2)(X, torch.tensor([0.0, 0, 1, 1])),
        "index",
    ),
    case(
        "node selection index beyond",
        lambda: NodeSelection(2)(X, torch.tensor([0, 0, 1, 3]), num_graphs=2),
        "index",
    ),
    case("node selection width", lambda: NodeSelection(3)(X), "x", "(num_nodes, 3)"),
    case(
        "node selection predict index",
        lambda: NodeSelection.predict(torch.zeros(4), torch.tensor([0, 0, 1, 5]), 2),
        "index",
    ),
    case(
        "node selection predict num_graphs",
        lambda: NodeSelection.predict(torch.zeros(4), torch.zeros(4).long(), -1),
        "num_graphs",
    ),
    case(
        "node selection loss count",
        lambda: NodeSelection.loss(torch.zeros(4), torch.tensor([0, 1]), torch.tensor([0, 4])),
        "one node per graph",
    ),
    case(
        "node selection target beyond its graph",
        lambda: GGNN(1, 4, 2, num_edge_types=2, task="node_selection").loss(
            torch.zeros(8),
            Batch.from_data_list([graph(y=torch.tensor([1])), graph(y=torch.tensor([4]))]),
        ),
        "target",
        "graph 1 has 4 nodes",
    ),
    case(
        "node selection target negative",
        lambda: GGNN(1, 4, 2, task="node_selection").loss(
            torch.zeros(4), graph(y=torch.tensor([-1]))
        ),
        "target",
    ),
    case("GGNN tensors without edge_index", lambda: ggnn()(torch.ones(4, 1)), "edge_index"),
    case("GGNN neither tensor nor Data", lambda: ggnn()([[1.0]], EDGES), "Data", "list"),
    case("GGNN Data and tensors", lambda: ggnn()(graph(), EDGES), "edge_index", "Data", "not both"),
    case(
        "GGNN batch_size without batch",
        lambda: ggnn()(X[:, :1], EDGES, TYPES, batch_size=2),
        "batch_size",
        "batch",
    ),
    case(
        "GGNN batch beyond batch_size",
        lambda: ggnn()(X[:, :1], EDGES, TYPES, torch.tensor([0, 0, 1, 2]), 2),
        "index",
        "num_graphs",
    ),
    case("GGNN batch fractional", lambda: ggnn()(X[:, :1], EDGES, TYPES, X[:, 0]), "batch"),
    case("GGSNN without num_steps", lambda: ggsnn()(graph()), "num_steps", "constructor"),
    case("GGSNN num_steps 0 at construction", lambda: ggsnn(num_steps=0), "num_steps"),
    case(
        "ToEdgeType multi-hot edge_attr",
        lambda: ToEdgeType()(graph(edge_type=None, edge_attr=torch.ones(3, 2))),
        "edge_attr",
        "one-hot",
        "edge 0",
    ),
    case(
        "ToEdgeType edge_attr rows",
        lambda: ToEdgeType()(graph(edge_type=None, edge_attr=torch.eye(2))),
        "edge_attr",
        "one row per edge",
    ),
    case(
        "ToEdgeType edge_attr one dimension",
        lambda: ToEdgeType()(graph(edge_type=None, edge_attr=torch.ones(3))),
        "edge_attr",
        "(num_edges, num_edge_types)",
    ),
    case("ToEdgeType nothing to read", lambda: ToEdgeType()(graph(edge_type=None)), "edge_attr"),
    case("ToEdgeType two node types", lambda: ToEdgeType()(_hetero(2)), "node type", "paper"),
    case("ToEdgeType relation attributes", lambda: ToEdgeType()(_hetero(1, True)), "edge_attr"),
    case("ToEdgeType not a graph", lambda: ToEdgeType()(X), "Data", "Tensor"),
    case("GGNN annotations wider", lambda: ggnn()(graph(x=torch.ones(4, 6))), "out_channels"),
    case("GGNN typed graph without edge_type", lambda: ggnn()(graph(edge_type=None)), "edge_type"),
    case(
        "GGNN class target beyond",
        lambda: ggnn().loss(ggnn()(two_graphs()), two_graphs()),
        "data.y",
        "[0, 2)",
    ),
    case("GGNN typed adj_t", lambda: ggnn()(_adj_t_graph(typed=True)), "edge_index"),
    case("GGSNN num_steps 1.5", lambda: ggsnn()(graph(), num_steps=1.5), "num_steps"),
    case(
        "GGSNN annotations count",
        lambda: ggsnn()(graph(), num_steps=3, annotations=[X]),
        "annotations",
        "2",
    ),
    case(
        "GGSNN annotations shape",
        lambda: ggsnn()(graph(), num_steps=2, annotations=[torch.ones(3, 1)]),
        "annotations[0]",
    ),
    case(
        "GGSNN targets shape",
        lambda: ggsnn().loss(ggsnn()(graph(), 2)[0], torch.zeros(2, 2).long(), graph()),
        "targets",
    ),
    case(
        "GGSNN class targets beyond",
        lambda: ggsnn().loss(ggsnn()(graph(), 2)[0], torch.tensor([[0, 2]]), graph()),
        "targets",
    ),
    case(
        "GGSNN annotation targets above 1",
        lambda: ggsnn().loss(*_sequence(), [torch.full((4, 1), 2.0)]),
        "annotations[0]",
        "[0, 1]",
    ),
    case(
        "GRU input width", lambda: PaperGRUCell(3, 3)(X, torch.zeros(4, 3)), "input", "(batch, 3)"
    ),
    case("GRU hx shape", lambda: PaperGRUCell(2, 3)(X, torch.zeros(3, 3)), "hx"),
]


def _sparse(values: torch.Tensor | None = None) -> torch.Tensor:
    values = torch.ones(3) if values is None else values
    return torch.sparse_coo_tensor(EDGES.flip(0), values, (4, 4)).coalesce()


def _adj_t_graph(typed: bool) -> Data:
    data = Data(x=torch.ones(4, 1), adj_t=_sparse(), num_nodes=4)
    if typed:
        data.edge_type = TYPES
    return data


def _sequence() -> tuple[Any, ...]:
    model = ggsnn()
    outputs, predicted = model(graph(), 2)
    return outputs, torch.zeros(1, 2).long(), graph(), predicted


@pytest.mark.parametrize(("call", "words", "error"), CONFIG + DTYPE + EMPTY + VALUES)
def test_refused(call: Any, words: tuple[str, ...], error: Any) -> None:
    assert_refused(call, words, error)


def test_defined_results_for_empty_graphs() -> None:
    """Graphs without nodes or edges give outputs of the right shapes."""
    no_edges = torch.zeros(2, 0, dtype=torch.long)
    assert conv()(torch.zeros(0, 2), no_edges, torch.zeros(0).long()).shape == (0, 4)
    assert conv()(X, no_edges, torch.zeros(0).long()).shape == (4, 4)
    empty = graph(x=torch.zeros(0, 1), edge_index=no_edges, edge_type=torch.zeros(0).long())
    assert ggnn()(empty).shape == (1, 2)
    assert GatedGraphReadout(2, 4)(torch.zeros(0, 2)).shape[-1] == 4
    assert NodeSelection(2)(torch.zeros(0, 2)).shape == (0,)


def test_the_meta_device_builds_and_runs_the_layer_and_models() -> None:
    with torch.device("meta"):
        out = conv()(torch.ones(4, 2), EDGES, TYPES)
        assert out.shape == (4, 4) and out.is_meta
        assert ggnn()(graph()).shape == (1, 2)
