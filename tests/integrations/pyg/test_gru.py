"""PaperGRUCell: the fused forward and hand-written backward against plain autograd."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from paperports.integrations.pyg import PaperGRUCell


def _grads(cell: PaperGRUCell, a: Tensor, h: Tensor, plain: bool) -> list[Tensor]:
    a, h = a.clone().requires_grad_(), h.clone().requires_grad_()
    cell.zero_grad(set_to_none=True)
    out = cell._forward_ops(a, h) if plain else cell(a, h)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    grads = [a.grad, h.grad, *(p.grad for p in cell.parameters())]
    assert all(g is not None for g in grads)
    return [out.detach(), *grads]  # type: ignore[list-item]


@pytest.mark.parametrize("bias", [True, False])
def test_the_fused_cell_gives_autograds_values_and_gradients(bias: bool) -> None:
    torch.manual_seed(0)
    cell = PaperGRUCell(5, 7, bias=bias).double()
    a, h = torch.randn(9, 5, dtype=torch.double), torch.randn(9, 7, dtype=torch.double)
    for fused, plain in zip(_grads(cell, a, h, False), _grads(cell, a, h, True), strict=True):
        torch.testing.assert_close(fused, plain)
    params = list(cell.parameters())
    assert torch.autograd.gradcheck(
        lambda a, h, *w: cell(a, h),
        (a.requires_grad_(), h.requires_grad_(), *params),
    )


def test_each_bias_gets_a_gradient_of_its_own() -> None:
    """The two biases have one gradient in the paper's form; each must still own its
    tensor: a shared one would be scaled twice by in-place gradient operations
    (``clip_grad_norm_``), and DDP's buckets expect one gradient per parameter."""
    cell = PaperGRUCell(3, 4)
    cell(torch.randn(2, 3), torch.randn(2, 4)).sum().backward()
    assert cell.bias_ih.grad is not None and cell.bias_hh.grad is not None
    torch.testing.assert_close(cell.bias_ih.grad, cell.bias_hh.grad)
    assert cell.bias_ih.grad.data_ptr() != cell.bias_hh.grad.data_ptr()


def test_scripted_and_compiled_cells_are_the_plain_operations() -> None:
    torch.manual_seed(1)
    cell = PaperGRUCell(4, 6)
    a, h = torch.randn(3, 4), torch.randn(3, 6)
    expected = cell(a, h)
    torch.testing.assert_close(torch.jit.script(cell)(a, h), expected)
    compiled = torch.compile(cell, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(a, h), expected)


def test_second_derivatives_are_autograds() -> None:
    """A gradient penalty differentiates the backward: it must be the plain cell's."""
    torch.manual_seed(2)
    cell = PaperGRUCell(3, 4).double()
    a, h = torch.randn(2, 3, dtype=torch.double), torch.randn(2, 4, dtype=torch.double)
    penalties = []
    for plain in (False, True):
        x = a.clone().requires_grad_()
        out = cell._forward_ops(x, h) if plain else cell(x, h)
        (grad,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
        cell.zero_grad(set_to_none=True)
        grad.pow(2).sum().backward()
        penalties.append([p.grad for p in cell.parameters()])
    for fused, plain in zip(*penalties, strict=True):
        torch.testing.assert_close(fused, plain)
    assert torch.autograd.gradgradcheck(lambda x: cell(x, h), (a.clone().requires_grad_(),))
