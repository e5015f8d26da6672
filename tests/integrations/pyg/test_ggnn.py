"""GGNN and GGS-NN on PyG Data / Batch objects: shapes, losses, learning, GGS-NN steps."""

from __future__ import annotations

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from paperports.integrations.pyg import GGNN, GGSNN


def chain(n: int, source: int, label: int) -> Data:
    """A directed chain 0 -> 1 -> ... with one marked node; y: the marked node's successor."""
    x = torch.zeros(n, 1)
    x[source] = 1.0
    edge_index = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    return Data(
        x=x,
        edge_index=edge_index,
        edge_type=torch.zeros(n - 1, dtype=torch.long),
        y=torch.tensor([label]),
    )


def test_shapes_for_each_task() -> None:
    batch = Batch.from_data_list([chain(4, 0, 1), chain(6, 2, 3)])
    graph = GGNN(1, 8, 3, task="graph", out_channels=5)
    assert graph(batch).shape == (2, 5)
    node = GGNN(1, 8, 3, task="node", out_channels=3)
    assert node(batch).shape == (10, 3)
    select = GGNN(1, 8, 3, task="node_selection")
    out = select(batch)
    assert out.shape == (10,)
    torch.testing.assert_close(out[:4].exp().sum(), torch.tensor(1.0))
    assert select.loss(out, batch).item() > 0
    assert select.predict(out, batch).shape == (2,)
    with pytest.raises(ValueError, match="hidden_channels"):
        GGNN(4, 2, 1)
    with pytest.raises(ValueError, match="task must be"):
        GGNN(1, 4, 1, task="edge")


def test_node_selection_learns_to_follow_an_edge() -> None:
    """Select the successor of the marked node: needs one step along the edge direction."""
    torch.manual_seed(0)
    data = []
    for n in range(3, 9):
        for s in range(n - 1):
            data.append(chain(n, s, s + 1))
    model = GGNN(1, 8, 2, task="node_selection")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(60):
        for batch in DataLoader(data, batch_size=16, shuffle=True):
            optimizer.zero_grad()
            model.loss(model(batch), batch).backward()
            optimizer.step()
    batch = Batch.from_data_list(data)
    accuracy = (model.predict(model(batch), batch) == batch.y).float().mean()
    assert accuracy > 0.95


def test_ggsnn_steps_teacher_forcing_and_loss() -> None:
    torch.manual_seed(1)
    batch = Batch.from_data_list([chain(4, 0, 1), chain(5, 1, 2)])
    model = GGSNN(1, 6, 2, task="node_selection", share_propagation=False)
    outputs, predicted = model(batch, num_steps=3)
    assert len(outputs) == 3 and len(predicted) == 2
    assert outputs[0].shape == (9,) and predicted[0].shape == (9, 1)
    truth = [torch.zeros(9, 1), torch.ones(9, 1)]
    forced, _ = model(batch, num_steps=3, annotations=truth)
    # with teacher forcing the second output is F_o on the true X^(2), computed here directly
    h = model.conv_o(truth[0], batch.edge_index, batch.edge_type)
    direct = model.output(torch.cat([h, truth[0]], -1), batch.batch, batch.ptr, 2)
    torch.testing.assert_close(forced[1], direct)
    assert (forced[1] - outputs[1]).abs().max() > 1e-4  # not the predicted X^(2)
    targets = torch.tensor([[1, 2, 3], [2, 3, 4]])
    loss = model.loss(outputs, targets, batch, predicted, truth)
    loss.backward()
    assert model.conv_x is not None and model.conv_x.weight.grad is not None
    with pytest.raises(ValueError, match="targets must be"):
        model.loss(outputs, targets[:, :2], batch)
    with pytest.raises(ValueError, match="annotations must hold"):
        model(batch, num_steps=3, annotations=truth[:1])
    graph_model = GGSNN(1, 6, 2, task="graph", out_channels=4)
    outputs, _ = graph_model(batch, num_steps=2)
    assert outputs[1].shape == (2, 4)


def test_ggsnn_loss_leaves_out_steps_past_a_shorter_sequences_end() -> None:
    """Sequences of different lengths in one batch: ``-1`` targets (and the annotations that
    would feed those steps) add nothing to the loss, for node and graph outputs."""
    torch.manual_seed(2)
    batch = Batch.from_data_list([chain(4, 0, 1), chain(5, 1, 2)])
    model = GGSNN(1, 6, 2, task="node_selection")
    truth = [torch.rand(9, 1), torch.rand(9, 1)]
    outputs, predicted = model(batch, num_steps=3, annotations=truth)
    targets = torch.tensor([[1, 2, 3], [2, -1, -1]])  # the second graph's answer is 1 long
    loss = model.loss(outputs, targets, batch, predicted, truth)
    ptr, first = batch.ptr, slice(0, 4)  # the first graph's nodes
    bce = torch.nn.functional.binary_cross_entropy
    expected = (
        -(outputs[0][ptr[0] + 1] + outputs[0][ptr[1] + 2]) / 2
        - outputs[1][ptr[0] + 2]
        - outputs[2][ptr[0] + 3]
        + bce(predicted[0][first], truth[0][first])
        + bce(predicted[1][first], truth[1][first])
    )
    torch.testing.assert_close(loss, expected)
    with pytest.raises(ValueError, match="-1 past the end"):
        model.loss(outputs, torch.tensor([[1, 2, 3], [2, -2, -1]]), batch)
    with pytest.raises(ValueError, match="not between them"):
        model.loss(outputs, torch.tensor([[1, 2, 3], [2, -1, 3]]), batch)
    with pytest.raises(ValueError, match="one fewer than the 3 outputs"):
        model.loss(outputs, targets, batch, predicted + predicted[:1], truth + truth[:1])
    graph_model = GGSNN(1, 6, 2, task="graph", out_channels=4)
    outputs, _ = graph_model(batch, num_steps=2)
    loss = graph_model.loss(outputs, torch.tensor([[1, 3], [2, -1]]), batch)
    ce = torch.nn.functional.cross_entropy
    expected = ce(outputs[0], torch.tensor([1, 2])) + ce(outputs[1][:1], torch.tensor([3]))
    torch.testing.assert_close(loss, expected)


def test_annotations_take_the_models_dtype() -> None:
    """Integer annotations (as bAbI's) are cast to the model's dtype: float32 by default,
    float64 after ``.double()``, for GGNN and GGS-NN alike."""
    batch = Batch.from_data_list([chain(4, 0, 1), chain(5, 2, 3)])
    batch.x = batch.x.long()
    model = GGNN(1, 8, 2, task="graph", out_channels=3)
    assert model(batch).dtype == torch.float32
    out = model.double()(batch)
    assert out.dtype == torch.float64 and torch.isfinite(out).all()
    sequence = GGSNN(1, 6, 2, task="node_selection").double()
    truth = [batch.x.bool()]  # the next step's annotations, as booleans
    outputs, predicted = sequence(batch, num_steps=2, annotations=truth)
    assert outputs[0].dtype == predicted[0].dtype == torch.float64
    targets = torch.tensor([[1, 2], [3, 4]])  # a node per graph and step
    loss = sequence.loss(outputs, targets, batch, predicted, truth)
    assert loss.dtype == torch.float64 and loss > 0


# PyG's ToSparseTensor builds its CSR tensors without opting in or out of torch's checks
@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")
def test_a_sparse_adjacency_gives_what_the_edge_index_gives() -> None:
    """Graphs of one edge type as ``T.ToSparseTensor`` leaves them (``adj_t``, no
    ``edge_index``), batched: the same outputs as from their ``edge_index``, for GGNN and
    GGS-NN; typed or weighted adjacencies are refused rather than misread."""
    torch.manual_seed(0)
    graphs = []
    for n in (5, 7):
        edges = torch.randint(0, n, (2, 3 * n))
        edges = torch.unique(edges[:, edges[0] != edges[1]], dim=1)  # no parallel edges
        graphs.append(Data(x=torch.rand(n, 2), edge_index=edges))
    to_sparse = T.ToSparseTensor(attr=None, layout=torch.sparse_csr)
    dense = Batch.from_data_list(graphs)
    sparse = Batch.from_data_list([to_sparse(g.clone()) for g in graphs])
    assert sparse.edge_index is None and sparse.adj_t.layout == torch.sparse_csr
    model = GGNN(2, 6, 3, task="node", out_channels=3, bidirectional=True)
    torch.testing.assert_close(model(sparse), model(dense))
    sequence = GGSNN(2, 6, 2, task="graph", out_channels=2)
    for a, b in zip(sequence(sparse, 3)[0], sequence(dense, 3)[0], strict=True):
        torch.testing.assert_close(a, b)

    typed = graphs[0].clone()
    typed.edge_type = torch.zeros(typed.num_edges, dtype=torch.long)
    with pytest.raises(ValueError, match="edge types need an `edge_index`"):
        model(to_sparse(typed))
    weighted = graphs[0].clone()
    weighted.edge_weight = torch.rand(weighted.num_edges) + 0.5
    with pytest.raises(ValueError, match="values other than 1"):
        model(T.ToSparseTensor(layout=torch.sparse_csr)(weighted))
    with pytest.raises(ValueError, match="needs node annotations"):
        model(Data(x=torch.rand(3, 2)))


@pytest.mark.parametrize("target", [[1, 3], [1, 2], [-1, 0]])
def test_a_node_target_outside_its_graph_is_refused(target: list[int]) -> None:
    """Such a target once read a node of another graph in the batch, silently: the second
    graph of this batch has 2 nodes, so 2 and 3 are beyond it, and -1 is before it."""
    batch = Batch.from_data_list([chain(4, 0, 3), chain(2, 0, 1)])
    batch.y = torch.tensor(target)
    for model in (
        GGNN(1, 4, 2, task="node_selection"),
        GGSNN(1, 4, 2, task="node_selection"),
    ):
        with pytest.raises(ValueError, match="target must"):
            if isinstance(model, GGNN):
                model.loss(model(batch), batch)
            else:
                outputs, _ = model(batch, num_steps=1)
                model.loss(outputs, batch.y.view(2, 1), batch)


def test_class_targets_outside_out_channels_are_refused() -> None:
    batch = Batch.from_data_list([chain(4, 0, 3), chain(2, 0, 1)])
    batch.y = torch.tensor([0, 5])
    model = GGNN(1, 4, 2, task="graph", out_channels=3)
    with pytest.raises(ValueError, match=r"data.y must lie in \[0, 3\)"):
        model.loss(model(batch), batch)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"hidden_channels": 0}, ValueError, "hidden_channels must be an integer >= 1"),
        ({"num_layers": 1.5}, TypeError, "num_layers must be an integer"),
        ({"task": "edge"}, ValueError, "task must be one of"),
        ({"out_channels": 0}, ValueError, "out_channels must be an integer >= 1"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, error: type, match: str) -> None:
    settings = {"annotation_channels": 1, "hidden_channels": 4, "num_layers": 2} | kwargs
    with pytest.raises(error, match=match):
        GGNN(**settings)


def _typed_batch() -> Batch:
    g = torch.Generator().manual_seed(5)
    graphs = []
    for n in (4, 6, 5):
        graphs.append(
            Data(
                x=torch.rand(n, 2, generator=g),
                edge_index=torch.randint(0, n, (2, 2 * n), generator=g),
                edge_type=torch.randint(0, 3, (2 * n,), generator=g),
            )
        )
    return Batch.from_data_list(graphs)


@pytest.mark.parametrize("task", ["graph", "node", "node_selection"])
def test_ggnn_takes_tensors_as_pyg_models_do_and_scripts(task: str) -> None:
    torch.manual_seed(0)
    batch = _typed_batch()
    model = GGNN(2, 8, 3, num_edge_types=3, task=task, out_channels=4)
    from_data = model(batch)
    tensors = (batch.x, batch.edge_index, batch.edge_type, batch.batch)
    torch.testing.assert_close(model(*tensors), from_data)
    torch.testing.assert_close(model(*tensors, batch_size=3), from_data)
    scripted = torch.jit.script(model)
    torch.testing.assert_close(scripted(*tensors), from_data)
    # each graph alone: the batch vector keeps the graphs apart
    first = batch.get_example(0)
    alone = model(first.x, first.edge_index, first.edge_type)
    if task == "graph":
        torch.testing.assert_close(alone[0], from_data[0])
    else:
        torch.testing.assert_close(alone, from_data[: first.num_nodes])


@pytest.mark.parametrize("task", ["graph", "node_selection"])
@pytest.mark.parametrize("share", [True, False])
def test_ggsnn_takes_tensors_scripts_and_keeps_the_data_call(task: str, share: bool) -> None:
    torch.manual_seed(1)
    batch = _typed_batch()
    model = GGSNN(2, 8, 2, num_edge_types=3, task=task, share_propagation=share, num_steps=3)
    outputs, predicted = model(batch, 3)  # the call before tensors were taken
    tensors = (batch.x, batch.edge_index, batch.edge_type, batch.batch)
    for other, other_predicted in [
        model(*tensors),  # num_steps from the constructor
        model(batch),
        model(*tensors, num_steps=3),
        torch.jit.script(model)(*tensors),
    ]:
        assert len(other) == 3 and len(other_predicted) == 2
        for a, b in zip(outputs + predicted, other + other_predicted, strict=True):
            torch.testing.assert_close(a, b)
    assert len(model(batch, num_steps=2)[0]) == 2  # forward's num_steps wins


def test_a_ggsnn_call_example() -> None:
    """The docs' GGS-NN example: outputs per step, then the loss and a training step."""
    torch.manual_seed(2)
    batch = Batch.from_data_list([chain(4, 0, 1), chain(5, 1, 2)])
    model = GGSNN(1, 8, 3, task="node_selection", num_steps=2)
    outputs, predicted = model(batch.x, batch.edge_index, batch.edge_type, batch.batch)
    targets = torch.tensor([[1, 2], [2, 3]])  # a node per graph and step
    loss = model.loss(outputs, targets, batch)
    loss.backward()
    assert all(p.grad is not None for p in model.conv_o.parameters())
    assert [o.shape for o in outputs] == [(9,), (9,)] and predicted[0].shape == (9, 1)
