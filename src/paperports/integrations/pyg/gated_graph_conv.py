r"""The gated graph convolution of GG-NN (Li et al. 2016), with edge types and directions."""

# No `from __future__ import annotations`: PyG's TorchScript templates read real annotations.
import warnings
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import spmm, to_edge_index

from paperports._checks import (
    check_bool,
    check_choice,
    check_floating_tensor,
    check_index_tensor,
    check_int,
)
from paperports.integrations.pyg.gru import PaperGRUCell

# No __all__: PyG's generated `propagate` star-imports this module for its type names.

_LINEAR_AGGRS = ("add", "sum", "mean")
_SPARSE_DTYPES = (torch.float32, torch.float64)


def _as_edge_index(adj: Adj, edge_weight: OptTensor) -> tuple[Tensor, OptTensor]:
    """A sparse adjacency (transposed, as PyG's: entry ``[i, j]`` is the edge ``j -> i``)
    as ``edge_index`` and, unless all ones, its values as edge weights."""
    if isinstance(adj, Tensor) and adj.layout == torch.strided:
        return adj, edge_weight
    if edge_weight is not None:
        raise ValueError(
            "edge_weight cannot go with a sparse adjacency: the adjacency's own edge order "
            "is not the caller's, so the weights would be paired with the wrong edges; put "
            "the weights in the adjacency's values, or pass an edge_index"
        )
    (target, source), values = to_edge_index(adj)
    if not bool((values == 1).all()):
        edge_weight = values
    return torch.stack([source, target]), edge_weight


def _typed_edge_index(adj: Adj, num_edge_types: int) -> tuple[Tensor, Tensor]:
    """A sparse adjacency whose values are edge types (as PyG's ``RGCNConv`` reads a
    ``SparseTensor``): ``edge_index`` and ``edge_type`` in the adjacency's own order."""
    (target, source), values = to_edge_index(adj)
    if values.is_floating_point():
        if not bool((values == values.round()).all()):
            raise ValueError(
                "a typed layer reads the edge types from a sparse adjacency's values, which "
                "must be whole numbers; pass an edge_index with edge_type instead"
            )
        values = values.round().long()
    check_index_tensor(
        "edge_type (the sparse adjacency's values)",
        values,
        low=0,
        high=num_edge_types,
        what="num_edge_types",
        who="GatedGraphConv",
    )
    return torch.stack([source, target]), values.long()


class _SlotSums(torch.autograd.Function):
    """``A @ h`` for a CSR matrix ``A`` of :meth:`GatedGraphConv._slot_adjacency`, whose
    backward ``A^T @ g`` transposes ``A`` once per call instead of once per step: the
    transpose is kept on ``A`` itself, which lives as long as the call."""

    @staticmethod
    def forward(ctx: Any, adjacency: Tensor, h: Tensor) -> Tensor:
        ctx.adjacency = adjacency
        return _sparse_times_dense(adjacency, h)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor]:
        adjacency = ctx.adjacency
        transposed = getattr(adjacency, "_paperports_transposed", None)
        if transposed is None:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
                transposed = adjacency.t().to_sparse_csr()
            adjacency._paperports_transposed = transposed
        buffer = getattr(adjacency, "_paperports_buffer", None)
        if buffer is not None and not (torch.is_grad_enabled() and grad.requires_grad):
            # the transformed states' gradient, into the call's buffer (see _SlotTransform)
            block = buffer.view(transposed.size(0), grad.size(1))
            return None, torch.addmm(block, transposed, grad, beta=0, out=block)
        return None, _sparse_times_dense(transposed, grad)


class _SlotTransform(torch.autograd.Function):
    """``h @ W`` for every slot's weight at once, ``(N, K D C)``, seen as the
    ``(N K D, C)`` rows that the transform-first matrix of
    :meth:`GatedGraphConv._slot_adjacency` sums. The block lives in one buffer per call,
    kept on that matrix, which every step's forward writes and every step's backward
    (:class:`_SlotSums`) reuses for its gradient: nothing saves the block, each step's is
    consumed before the next is written (the backward of step ``t`` ends before that of
    ``t - 1`` can start), and a fresh block per step cost more in page faults than the
    product itself."""

    @staticmethod
    def forward(ctx: Any, adjacency: Tensor, h: Tensor, weight: Tensor) -> Tensor:
        buffer = getattr(adjacency, "_paperports_buffer", None)
        if buffer is None or buffer.shape != (h.size(0), weight.size(1)):
            buffer = h.new_empty(h.size(0), weight.size(1))
            adjacency._paperports_buffer = buffer  # type: ignore[attr-defined]
        torch.mm(h, weight, out=buffer)
        ctx.save_for_backward(h, weight)
        return buffer.view(-1, h.size(1))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor, Tensor]:
        h, weight = ctx.saved_tensors
        block = grad.reshape(h.size(0), weight.size(1))
        return None, block @ weight.t(), h.t() @ block


def _sparse_times_dense(sparse: Tensor, dense: Tensor) -> Tensor:
    """``sparse @ dense`` written straight into an uninitialised output: ``beta=0``
    ignores its contents (NaN included, as documented for ``addmm``). ``@`` would
    zero-fill and copy, and ``addmm`` without ``out=`` copies its input into a second new
    tensor first: a full extra pass over fresh memory, which cost more than the product
    for the typed layer's ``num_nodes * K * D`` rows."""
    out = dense.new_empty(sparse.size(0), dense.size(1))
    if torch.is_grad_enabled() and (dense.requires_grad or sparse.requires_grad):
        return torch.addmm(out, sparse, dense, beta=0)  # differentiable (double backward)
    return torch.addmm(out, sparse, dense, beta=0, out=out)


@torch.jit.unused
def _slot_sums(adjacency: Tensor, h: Tensor) -> Tensor:
    out: Tensor = _SlotSums.apply(adjacency, h)  # type: ignore[no-untyped-call]
    return out


class GatedGraphConv(MessagePassing):
    r"""The gated graph convolution from the `"Gated Graph Sequence Neural Networks"
    <https://arxiv.org/abs/1511.05493>`_ paper (Li, Tarlow, Brockschmidt, Zemel, ICLR 2016),
    with the paper's edge types and edge directions:

    .. math::
        \mathbf{h}_v^{(1)} &= \mathbf{x}_v \, \Vert \, \mathbf{0}

        \mathbf{a}_v^{(t)} &= \sum_{(u \to v) \in \mathcal{E}_k} \mathbf{W}_\text{in}^{k}
            \mathbf{h}_u^{(t-1)} + \sum_{(v \to u) \in \mathcal{E}_k}
            \mathbf{W}_\text{out}^{k} \mathbf{h}_u^{(t-1)} + \mathbf{b}

        \mathbf{h}_v^{(t)} &= \mathrm{GRU}(\mathbf{a}_v^{(t)}, \mathbf{h}_v^{(t-1)})

    for :math:`t = 1 \dots T` (``num_layers``): one weight per edge type :math:`k` and per
    direction, shared across the :math:`T` steps; the GRU is the paper's
    (:class:`~paperports.integrations.pyg.PaperGRUCell`, reset gate before :math:`\mathbf{U}`)
    or :class:`torch.nn.GRUCell`.

    With ``num_edge_types=1, bidirectional=False, share_weights=False, gru="torch"`` the
    layer computes what :class:`torch_geometric.nn.GatedGraphConv` computes and loads its
    state dict (the propagation bias, which PyG's layer lacks, is then zero; pass
    ``propagation_bias=False`` to leave it out altogether).

    For ``aggr="add"`` or ``"mean"`` (averaged within each edge type and direction, the
    R-GCN convention) no message is built per edge: each step is one dense product and
    one sparse-dense product with a CSR matrix built once per call and fed to
    :meth:`propagate` (PyG's fused :meth:`message_and_aggregate` route, as for a sparse
    adjacency), whose backward reuses one transpose of that matrix for all steps. With one
    edge type and direction the messages are summed first, ``(num_nodes, num_nodes)``, then
    transformed; with several, every state is transformed by all :math:`K D` weights in
    one product and the results summed per node by a ``(num_nodes, num_nodes * K * D)``
    matrix, so that the ``num_nodes x K D C`` block is a temporary rather than kept for
    the backward pass (fresh memory at every step, which on CPU cost more than the
    product). Under
    ``torch.compile`` or TorchScript, while explaining, with message/aggregate hooks
    registered, with edge weights that require gradients, or in half precision, the layer
    gathers and scatters edge by edge instead (same result).
    Other aggregations (``"max"``, ``"min"``, ...) transform first, then aggregate.

    Args:
        out_channels (int): Size of the node states :math:`\mathbf{h}_v`.
        num_layers (int): The number of propagation steps :math:`T`.
        num_edge_types (int, optional): The number of edge types :math:`K`.
            (default: :obj:`1`)
        bidirectional (bool, optional): Also pass messages against the edge direction, with
            separate weights :math:`\mathbf{W}_\text{out}^{k}`. (default: :obj:`True`)
        share_weights (bool, optional): One set of propagation weights for all :math:`T`
            steps, as in the paper; :obj:`False` gives each step its own, as PyG's layer.
            (default: :obj:`True`)
        aggr (str, optional): The aggregation scheme (:obj:`"add"`, :obj:`"mean"`,
            :obj:`"max"`, ...). (default: :obj:`"add"`)
        bias (bool, optional): Learn the GRU biases. (default: :obj:`True`)
        gru (str, optional): :obj:`"paper"` or :obj:`"torch"`. (default: :obj:`"paper"`)
        propagation_bias (bool, optional): Learn the bias :math:`\mathbf{b}` of
            :math:`\mathbf{a}_v` (zero-initialised). (default: :obj:`True`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features (annotations) :math:`(|\mathcal{V}|, F_{in})` with
          :math:`F_{in} \le` ``out_channels``,
          edge indices :math:`(2, |\mathcal{E}|)` or a sparse adjacency (transposed, as in
          PyG),
          edge types :math:`(|\mathcal{E}|)` *(optional)*,
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, \text{out\_channels})`
    """

    def __init__(
        self,
        out_channels: int,
        num_layers: int,
        num_edge_types: int = 1,
        bidirectional: bool = True,
        share_weights: bool = True,
        aggr: str = "add",
        bias: bool = True,
        gru: str = "paper",
        propagation_bias: bool = True,
        **kwargs: Any,
    ) -> None:
        who = "GatedGraphConv"
        out_channels = check_int("out_channels", out_channels, minimum=1, who=who)
        num_layers = check_int("num_layers", num_layers, minimum=1, who=who)
        num_edge_types = check_int("num_edge_types", num_edge_types, minimum=1, who=who)
        bidirectional = check_bool("bidirectional", bidirectional, who=who)
        share_weights = check_bool("share_weights", share_weights, who=who)
        bias = check_bool("bias", bias, who=who)
        propagation_bias = check_bool("propagation_bias", propagation_bias, who=who)
        check_choice("gru", gru, ("paper", "torch"), who=who)
        try:
            super().__init__(aggr=aggr, **kwargs)
        except ValueError as err:  # PyG's resolver does not name the argument
            raise ValueError(
                f"{who}: aggr {aggr!r} is not an aggregation PyG knows: {err}"
            ) from err
        self.out_channels = out_channels
        self.num_layers = num_layers
        self.num_edge_types = num_edge_types
        self.bidirectional = bidirectional
        self.share_weights = share_weights
        self.gru = gru
        self.num_slots = num_edge_types * (2 if bidirectional else 1)
        self.num_weight_sets = 1 if share_weights else num_layers
        self.aggregate_first = isinstance(aggr, str) and aggr in _LINEAR_AGGRS
        self.weight = nn.Parameter(
            torch.empty(self.num_weight_sets * self.num_slots, out_channels, out_channels)
        )
        if propagation_bias:
            self.propagation_bias: OptTensor = nn.Parameter(
                torch.empty(self.num_weight_sets, out_channels)
            )
        else:
            self.register_parameter("propagation_bias", None)
        self.rnn: nn.Module = (
            PaperGRUCell(out_channels, out_channels, bias=bias)
            if gru == "paper"
            else nn.GRUCell(out_channels, out_channels, bias=bias)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        bound = 1.0 / self.out_channels**0.5
        nn.init.uniform_(self.weight, -bound, bound)  # as PyG's layer
        if self.propagation_bias is not None:
            nn.init.zeros_(self.propagation_bias)
        self.rnn.reset_parameters()  # type: ignore[operator]

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        # A state dict of torch_geometric.nn.GatedGraphConv has no propagation bias: zero.
        key = prefix + "propagation_bias"
        if (
            self.propagation_bias is not None
            and key not in state_dict
            and prefix + "rnn.weight_ih" in state_dict
        ):
            state_dict[key] = torch.zeros_like(self.propagation_bias)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(
        self,
        x: Tensor,
        edge_index: Adj,
        edge_type: OptTensor = None,
        edge_weight: OptTensor = None,
    ) -> Tensor:
        """Run the ``num_layers`` propagation steps.

        Args:
            x: Node annotations ``(num_nodes, F_in)``, ``F_in <= out_channels``; zero-padded
                to ``out_channels`` as the initial state.
            edge_index: ``(2, num_edges)`` source and target indices, or a sparse adjacency
                (``torch.sparse`` or ``SparseTensor``, transposed as in PyG: entry
                ``[i, j]`` is the edge ``j -> i``). Its values are the edge weights when
                ``num_edge_types == 1`` and the edge types otherwise (as ``RGCNConv`` reads
                a ``SparseTensor``; parallel edges of different types cannot share an entry,
                so keep a multigraph's ``edge_index``).
            edge_type: ``(num_edges,)`` integer types in ``[0, num_edge_types)``, paired with
                ``edge_index``; needed when ``num_edge_types > 1``, refused with a sparse
                adjacency.
            edge_weight: Optional ``(num_edges,)`` weights multiplying the messages, paired
                with ``edge_index`` (refused with a sparse adjacency, whose values hold
                them).
        """
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            edge_index, edge_type, edge_weight = self._edges(edge_index, edge_type, edge_weight)
        assert isinstance(edge_index, Tensor)
        if torch.jit.is_scripting() and edge_index.layout != torch.strided:  # type: ignore[attr-defined]
            edge_index, edge_type, edge_weight = self._scripted_sparse_edges(
                edge_index, edge_type, edge_weight
            )
        num_nodes = x.size(0)
        if not torch.jit.is_scripting() and not torch.compiler.is_compiling():  # type: ignore[attr-defined]
            self._check_inputs(x, edge_index, edge_type, edge_weight)
        if x.size(-1) < self.out_channels:
            x = torch.cat([x, x.new_zeros(num_nodes, self.out_channels - x.size(-1))], dim=1)

        src, dst = edge_index[0], edge_index[1]
        slot = edge_type if edge_type is not None else torch.zeros_like(src)
        if self.bidirectional:  # v -> u also carries a message to v, with W_out
            src, dst = torch.cat([src, dst]), torch.cat([dst, src])
            slot = torch.cat([slot, slot + self.num_edge_types])
            if edge_weight is not None:
                edge_weight = torch.cat([edge_weight, edge_weight])
        slots = self.num_slots
        sparse_adjacency: OptTensor = None
        # one sparse product per step where the call allows it (linear aggregation, see
        # _can_fuse): with several slots, transform first, so that the (N, slots * C) block
        # is a temporary; aggregating first would keep it for the backward pass, a fresh
        # block of memory per step (on CPU, page faults cost more than the product)
        fused_transform_first = False
        if self.aggregate_first:  # sum h_u per (node, slot), then one matrix product
            index = torch.stack([src, dst * slots + slot])
            size = (num_nodes, num_nodes * slots)
            if not torch.jit.is_scripting() and self._can_fuse(x, edge_weight):  # type: ignore[attr-defined]
                fused_transform_first = slots > 1
                sparse_adjacency = self._slot_adjacency(
                    src, dst, slot, edge_weight, num_nodes, x.dtype, fused_transform_first
                )
        else:  # transform h_u per slot, then aggregate per node
            index = torch.stack([src * slots + slot, dst])
            size = (num_nodes * slots, num_nodes)

        h = x
        for t in range(self.num_layers):
            s = 0 if self.share_weights else t
            weight = self.weight[s * slots : (s + 1) * slots]
            if sparse_adjacency is not None and fused_transform_first:
                # h_u W_k for every (u, k) as one product, then A' sums them per node
                weights = weight.permute(1, 0, 2).reshape(
                    self.out_channels, slots * self.out_channels
                )
                transformed = _SlotTransform.apply(sparse_adjacency, h, weights)  # type: ignore[no-untyped-call]
                # propagate_type: (x: Tensor, edge_weight: OptTensor)
                a = self.propagate(sparse_adjacency, x=transformed, edge_weight=None)
            elif self.aggregate_first:
                if sparse_adjacency is not None:
                    # propagate_type: (x: Tensor, edge_weight: OptTensor)
                    summed = self.propagate(sparse_adjacency, x=h, edge_weight=None)
                else:
                    summed = self.propagate(index, x=h, edge_weight=edge_weight, size=size)
                a = summed.view(num_nodes, slots * self.out_channels) @ weight.reshape(
                    slots * self.out_channels, self.out_channels
                )
            else:
                transformed = torch.einsum("nc,scd->nsd", h, weight).reshape(
                    num_nodes * slots, self.out_channels
                )
                a = self.propagate(index, x=transformed, edge_weight=edge_weight, size=size)
            if self.propagation_bias is not None:
                a = a + self.propagation_bias[s]
            h = self.rnn(a, h)
        return h

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def explain_message(self, inputs: Tensor, dim_size: Optional[int]) -> Tensor:
        # A bidirectional layer sends two messages per edge, u -> v with W_in and v -> u
        # with W_out, laid out as [forward edges, reverse edges]: both belong to the edge,
        # so the explainer's one mask entry per edge gates both (PyG's own rule, applied to
        # the two halves).
        edge_mask = self._edge_mask
        if self.bidirectional and edge_mask is not None and inputs.size(0) == 2 * edge_mask.size(0):
            if self._apply_sigmoid:
                edge_mask = edge_mask.sigmoid()
            gated: Tensor = inputs * edge_mask.repeat(2).view(-1, 1)
            return gated
        out: Tensor = super().explain_message(inputs, dim_size)
        return out

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        # adj_t is built by `_slot_adjacency`: its values already hold the edge weights and,
        # for aggr="mean", the 1 / count normalisation, so every aggregation is a plain sum.
        if torch.jit.is_scripting() or not isinstance(adj_t, Tensor):  # type: ignore[attr-defined]
            out: Tensor = spmm(adj_t, x, reduce="sum")
            return out
        return _slot_sums(adj_t, x)

    @torch.jit.unused
    def _can_fuse(self, x: Tensor, edge_weight: OptTensor) -> bool:
        """Whether the sparse-matrix route computes what the edge-wise route would, and
        keeps every PyG feature the call relies on."""
        return (
            not torch.compiler.is_compiling()
            and not x.is_meta  # the CSR route counts edges (bincount): no meta kernel
            and not self.explain
            and x.dtype in _SPARSE_DTYPES
            and (edge_weight is None or not edge_weight.requires_grad)
            and not (
                self._message_forward_pre_hooks
                or self._message_forward_hooks
                or self._aggregate_forward_pre_hooks
                or self._aggregate_forward_hooks
            )
        )

    @torch.jit.unused
    def _slot_adjacency(
        self,
        source: Tensor,
        target: Tensor,
        slot: Tensor,
        edge_weight: OptTensor,
        num_nodes: int,
        dtype: torch.dtype,
        transform_first: bool,
    ) -> Tensor:
        """The CSR matrix of the layer's one sparse product per step.

        Aggregating first, ``A`` of shape ``(num_nodes * slots, num_nodes)`` with
        ``A[v * slots + k, u]`` the weight of the message ``u -> v`` in slot ``k``, so that
        ``A @ h`` holds the per-(node, slot) aggregates; transforming first, ``A'`` of shape
        ``(num_nodes, num_nodes * slots)`` with ``A'[v, u * slots + k]`` the same weight, so
        that ``A' @ T`` sums the transformed ``T[u * slots + k] = h_u W_k`` per node. For
        ``aggr="mean"`` each weight is divided by its (node, slot)'s message count."""
        slots = self.num_slots
        group = target * slots + slot  # the (node, slot) a message is aggregated in
        if transform_first:
            row, col = target, source * slots + slot
            shape = (num_nodes, num_nodes * slots)
        else:
            row, col = group, source
            shape = (num_nodes * slots, num_nodes)
        order = torch.argsort(row * shape[1] + col)
        crow = torch.cat([row.new_zeros(1), torch.bincount(row, minlength=shape[0]).cumsum(0)])
        if edge_weight is None:
            values = torch.ones(row.numel(), dtype=dtype, device=row.device)
        else:
            values = edge_weight[order].to(dtype)
        if self.aggr == "mean":
            counts = torch.bincount(group, minlength=num_nodes * slots)
            values = values / counts[group[order]].to(values.dtype)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            # torch 2.11 on CUDA, although the call opts out explicitly
            warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly")
            return torch.sparse_csr_tensor(
                crow, col[order], values, size=shape, check_invariants=False
            )

    def _scripted_sparse_edges(
        self, adj: Tensor, edge_type: OptTensor, edge_weight: OptTensor
    ) -> tuple[Tensor, OptTensor, OptTensor]:
        """What :meth:`_edges` does for a ``torch.sparse`` adjacency, in TorchScript (which
        cannot compile PyG's ``to_edge_index``): its values are the edge weights for one
        edge type and the edge types otherwise."""
        if edge_type is not None or edge_weight is not None:
            raise ValueError(
                "edge_type and edge_weight cannot go with a sparse adjacency, whose own edge "
                "order is not the caller's: put them in its values, or pass an edge_index"
            )
        coo = adj.coalesce() if adj.layout == torch.sparse_coo else adj.to_sparse().coalesce()
        target_source = coo.indices()
        edge_index = torch.stack([target_source[1], target_source[0]])
        values = coo.values()
        if self.num_edge_types == 1:
            return edge_index, None, None if bool((values == 1).all()) else values
        if bool((values != values.round()).any()):
            raise ValueError(
                "a typed layer reads the edge types from a sparse adjacency's values, which "
                "must be whole numbers; pass an edge_index with edge_type instead"
            )
        types = values.round().long()
        if types.numel() > 0 and (int(types.min()) < 0 or int(types.max()) >= self.num_edge_types):
            raise ValueError(
                "edge_type (the sparse adjacency's values) must lie in [0, num_edge_types)"
            )
        return edge_index, types, None

    @torch.jit.unused
    def _edges(
        self, adj: Adj, edge_type: OptTensor, edge_weight: OptTensor
    ) -> tuple[Tensor, OptTensor, OptTensor]:
        """``edge_index, edge_type, edge_weight`` from an ``edge_index`` or a sparse
        adjacency. A typed layer reads a sparse adjacency's values as the edge types, as
        PyG's ``RGCNConv`` does; an ``edge_type`` given beside it is refused, since it could
        only be paired with the adjacency's own (sorted) edge order, not the caller's."""
        if isinstance(adj, Tensor) and adj.layout == torch.strided:
            return adj, edge_type, edge_weight
        if edge_type is not None:
            raise ValueError(
                "edge_type cannot go with a sparse adjacency: its edges are stored in their "
                "own (sorted) order, so the types would be paired with the wrong edges. Put "
                "the types in the adjacency's values (as RGCNConv reads a SparseTensor), or "
                "pass an edge_index with its edge_type"
            )
        if self.num_edge_types == 1:
            edge_index, edge_weight = _as_edge_index(adj, edge_weight)
            return edge_index, None, edge_weight
        if edge_weight is not None:
            raise ValueError(
                "a typed layer reads a sparse adjacency's values as edge types, so it takes no "
                "edge_weight; pass an edge_index with edge_type and edge_weight instead"
            )
        edge_index, edge_type = _typed_edge_index(adj, self.num_edge_types)
        return edge_index, edge_type, None

    @torch.jit.unused
    def _check_inputs(
        self, x: Tensor, edge_index: Tensor, edge_type: OptTensor, edge_weight: OptTensor
    ) -> None:
        who = "GatedGraphConv"
        check_floating_tensor("x", x, dtype=self.weight.dtype, who=who, module="layer")
        if x.dim() != 2:
            raise ValueError(f"x must be (num_nodes, channels), got shape {tuple(x.shape)}")
        if x.size(-1) > self.out_channels:
            raise ValueError(
                f"x has {x.size(-1)} channels, more than out_channels ({self.out_channels}): "
                "annotations are zero-padded up to the state size, never cut"
            )
        if not isinstance(edge_index, Tensor):
            raise TypeError(f"edge_index must be a Tensor, got {type(edge_index).__name__}")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(
                f"edge_index must be (2, num_edges), got shape {tuple(edge_index.shape)}"
            )
        num_nodes, num_edges = x.size(0), edge_index.size(1)
        check_index_tensor(
            "edge_index", edge_index, low=0, high=num_nodes, what="the number of nodes in x"
        )
        if edge_type is None:
            if self.num_edge_types > 1:
                raise ValueError(
                    f"edge_type is required: this layer has num_edge_types="
                    f"{self.num_edge_types}; pass a (num_edges,) tensor of types"
                )
        else:
            if not isinstance(edge_type, Tensor):
                raise TypeError(f"edge_type must be a Tensor, got {type(edge_type).__name__}")
            if edge_type.dim() != 1 or edge_type.numel() != num_edges:
                hint = ""
                if edge_type.dim() == 2 and edge_type.size(0) == num_edges:
                    hint = (
                        " (a one-hot edge_attr of shape (num_edges, num_edge_types) gives the "
                        "types as edge_attr.argmax(-1))"
                    )
                raise ValueError(
                    f"edge_type must be (num_edges,) = ({num_edges},), got shape "
                    f"{tuple(edge_type.shape)}{hint}"
                )
            check_index_tensor(
                "edge_type", edge_type, low=0, high=self.num_edge_types, what="num_edge_types"
            )
        if edge_weight is not None:
            check_floating_tensor(
                "edge_weight", edge_weight, dtype=self.weight.dtype, who=who, module="layer"
            )
            if edge_weight.numel() != num_edges:
                raise ValueError(
                    f"edge_weight must be (num_edges,) = ({num_edges},), got shape "
                    f"{tuple(edge_weight.shape)}"
                )

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.out_channels}, num_layers={self.num_layers}, "
            f"num_edge_types={self.num_edge_types}, bidirectional={self.bidirectional}, "
            f"share_weights={self.share_weights}, gru={self.gru!r})"
        )
