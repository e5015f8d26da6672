r"""The GRU update of Li et al. (2016), equations (3)-(6), with the reset gate before :math:`U`."""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import Tensor, nn

from paperports._checks import check_bool, check_floating_tensor, check_int

__all__ = ["PaperGRUCell"]


def _paper_gru(
    a: Tensor,
    h: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Optional[Tensor],
    bias_hh: Optional[Tensor],
) -> Tensor:
    """Equations (4)-(6) in plain torch operations (reset gate, update gate, new state, in
    torch's stacking)."""
    size = h.size(1)
    gi = nn.functional.linear(a, weight_ih, bias_ih)
    gh = nn.functional.linear(
        h, weight_hh[: 2 * size], None if bias_hh is None else bias_hh[: 2 * size]
    )
    r = torch.sigmoid(gi[:, :size] + gh[:, :size])
    z = torch.sigmoid(gi[:, size : 2 * size] + gh[:, size:])
    candidate = torch.tanh(
        gi[:, 2 * size :]
        + nn.functional.linear(
            r * h, weight_hh[2 * size :], None if bias_hh is None else bias_hh[2 * size :]
        )
    )
    return h + z * (candidate - h)


class _FusedPaperGRU(torch.autograd.Function):
    """The cell's forward and a hand-written backward, with few intermediate tensors.

    Every bias sits outside the reset gate in the paper's form, so ``b_ih + b_hh`` is one
    bias. Forward: ``[r, z] = sigmoid(W_rz a + U_rz h + b_rz)``,
    ``n = tanh(W_n a + U_n (r * h) + b_n)``, ``h' = h + z (n - h)``. Backward, with ``g``
    the gradient of ``h'``: the pre-activation gradients ``d_n = g z (1 - n^2)``,
    ``d_z = g (n - h) z (1 - z)``, ``d_r = (d_n U_n) h r (1 - r)``, then one matrix product
    per weight and input. Where the backward itself is differentiated (``create_graph``),
    it differentiates :func:`_paper_gru` instead, so second derivatives are autograd's."""

    @staticmethod
    def forward(
        ctx: Any,
        a: Tensor,
        h: Tensor,
        weight_ih: Tensor,
        weight_hh: Tensor,
        bias_ih: Optional[Tensor],
        bias_hh: Optional[Tensor],
    ) -> Tensor:
        size = h.size(1)
        if bias_ih is not None and bias_hh is not None:
            gi = torch.addmm(bias_ih + bias_hh, a, weight_ih.t())
        else:
            gi = a @ weight_ih.t()
        rz = torch.addmm(gi[:, : 2 * size], h, weight_hh[: 2 * size].t()).sigmoid_()
        rh = rz[:, :size] * h
        n = torch.addmm(gi[:, 2 * size :], rh, weight_hh[2 * size :].t()).tanh_()
        ctx.save_for_backward(a, h, weight_ih, weight_hh, bias_ih, bias_hh, rz, rh, n)
        return torch.lerp(h, n, rz[:, size:])

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Optional[Tensor], ...]:
        a, h, weight_ih, weight_hh, bias_ih, bias_hh, rz, rh, n = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: a backward that is itself differentiable
            inputs = (a, h, weight_ih, weight_hh, bias_ih, bias_hh)
            wanted = [i for i, x in enumerate(inputs) if x is not None and ctx.needs_input_grad[i]]
            grads = torch.autograd.grad(
                _paper_gru(*inputs), [inputs[i] for i in wanted], g, create_graph=True
            )
            result: list[Optional[Tensor]] = [None] * len(inputs)
            for i, grad in zip(wanted, grads, strict=True):
                result[i] = grad
            return tuple(result)
        size = h.size(1)
        r, z = rz[:, :size], rz[:, size:]
        d = g.new_empty(g.size(0), 3 * size)  # pre-activation gradients [d_r, d_z, d_n]
        d_r, d_z, d_n = d[:, :size], d[:, size : 2 * size], d[:, 2 * size :]
        # in place, one pass per factor: x (1 - y) as x - x y
        torch.mul(g, z, out=d_n).addcmul_(d_n * n, n, value=-1)
        torch.sub(n, h, out=d_z).mul_(g).mul_(z)
        d_z.addcmul_(d_z, z, value=-1)
        d_rh = d_n @ weight_hh[2 * size :]
        torch.mul(d_rh, h, out=d_r).mul_(r)
        d_r.addcmul_(d_r, r, value=-1)
        d_rz = d[:, : 2 * size]
        grad_h = torch.addcmul(g, g, z, value=-1).addcmul_(d_rh, r)
        grad_h = torch.addmm(grad_h, d_rz, weight_hh[: 2 * size])
        grad_a = d @ weight_ih
        grad_weight_ih = d.t() @ a
        grad_weight_hh = torch.cat([d_rz.t() @ h, d_n.t() @ rh])
        if bias_ih is None:
            return grad_a, grad_h, grad_weight_ih, grad_weight_hh, None, None
        grad_bias = d.sum(0)  # one tensor per bias: a shared one would become both .grad
        return grad_a, grad_h, grad_weight_ih, grad_weight_hh, grad_bias, grad_bias.clone()


@torch.jit.unused
def _fused_cell(
    a: Tensor,
    h: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Optional[Tensor],
    bias_hh: Optional[Tensor],
) -> Tensor:
    out: Tensor = _FusedPaperGRU.apply(  # type: ignore[no-untyped-call]
        a, h, weight_ih, weight_hh, bias_ih, bias_hh
    )
    return out


class PaperGRUCell(nn.Module):
    r"""The GRU cell as the GG-NN paper writes it (Li et al. 2016, eq. 4-6):

    .. math::
        \mathbf{z} &= \sigma(\mathbf{W}^z \mathbf{a} + \mathbf{U}^z \mathbf{h}) \\
        \mathbf{r} &= \sigma(\mathbf{W}^r \mathbf{a} + \mathbf{U}^r \mathbf{h}) \\
        \widetilde{\mathbf{h}} &= \tanh(\mathbf{W} \mathbf{a} +
            \mathbf{U} (\mathbf{r} \odot \mathbf{h})) \\
        \mathbf{h}' &= (1 - \mathbf{z}) \odot \mathbf{h} + \mathbf{z} \odot \widetilde{\mathbf{h}}

    It differs from :class:`torch.nn.GRUCell` in two places: the reset gate multiplies
    :math:`\mathbf{h}` *before* :math:`\mathbf{U}` (torch computes
    :math:`\mathbf{r} \odot (\mathbf{U}\mathbf{h} + \mathbf{b})`), and :math:`\mathbf{z}` is
    the share of the new state (torch's is the share of the old one). The parameters have
    torch's names and layout (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``, gates
    stacked as reset, update, new) and its initialisation.

    In eager mode the cell runs as one autograd function with a hand-written backward (as
    fast as :class:`torch.nn.GRUCell` for the same arithmetic; ``paperports bench ggnn``);
    scripted or compiled, it runs as plain operations, which those fuse themselves. Both
    give the same values and first and second derivatives (tested).

    Args:
        input_size (int): Size of :math:`\mathbf{a}`.
        hidden_size (int): Size of :math:`\mathbf{h}`.
        bias (bool, optional): Learn the biases :math:`\mathbf{b}_{ih}, \mathbf{b}_{hh}`.
            (default: :obj:`True`)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True) -> None:
        super().__init__()
        input_size = check_int("input_size", input_size, minimum=1, who="PaperGRUCell")
        hidden_size = check_int("hidden_size", hidden_size, minimum=1, who="PaperGRUCell")
        bias = check_bool("bias", bias, who="PaperGRUCell")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
        if bias:
            self.bias_ih: Tensor | None = nn.Parameter(torch.empty(3 * hidden_size))
            self.bias_hh: Tensor | None = nn.Parameter(torch.empty(3 * hidden_size))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def forward(self, input: Tensor, hx: Tensor) -> Tensor:
        if torch.jit.is_scripting() or torch.compiler.is_compiling():  # type: ignore[attr-defined]
            return self._forward_ops(input, hx)  # what scripting and compilers can fuse
        self._check(input, hx)
        return _fused_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)

    def _forward_ops(self, input: Tensor, hx: Tensor) -> Tensor:
        """The cell in plain torch operations, differentiated by autograd."""
        return _paper_gru(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)

    @torch.jit.unused
    def _check(self, input: Tensor, hx: Tensor) -> None:
        dtype = self.weight_ih.dtype
        check_floating_tensor("input", input, dtype=dtype, who="PaperGRUCell", module="cell")
        check_floating_tensor("hx", hx, dtype=dtype, who="PaperGRUCell", module="cell")
        if input.dim() != 2 or input.size(-1) != self.input_size:
            raise ValueError(
                f"PaperGRUCell: input must be (batch, {self.input_size}), got {tuple(input.shape)}"
            )
        if tuple(hx.shape) != (input.size(0), self.hidden_size):
            raise ValueError(
                f"PaperGRUCell: hx must be ({input.size(0)}, {self.hidden_size}), got "
                f"{tuple(hx.shape)}"
            )

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"
