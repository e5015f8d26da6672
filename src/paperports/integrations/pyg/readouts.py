r"""The output models of GG-NN (Li et al. 2016, section 3.3): graph-level gated readout and
node selection, in PyG's aggregation style (``index`` / ``ptr`` / ``dim_size``)."""

from typing import Optional

import torch
from torch import Tensor, nn
from torch_geometric.nn.aggr import Aggregation
from torch_geometric.utils import softmax

from paperports._checks import check_floating_tensor, check_index_tensor, check_int, values_known

# No __all__ here either: keep the module importable the way PyG's templates expect.


@torch.jit.unused
def _check_graph_index(
    num_nodes: int, index: Optional[Tensor], num_graphs: Optional[int], who: str
) -> None:
    """``index`` (PyG's ``batch`` vector): one graph id per node, in ``[0, num_graphs)``."""
    if index is None:
        return
    if index.dim() != 1 or index.numel() != num_nodes:
        raise ValueError(
            f"{who}: index (the batch vector) must hold one graph per node, ({num_nodes},); got "
            f"shape {tuple(index.shape)}"
        )
    check_index_tensor("index", index, low=0, high=num_graphs, what="num_graphs", who=who)


class GatedGraphReadout(Aggregation):
    r"""The graph-level representation of GG-NN (Li et al. 2016, eq. 7):

    .. math::
        \mathbf{h}_\mathcal{G} = \tanh\left( \sum_{v \in \mathcal{V}}
        \sigma\big(i(\mathbf{h}_v^{(T)}, \mathbf{x}_v)\big) \odot
        \tanh\big(j(\mathbf{h}_v^{(T)}, \mathbf{x}_v)\big) \right)

    where :math:`\sigma(i(\cdot))` is a soft attention deciding which nodes matter and
    :math:`i, j` are linear maps of the concatenation :math:`[\mathbf{h}_v^{(T)},
    \mathbf{x}_v]` (pass that concatenation as ``x``). An :class:`Aggregation`: it reduces
    the nodes of each graph of a batch, given ``index`` (``batch``) or ``ptr``.

    Args:
        in_channels (int): Size of :math:`[\mathbf{h}_v^{(T)}, \mathbf{x}_v]`.
        out_channels (int): Size of :math:`\mathbf{h}_\mathcal{G}`.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, batch vector
          :math:`(|\mathcal{V}|)` *(optional)*
        - **output:** graph features :math:`(|\mathcal{G}|, F_{out})`
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        in_channels = check_int("in_channels", in_channels, minimum=1, who="GatedGraphReadout")
        out_channels = check_int("out_channels", out_channels, minimum=1, who="GatedGraphReadout")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.i = nn.Linear(in_channels, out_channels)
        self.j = nn.Linear(in_channels, out_channels)

    def reset_parameters(self) -> None:
        self.i.reset_parameters()
        self.j.reset_parameters()

    def forward(
        self,
        x: Tensor,
        index: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        dim_size: Optional[int] = None,
        dim: int = -2,
        max_num_elements: Optional[int] = None,
    ) -> Tensor:
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            check_floating_tensor(
                "x", x, dtype=self.i.weight.dtype, who="GatedGraphReadout", module="readout"
            )
        if x.size(-1) != self.in_channels:
            raise ValueError(
                f"GatedGraphReadout expects {self.in_channels} channels ([h_v, x_v]), got "
                f"{x.size(-1)}"
            )
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            _check_graph_index(x.size(0), index, dim_size, "GatedGraphReadout")
        gated = torch.sigmoid(self.i(x)) * torch.tanh(self.j(x))
        return torch.tanh(self.reduce(gated, index, ptr, dim_size, dim, reduce="sum"))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


class NodeSelection(nn.Module):
    r"""Node selection of GG-NN (Li et al. 2016, section 3.3): a score
    :math:`o_v = g(\mathbf{h}_v^{(T)}, \mathbf{x}_v)` per node, turned into a distribution
    over the nodes *of each graph* by a softmax within the graph:

    .. math::
        p(v \mid \mathcal{G}) = \frac{\exp o_v}{\sum_{u \in \mathcal{G}} \exp o_u}

    ``forward`` returns the log-probabilities; :meth:`loss` is the negative log-likelihood
    of one target node per graph, and :meth:`predict` the arg-max node of each graph.

    Args:
        in_channels (int): Size of :math:`[\mathbf{h}_v^{(T)}, \mathbf{x}_v]`.
        hidden_channels (int, optional): Hidden size of :math:`g`, a one-hidden-layer MLP;
            :obj:`None` makes :math:`g` linear. (default: :obj:`None`)
    """

    def __init__(self, in_channels: int, hidden_channels: Optional[int] = None) -> None:
        super().__init__()
        check_int("in_channels", in_channels, minimum=1, who="NodeSelection")
        if hidden_channels is not None:
            check_int("hidden_channels", hidden_channels, minimum=1, who="NodeSelection")
        self.in_channels = in_channels
        if hidden_channels is None:
            self.g: nn.Module = nn.Linear(in_channels, 1)
        else:
            self.g = nn.Sequential(
                nn.Linear(in_channels, hidden_channels), nn.Tanh(), nn.Linear(hidden_channels, 1)
            )

    def forward(
        self,
        x: Tensor,
        index: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        num_graphs: Optional[int] = None,
    ) -> Tensor:
        """Per-node log-probabilities ``(num_nodes,)``, normalised within each graph."""
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            self._check_inputs(x, index, num_graphs)
        scores: Tensor = self.g(x).squeeze(-1)
        if index is None and ptr is None:
            return scores.log_softmax(dim=0)
        probs: Tensor = softmax(scores, index, ptr, num_nodes=num_graphs)
        return torch.log(probs.clamp_min(1e-30))

    @torch.jit.unused
    def _check_inputs(self, x: Tensor, index: Optional[Tensor], num_graphs: Optional[int]) -> None:
        dtype = next(self.g.parameters()).dtype
        check_floating_tensor("x", x, dtype=dtype, who="NodeSelection", module="layer")
        if x.dim() != 2 or x.size(-1) != self.in_channels:
            raise ValueError(
                f"NodeSelection: x must be (num_nodes, {self.in_channels}), got {tuple(x.shape)}"
            )
        _check_graph_index(x.size(0), index, num_graphs, "NodeSelection")

    @staticmethod
    def loss(
        log_probs: Tensor, target: Tensor, ptr: Tensor, mask: Optional[Tensor] = None
    ) -> Tensor:
        """Mean negative log-likelihood of ``target`` (one node per graph, as an index
        *within* its graph) under ``log_probs``; ``ptr`` are the graphs' node offsets.
        ``mask`` (one boolean per graph) keeps only some graphs: the others' targets are
        not read (``-1`` past the end of a shorter output sequence, for example)."""
        if not isinstance(target, Tensor):
            raise TypeError(f"target must be a Tensor, got {type(target).__name__}")
        if target.numel() != ptr.numel() - 1:
            raise ValueError(
                f"target must hold one node per graph ({ptr.numel() - 1}), got {target.numel()}"
            )
        target = target.reshape(-1)
        starts, counts = ptr[:-1], ptr[1:] - ptr[:-1]
        graphs = torch.arange(target.numel(), device=target.device)
        if mask is not None:
            is_mask = isinstance(mask, Tensor) and mask.dtype == torch.bool
            if not is_mask or mask.shape != target.shape:
                raise ValueError(
                    f"mask must be a bool tensor with one entry per graph, "
                    f"{tuple(target.shape)}; got {mask!r:.80}"
                )
            target, starts, counts, graphs = target[mask], starts[mask], counts[mask], graphs[mask]
        target = check_index_tensor("target", target, low=0, high=None)
        if target.numel() and values_known(target):
            beyond = torch.nonzero(target >= counts).flatten()
            if beyond.numel():
                i = int(beyond[0])
                raise ValueError(
                    f"target must be a node index within its own graph: graph "
                    f"{int(graphs[i])} has {int(counts[i])} nodes, its target is "
                    f"{int(target[i])} (it would read a node of another graph in the batch)"
                )
        return -log_probs[starts + target].mean()

    @staticmethod
    def predict(log_probs: Tensor, index: Tensor, num_graphs: int) -> Tensor:
        """The selected node of each graph, as an index within its graph."""
        from torch_geometric.utils import scatter

        num_graphs = check_int("num_graphs", num_graphs, minimum=0, who="NodeSelection.predict")
        _check_graph_index(log_probs.size(0), index, num_graphs, "NodeSelection.predict")

        best = scatter(log_probs, index, dim=0, dim_size=num_graphs, reduce="max")
        is_best = log_probs >= best[index]
        position = torch.arange(log_probs.numel(), device=log_probs.device)
        first = torch.full((num_graphs,), log_probs.numel(), device=log_probs.device)
        first = first.scatter_reduce(0, index[is_best], position[is_best], reduce="amin")
        starts: Tensor = scatter(position, index, dim=0, dim_size=num_graphs, reduce="min")
        return first - starts
