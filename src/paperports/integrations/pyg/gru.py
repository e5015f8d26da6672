r"""The GRU update of Li et al. (2016), equations (3)-(6), with the reset gate before :math:`U`."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from paperports._checks import check_bool, check_floating_tensor, check_int

__all__ = ["PaperGRUCell"]


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
        if not torch.jit.is_scripting():  # type: ignore[attr-defined]
            self._check(input, hx)
        size = self.hidden_size
        gi = nn.functional.linear(input, self.weight_ih, self.bias_ih)
        bias_hh = self.bias_hh
        gh = nn.functional.linear(
            hx, self.weight_hh[: 2 * size], None if bias_hh is None else bias_hh[: 2 * size]
        )
        r = torch.sigmoid(gi[:, :size] + gh[:, :size])
        z = torch.sigmoid(gi[:, size : 2 * size] + gh[:, size:])
        candidate = torch.tanh(
            gi[:, 2 * size :]
            + nn.functional.linear(
                r * hx,
                self.weight_hh[2 * size :],
                None if bias_hh is None else bias_hh[2 * size :],
            )
        )
        return hx + z * (candidate - hx)

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
