"""GatedGraphConv: the paper's equations, PyG equivalence, batching, symmetry, bad input."""

from __future__ import annotations

import pytest
import torch
import torch_geometric
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csc_tensor, to_torch_csr_tensor

from paperports.integrations.pyg import GatedGraphConv, PaperGRUCell


def graph(seed: int = 0, nodes: int = 7, edges: int = 12, types: int = 3) -> tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(nodes, 3, generator=g)
    edge_index = torch.randint(0, nodes, (2, edges), generator=g)
    edge_type = torch.randint(0, types, (edges,), generator=g)
    return x, edge_index, edge_type


def paper_gru(cell: PaperGRUCell, a: Tensor, h: Tensor) -> Tensor:
    """Equations (4)-(6) of the paper, one gate at a time."""
    size = cell.hidden_size
    w_ih, w_hh = cell.weight_ih, cell.weight_hh
    b_ih, b_hh = cell.bias_ih, cell.bias_hh
    assert b_ih is not None and b_hh is not None
    r_w, z_w, n_w = (slice(i * size, (i + 1) * size) for i in range(3))
    r = torch.sigmoid(a @ w_ih[r_w].T + b_ih[r_w] + h @ w_hh[r_w].T + b_hh[r_w])
    z = torch.sigmoid(a @ w_ih[z_w].T + b_ih[z_w] + h @ w_hh[z_w].T + b_hh[z_w])
    candidate = torch.tanh(a @ w_ih[n_w].T + b_ih[n_w] + (r * h) @ w_hh[n_w].T + b_hh[n_w])
    return (1 - z) * h + z * candidate


def dense_reference(
    conv: GatedGraphConv, x: Tensor, edge_index: Tensor, edge_type: Tensor
) -> Tensor:
    """Adjacency matrices per type and direction, as the paper's A = [A_in, A_out]."""
    n, k, c = x.size(0), conv.num_edge_types, conv.out_channels
    a_in = torch.zeros(k, n, n)
    for (u, v), t in zip(edge_index.T.tolist(), edge_type.tolist(), strict=True):
        a_in[t, v, u] += 1.0  # v receives from u along u -> v
    h = torch.cat([x, torch.zeros(n, c - x.size(1))], dim=1)
    for _ in range(conv.num_layers):
        a = sum(a_in[t] @ h @ conv.weight[t] for t in range(k))
        a = a + sum(a_in[t].T @ h @ conv.weight[k + t] for t in range(k))
        a = a + conv.propagation_bias[0]
        assert isinstance(conv.rnn, PaperGRUCell)
        h = paper_gru(conv.rnn, a, h)
    return h


def test_equations_against_a_dense_computation() -> None:
    torch.manual_seed(0)
    x, edge_index, edge_type = graph()
    conv = GatedGraphConv(8, num_layers=3, num_edge_types=3)
    torch.nn.init.normal_(conv.propagation_bias)  # a non-zero bias is part of the check
    torch.testing.assert_close(
        conv(x, edge_index, edge_type), dense_reference(conv, x, edge_index, edge_type)
    )


def test_paper_gru_differs_from_torch_gru_only_in_the_reset_placement() -> None:
    torch.manual_seed(1)
    paper = PaperGRUCell(5, 6)
    a, h = torch.randn(4, 5), torch.randn(4, 6)
    torch.testing.assert_close(paper(a, h), paper_gru(paper, a, h))
    torch_cell = torch.nn.GRUCell(5, 6)
    torch_cell.load_state_dict(paper.state_dict())
    assert (paper(a, h) - torch_cell(a, h)).abs().max() > 1e-3


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_pyg_settings_compute_and_load_what_pyg_gated_graph_conv_does(aggr: str) -> None:
    torch.manual_seed(2)
    x, edge_index, _ = graph()
    weight = torch.rand(edge_index.size(1))
    theirs = torch_geometric.nn.GatedGraphConv(8, num_layers=3, aggr=aggr)
    ours = GatedGraphConv(
        8, 3, num_edge_types=1, bidirectional=False, share_weights=False, aggr=aggr, gru="torch"
    )
    ours.load_state_dict(theirs.state_dict())  # strict: every key matches
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    torch.testing.assert_close(
        ours(x, edge_index, edge_weight=weight), theirs(x, edge_index, weight)
    )
    lean = GatedGraphConv(
        8,
        3,
        bidirectional=False,
        share_weights=False,
        aggr=aggr,
        gru="torch",
        propagation_bias=False,
    )
    assert set(lean.state_dict()) == set(theirs.state_dict())


def test_sparse_adjacency_gives_the_same_as_edge_index() -> None:
    torch.manual_seed(3)
    x, edge_index, _ = graph()
    edge_index = torch_geometric.utils.coalesce(edge_index)
    conv = GatedGraphConv(8, 2, bidirectional=True)
    adj_t = to_torch_csr_tensor(edge_index.flip(0), size=(7, 7))  # transposed, as PyG's
    torch.testing.assert_close(conv(x, adj_t), conv(x, edge_index))


def _outputs_and_gradients(
    conv: GatedGraphConv, x: Tensor, *args: Tensor | None
) -> tuple[Tensor, ...]:
    x = x.clone().requires_grad_()
    conv.zero_grad(set_to_none=True)
    out = conv(x, *args)
    (out * torch.linspace(-1.0, 1.0, out.numel()).view_as(out).to(out.dtype)).sum().backward()
    grads = [p.grad for p in conv.parameters()]
    assert x.grad is not None and all(g is not None for g in grads)
    return (out.detach(), x.grad, *(g for g in grads if g is not None))


@pytest.mark.parametrize("aggr", ["add", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("slots", [6, 1])
def test_the_sparse_matrix_route_matches_the_edge_wise_route(
    aggr: str, weighted: bool, dtype: torch.dtype, slots: int
) -> None:
    """One CSR product per step gives the same values and gradients as gathering and
    scattering edge by edge: with duplicate edges, self-loops, an isolated node, edge
    weights and the mean's per-slot normalisation. Several slots (3 types x 2 directions)
    transform first and sum the transformed states per node; one slot sums first."""
    torch.manual_seed(8)
    x, edge_index, edge_type = graph(nodes=9, edges=30)
    edge_index = torch.cat([edge_index, edge_index[:, :4], torch.tensor([[2], [2]])], dim=1)
    edge_type = torch.cat([edge_type, edge_type[:4], torch.tensor([1])])
    edge_index[edge_index == 8] = 7  # node 8 stays isolated
    weight = torch.rand(edge_index.size(1), dtype=dtype) if weighted else None
    if slots == 1:
        conv = GatedGraphConv(8, 3, bidirectional=False, aggr=aggr).to(dtype)
        edge_type = torch.zeros_like(edge_type)
    else:
        conv = GatedGraphConv(8, 3, num_edge_types=3, aggr=aggr).to(dtype)
    torch.nn.init.normal_(conv.propagation_bias)
    fused_calls = []
    conv.register_message_and_aggregate_forward_hook(lambda *_: fused_calls.append(1))
    sparse = _outputs_and_gradients(conv, x.to(dtype), edge_index, edge_type, weight)
    assert len(fused_calls) == 3  # one sparse product per step

    conv._can_fuse = lambda *_: False  # type: ignore[method-assign]
    edgewise = _outputs_and_gradients(conv, x.to(dtype), edge_index, edge_type, weight)
    assert len(fused_calls) == 3
    for a, b in zip(sparse, edgewise, strict=True):
        torch.testing.assert_close(a, b)


def test_the_edge_wise_route_serves_message_hooks_and_edge_weight_gradients() -> None:
    torch.manual_seed(9)
    x, edge_index, _ = graph()
    conv = GatedGraphConv(8, 2)
    fused_calls = []
    conv.register_message_and_aggregate_forward_hook(lambda *_: fused_calls.append(1))
    weight = torch.rand(edge_index.size(1), requires_grad=True)
    conv(x, edge_index, edge_weight=weight).sum().backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0
    messages = []
    handle = conv.register_message_forward_hook(lambda *_: messages.append(1))
    conv(x, edge_index)
    assert messages == [1, 1] and fused_calls == []
    handle.remove()
    conv(x, edge_index)
    assert fused_calls == [1, 1]


def test_a_batch_gives_what_each_graph_gives_alone() -> None:
    torch.manual_seed(4)
    conv = GatedGraphConv(8, 3, num_edge_types=3).eval()
    graphs = []
    for seed, nodes in [(0, 5), (1, 9), (2, 1)]:
        x, edge_index, edge_type = graph(seed, nodes=nodes, edges=2 * nodes)
        graphs.append(Data(x=x, edge_index=edge_index, edge_type=edge_type))
    batch = Batch.from_data_list(graphs)
    together = conv(batch.x, batch.edge_index, batch.edge_type)
    for i, g in enumerate(graphs):
        alone = conv(g.x, g.edge_index, g.edge_type)
        torch.testing.assert_close(together[batch.ptr[i] : batch.ptr[i + 1]], alone)


def test_permutation_equivariance() -> None:
    torch.manual_seed(5)
    x, edge_index, edge_type = graph()
    conv = GatedGraphConv(8, 3, num_edge_types=3)
    perm = torch.randperm(7)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(7)
    permuted = conv(x[perm], inverse[edge_index], edge_type)
    torch.testing.assert_close(permuted, conv(x, edge_index, edge_type)[perm])


def test_edge_types_and_directions_matter() -> None:
    torch.manual_seed(6)
    x, edge_index, edge_type = graph()
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    base = conv(x, edge_index, edge_type)
    retyped = edge_type.clone()
    retyped[0] = (retyped[0] + 1) % 3
    assert (conv(x, edge_index, retyped) - base).abs().max() > 1e-4
    reversed_ = edge_index.clone()
    reversed_[:, 0] = edge_index[:, 0].flip(0)
    if edge_index[0, 0] != edge_index[1, 0]:
        assert (conv(x, reversed_, edge_type) - base).abs().max() > 1e-4
    # Unidirectional: a node with no incoming edge only sees its own annotation.
    one_way = GatedGraphConv(8, 2, bidirectional=False)
    chain = torch.tensor([[0, 1], [1, 2]])
    x3 = torch.randn(3, 2)
    changed = x3.clone()
    changed[2] += 1.0  # the end of the chain: nothing flows back to node 0
    torch.testing.assert_close(one_way(x3, chain)[0], one_way(changed, chain)[0])
    two_way = GatedGraphConv(8, 2, bidirectional=True)
    assert (two_way(x3, chain)[0] - two_way(changed, chain)[0]).abs().max() > 1e-5


def test_graphs_without_edges_and_isolated_nodes() -> None:
    conv = GatedGraphConv(6, 2, num_edge_types=2)
    x = torch.randn(4, 3)
    empty = torch.empty(2, 0, dtype=torch.long)
    out = conv(x, empty, torch.empty(0, dtype=torch.long))
    assert out.shape == (4, 6) and torch.isfinite(out).all()
    # A node without edges evolves from its own state only.
    out_edges = conv(x, torch.tensor([[0], [1]]), torch.tensor([1]))
    torch.testing.assert_close(out_edges[3], out[3])


def test_weights_are_shared_across_steps_unless_asked() -> None:
    assert GatedGraphConv(8, 5, num_edge_types=2).weight.shape == (4, 8, 8)
    assert GatedGraphConv(8, 5, num_edge_types=2, share_weights=False).weight.shape == (20, 8, 8)
    conv = GatedGraphConv(8, 2)
    before = conv.weight.detach().clone()
    conv.reset_parameters()
    assert not torch.equal(before, conv.weight)
    assert repr(conv) == (
        "GatedGraphConv(8, num_layers=2, num_edge_types=1, bidirectional=True, "
        "share_weights=True, gru='paper')"
    )


def test_torch_compile_without_graph_breaks_and_torch_jit_script() -> None:
    torch.manual_seed(7)
    x, edge_index, edge_type = graph()
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    expected = conv(x, edge_index, edge_type)
    compiled = torch.compile(conv, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, edge_index, edge_type), expected)
    scripted = torch.jit.script(conv)
    torch.testing.assert_close(scripted(x, edge_index, edge_type), expected)


SETTINGS = {
    "pyg": {"bidirectional": False, "share_weights": False, "gru": "torch"},
    "defaults": {},
}


@pytest.mark.parametrize("settings", SETTINGS)
def test_what_pyg_checks_of_its_own_layer(settings: str) -> None:
    """The checks PyG's own test makes of its GatedGraphConv (torch_geometric's
    test/nn/conv/test_gated_graph_conv.py), made here of ours in PyG's settings and at its
    defaults: sparse adjacencies of every layout, with and without values, give what the
    edge_index (and edge_weight) gives, eager, scripted and compiled."""
    torch.manual_seed(11)
    x = torch.randn(4, 16)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    value = torch.rand(edge_index.size(1))
    conv = GatedGraphConv(32, num_layers=3, **SETTINGS[settings])  # type: ignore[arg-type]
    out1 = conv(x, edge_index)
    out2 = conv(x, edge_index, edge_weight=value)
    assert out1.shape == out2.shape == (4, 32)
    scripted = torch.jit.script(conv)
    compiled = torch.compile(conv, backend="aot_eager", fullgraph=True)
    for run in (scripted, compiled):
        torch.testing.assert_close(run(x, edge_index), out1)
        torch.testing.assert_close(run(x, edge_index, None, value), out2)
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor, to_torch_csc_tensor):
        adj1 = to_sparse(edge_index, size=(4, 4)).t()
        adj2 = to_sparse(edge_index, value, size=(4, 4)).t()
        for run in (conv, scripted):
            torch.testing.assert_close(run(x, adj1), out1)
            torch.testing.assert_close(run(x, adj2), out2)


def test_a_scripted_typed_layer_reads_types_from_a_sparse_adjacency() -> None:
    torch.manual_seed(12)
    x, edge_index, edge_type = graph()
    edge_index, edge_type = torch_geometric.utils.coalesce(edge_index, edge_type, reduce="max")
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    scripted = torch.jit.script(conv)
    adj_t = to_torch_csr_tensor(edge_index.flip(0), edge_type.float(), size=(7, 7))
    torch.testing.assert_close(scripted(x, adj_t), conv(x, edge_index, edge_type))
    half = to_torch_csr_tensor(edge_index.flip(0), edge_type.float() + 0.5, size=(7, 7))
    with pytest.raises(torch.jit.Error, match="whole numbers"):
        scripted(x, half)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda c, x, e, t: c(x, e), ValueError, "edge_type is required"),
        (lambda c, x, e, t: c(x, e, t + 3), ValueError, r"edge_type must lie in \[0, 3\)"),
        (lambda c, x, e, t: c(x, e, t[:-1]), ValueError, "edge_type must be"),
        (lambda c, x, e, t: c(x, e, t.float()), TypeError, "edge_type must hold integers"),
        (lambda c, x, e, t: c(torch.randn(7, 9), e, t), ValueError, "more than out_channels"),
        (lambda c, x, e, t: c(x, e.float(), t), TypeError, "edge_index must hold integers"),
        (lambda c, x, e, t: c(x, e + 7, t), ValueError, r"edge_index must lie in \[0, 7\)"),
        (lambda c, x, e, t: c(x, e[:1], t), ValueError, r"edge_index must be \(2, num_edges\)"),
        (lambda c, x, e, t: c(x, e, t, torch.ones(3)), ValueError, "edge_weight must be"),
    ],
)
def test_bad_input_is_refused(call, error, match) -> None:  # type: ignore[no-untyped-def]
    x, edge_index, edge_type = graph()
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    with pytest.raises(error, match=match):
        call(conv, x, edge_index, edge_type)


def test_bad_construction_is_refused() -> None:
    with pytest.raises(ValueError, match="num_edge_types must be an integer >= 1"):
        GatedGraphConv(8, 2, num_edge_types=0)
    with pytest.raises(ValueError, match="gru must be"):
        GatedGraphConv(8, 2, gru="lstm")


def _typed_adjacency(edge_index: Tensor, edge_type: Tensor, n: int, layout: str) -> Tensor:
    """A transposed sparse adjacency whose values are the edge types (RGCNConv's way)."""
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_type, (n, n)).coalesce()
    return coo if layout == "coo" else coo.to_sparse_csr()


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_typed_sparse_adjacency_reads_its_values_as_the_types(layout: str) -> None:
    """edge_type beside a sparse adjacency was paired with the adjacency's sorted edge
    order: up to 0.43 off whenever the edges were not sorted by target. The types now come
    from the adjacency's values, in its own order, and edge_type beside it is refused."""
    torch.manual_seed(0)
    n = 9
    pairs = torch.randperm(n * n)[:20]
    edge_index = torch.stack([pairs // n, pairs % n])  # unsorted, no parallel edges
    edge_type = torch.randint(0, 3, (20,))
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    x = torch.randn(n, 3)
    expected = conv(x, edge_index, edge_type)
    adj_t = _typed_adjacency(edge_index, edge_type, n, layout)
    torch.testing.assert_close(conv(x, adj_t), expected)
    with pytest.raises(ValueError, match="edge_type cannot go with a sparse adjacency"):
        conv(x, adj_t, edge_type)
    with pytest.raises(ValueError, match="takes no edge_weight"):
        conv(x, adj_t, None, torch.ones(20))
    with pytest.raises(ValueError, match=r"edge_type \(the sparse adjacency's values\)"):
        conv(x, _typed_adjacency(edge_index, edge_type + 3, n, layout))


def test_edge_weight_beside_a_sparse_adjacency_is_refused() -> None:
    x, edge_index, _ = graph()
    edge_index = torch_geometric.utils.coalesce(edge_index)
    adj_t = to_torch_csr_tensor(edge_index.flip(0), size=(7, 7))
    conv = GatedGraphConv(8, 2)
    with pytest.raises(ValueError, match="edge_weight cannot go with a sparse adjacency"):
        conv(x, adj_t, None, torch.rand(edge_index.size(1)))


def test_a_one_hot_edge_attr_gets_a_hint() -> None:
    x, edge_index, edge_type = graph()
    one_hot = torch.nn.functional.one_hot(edge_type, 3)
    with pytest.raises(ValueError, match=r"edge_attr.argmax\(-1\)"):
        GatedGraphConv(8, 2, num_edge_types=3)(x, edge_index, one_hot)


def test_input_of_another_dtype_names_both_dtypes() -> None:
    x, edge_index, edge_type = graph()
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    with pytest.raises(TypeError, match=r"x has dtype torch\.float64, but the layer's parameters"):
        conv(x.double(), edge_index, edge_type)
    out = conv.double()(x.double(), edge_index, edge_type)  # the module follows .double()
    assert out.dtype == torch.float64


def test_a_graph_without_nodes_gives_an_empty_output() -> None:
    conv = GatedGraphConv(8, 2, num_edge_types=3)
    out = conv(torch.zeros(0, 3), torch.zeros(2, 0, dtype=torch.long), torch.zeros(0).long())
    assert out.shape == (0, 8)


def test_second_derivatives_through_the_sparse_route() -> None:
    """The sparse route's own backward (A^T built once per call) is differentiable."""
    torch.manual_seed(13)
    x, edge_index, edge_type = graph(nodes=5, edges=8, types=2)
    conv = GatedGraphConv(4, 2, num_edge_types=2).double()
    assert conv._can_fuse(x.double(), None)
    assert torch.autograd.gradgradcheck(
        lambda x: conv(x, edge_index, edge_type), (x.double().requires_grad_(),)
    )


def test_the_typed_sparse_route_reuses_its_buffer_safely() -> None:
    """Several slots transform into one buffer per call that every step's forward and
    backward reuse: per-step weights, a second backward through a retained graph, and two
    calls alive at once all give the edge-wise route's values and gradients."""
    torch.manual_seed(14)
    x, edge_index, edge_type = graph(nodes=12, edges=40, types=3)
    conv = GatedGraphConv(8, 4, num_edge_types=3, share_weights=False).double()
    edgewise_conv = GatedGraphConv(8, 4, num_edge_types=3, share_weights=False).double()
    edgewise_conv.load_state_dict(conv.state_dict())
    edgewise_conv._can_fuse = lambda *_: False  # type: ignore[method-assign]
    expected = _outputs_and_gradients(edgewise_conv, x.double(), edge_index, edge_type)
    torch.testing.assert_close(
        _outputs_and_gradients(conv, x.double(), edge_index, edge_type), expected
    )
    xs = [x.double().clone().requires_grad_() for _ in range(2)]
    first, second = (conv(xi, edge_index, edge_type) for xi in xs)  # two calls alive at once
    torch.testing.assert_close(first, second)
    first.sum().backward(retain_graph=True)
    grad = xs[0].grad.clone()  # type: ignore[union-attr]
    second.sum().backward()
    first.sum().backward()  # again, through the retained graph
    torch.testing.assert_close(xs[0].grad, 2 * grad)
    torch.testing.assert_close(xs[1].grad, grad)
