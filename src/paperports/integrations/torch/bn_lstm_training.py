r"""A BN-LSTM layer's training pass over a whole sequence, with a hand-written backward.

Autograd through :meth:`BNLSTMCell.step` records some forty operations per time step, and
its backward replays them one by one; at the sizes of ``paperports bench bnlstm`` that is
several times ``torch.nn.LSTM``. :class:`BNLSTMSequence` computes the same function (the
tests check values, gradients and statistics against the step-by-step cell) with per step:

* forward: one matmul :math:`W_h h_{t-1}`, three fused batch norms
  (``torch.native_batch_norm``), one sigmoid over all gates, two tanh, three products;
* backward: one matmul :math:`\partial a_t W_h`, three fused batch-norm backwards (which also
  give each step's :math:`\partial\gamma`, :math:`\partial\beta`), the gate derivatives;
  the weight gradient :math:`\partial W_h = \sum_t \partial a_t^\top h_{t-1}` is one matmul
  after the loop, as cuDNN does.

Variable lengths follow ``PackedSequence``: the batch is sorted by decreasing length, and at
step :math:`t` the first ``batch_sizes[t]`` rows are running. The batch statistics of a step
are over those rows; the others keep their state and output 0. A step where a single row
runs has no batch statistics: it is normalised with the running statistics it is given, as
in evaluation (and as :class:`~paperports.integrations.torch.RecurrentBatchNorm` does). With
``all_fixed``, every step is normalised with the statistics it is given (``BNLSTM``'s
``random_t_max`` training), and the batch statistics are still returned for the update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from paperports.integrations.torch.bn_lstm_kernels import ops, uses_kernels

__all__ = ["BNLSTMSequence", "g_gate_doubled", "matmul_by", "packed_weight"]

_aten = torch.ops.aten


def _has_onednn_linear() -> bool:
    try:
        torch.ops.mkldnn._linear_pointwise  # noqa: B018
        torch.ops.mkldnn._reorder_linear_weight  # noqa: B018
    except (AttributeError, RuntimeError):
        return False
    return bool(torch.backends.mkldnn.is_available())  # type: ignore[no-untyped-call]


def _has_native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 natively here (without it, its linear primitives fail
    with "could not create a primitive descriptor" where ``torch.mm`` works)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


_ONEDNN_LINEAR = _has_onednn_linear()
_ONEDNN_BF16 = _ONEDNN_LINEAR and _has_native_bf16()


def _use_onednn(t: Tensor) -> bool:
    return (
        _ONEDNN_LINEAR
        and bool(torch.backends.mkldnn.enabled)
        and t.device.type == "cpu"
        and (t.dtype == torch.float32 or (t.dtype == torch.bfloat16 and _ONEDNN_BF16))
    )


def matmul_by(weight: Tensor, batch: int) -> Callable[[Tensor], Tensor]:
    """``x -> x @ weight.T`` for the many small products of a recurrence, ``x`` ``(<= batch,
    in)``, without autograd.

    On CPU in float32, or bfloat16 where the CPU runs it natively, with oneDNN enabled, the
    weight is packed once into oneDNN's layout and each product runs its kernel, as
    ``torch.nn.LSTM``'s CPU path does:
    at ``(64, 256) @ (256, 1024)`` that is 2-3x faster than ``torch.mm`` on CPUs where MKL's
    sgemm is slow (AMD). Elsewhere, ``torch.mm``.
    """
    packed, onednn = packed_weight(weight, batch)
    if onednn:
        return lambda x: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
    return lambda x: torch.mm(x, packed)


def packed_weight(weight: Tensor, batch: int) -> tuple[Tensor, bool]:
    """What :func:`matmul_by` multiplies by, for the kernels' own loops: ``(packed, True)``
    for oneDNN's linear, else ``(weight.T, False)`` for ``torch.mm``."""
    if _use_onednn(weight):
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), batch)
        return packed, True
    return weight.detach().t(), False


def matmul_once(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for one large product (all steps' input products), through oneDNN where
    :func:`matmul_by` would be, without packing ``b``: for one product, packing costs more
    than it saves."""
    if _use_onednn(a):
        return cast(Tensor, torch.ops.mkldnn._linear_pointwise(a, b.t(), None, "none", [], ""))
    return torch.mm(a, b)


def _transposed_matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a.T @ b`` for tall ``a``, ``b`` (a weight gradient summed over steps and batch).
    oneDNN takes the long reduction best as ``(b.T @ a).T`` with ``b.T`` made contiguous."""
    if _use_onednn(a):
        bt = b.t().contiguous()
        return cast(Tensor, torch.ops.mkldnn._linear_pointwise(bt, a.t(), None, "none", [], "")).t()
    return torch.mm(a.t(), b)


def g_gate_doubled(hidden: int, like: Tensor) -> Tensor:
    """Per-column factors ``(4H,)`` for the gates ``(i, f, g, o)``: 2 on the g gate, 1 elsewhere.

    Scaling the gates' pre-activations by them lets one sigmoid serve all four, with
    :math:`\\tanh(z) = 2\\sigma(2z) - 1` for g: on CPU sigmoid is several times faster than tanh.
    """
    factors = like.new_ones(4 * hidden)
    factors[2 * hidden : 3 * hidden] = 2.0
    return factors


def _affine(x: Tensor, mean: Tensor, scale: Tensor, shift: Tensor | None, *, out: Tensor) -> Tensor:
    """``(x - mean) * scale + shift`` into ``out``: a normalisation with fixed statistics."""
    torch.mul(x - mean, scale, out=out)
    return out if shift is None else out.add_(shift)


def _observe(out: Tensor, x: Tensor) -> None:
    """The batch mean and biased variance of ``x`` ``(n, F)`` into ``out`` ``(2, F)``."""
    var, mean = torch.var_mean(x, dim=0, correction=0)
    out[0].copy_(mean)
    out[1].copy_(var)


def _affine_backward(
    d_out: Tensor,
    x: Tensor,
    gamma: Tensor,
    mean: Tensor,
    invstd: Tensor,
    d_x: Tensor,
    d_gamma: Tensor,
    d_beta: Tensor,
) -> None:
    """The backward of ``gamma * (x - mean) * invstd + beta`` with ``mean`` and ``invstd``
    fixed (not functions of ``x``), written into ``d_x``, ``d_gamma`` and ``d_beta``."""
    torch.mul(d_out, gamma * invstd, out=d_x)
    torch.sum(d_out * (x - mean) * invstd, dim=0, out=d_gamma)
    torch.sum(d_out, dim=0, out=d_beta)


class BNLSTMSequence(torch.autograd.Function):
    r"""Training-mode BN-LSTM over a sequence (Cooijmans et al. 2016, Eq. 6-8):

    .. math::

        (\tilde i_t, \tilde f_t, \tilde g_t, \tilde o_t)
            &= \mathrm{BN}(W_x x_t; \gamma_x, b) + \mathrm{BN}(W_h h_{t-1}; \gamma_h, 0) \\
        c_t &= \sigma(\tilde f_t) \odot c_{t-1} + \sigma(\tilde i_t) \odot \tanh(\tilde g_t),
        \qquad h_t = \sigma(\tilde o_t) \odot \tanh(\mathrm{BN}(c_t; \gamma_c, \beta_c))

    with each step's batch statistics (the bias :math:`b` is the input norm's shift).

    ``apply(x, weight_ih, h0, c0, weight_hh, gamma_x, bias, gamma_h, gamma_c, beta_c,
    batch_sizes, eps, fixed, all_fixed)`` with ``x`` ``(T, B, I)``, ``h0, c0`` ``(B, H)``,
    ``bias`` possibly ``None``, ``batch_sizes`` a list of ``T`` non-increasing ints
    (``None``: all ``B``), ``eps`` the three norms' epsilons ``(x, h, c)`` and ``fixed``
    ``(3, 2, T, 4H)`` the running mean and inverse standard deviation of each norm for the
    steps where one row runs, or for every step if ``all_fixed`` (``None`` when no step
    needs them). Returns ``(output (T, B, H), h_T, c_T,
    stats)``: ``stats`` ``(6, T, 4H)`` holds each step's batch mean and biased variance of
    the three norms, in the order ``x, h, c`` (the cell's in the first ``H`` columns), for
    the running statistics; it carries no gradient. Backward once only (no double backward).

    The forward computes :math:`\tanh(z)` as :math:`2\sigma(2z) - 1` (on CPU sigmoid is
    several times faster than tanh): the g gate's and the cell norm's scales and shifts are
    doubled, so one sigmoid covers all four gates.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        x: Tensor,
        weight_ih: Tensor,
        h0: Tensor,
        c0: Tensor,
        weight_hh: Tensor,
        gamma_x: Tensor,
        bias: Tensor | None,
        gamma_h: Tensor,
        gamma_c: Tensor,
        beta_c: Tensor,
        batch_sizes: list[int] | None,
        eps: tuple[float, float, float],
        fixed: Tensor | None = None,
        all_fixed: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        steps, batch, n_in = x.shape
        h4 = weight_ih.shape[0]
        hidden = h4 // 4
        x_flat = x.reshape(steps * batch, n_in)
        wx = matmul_once(x_flat, weight_ih.t()).view(steps, batch, h4)
        sizes = [batch] * steps if batch_sizes is None else batch_sizes
        ragged = sizes[0] < batch or sizes[-1] < batch

        def buffer(*shape: int) -> Tensor:  # rows past a sequence's end must read 0
            return wx.new_zeros(shape) if ragged else wx.new_empty(shape)

        hs = wx.new_empty(steps + 1, batch, hidden)  # h_0 .. h_T
        cs = wx.new_empty(steps + 1, batch, hidden)
        hs[0], cs[0] = h0, c0
        fused = uses_kernels(wx, weight_hh, gamma_x, gamma_h, gamma_c, beta_c)
        # W_h h_{t-1} per step: the kernels keep each product as it comes (no copy)
        a_steps: list[Tensor] = []
        a_all, act, gates = (
            wx.new_empty(0) if fused else buffer(steps, batch, h4),
            buffer(steps, batch, h4),
            wx.new_empty(batch, h4),
        )
        x_bn, a_hat, y = (
            wx.new_empty(batch, h4),
            wx.new_empty(batch, h4),
            wx.new_empty(batch, hidden),
        )
        th_all = buffer(steps, batch, hidden)
        mean = wx.new_zeros(3, steps, h4)  # x, h, c (c in the first H columns)
        invstd = wx.new_ones(3, steps, h4)
        # with all_fixed, the batch statistics that the update reads: mean, biased variance
        observed = wx.new_zeros(3, 2, steps, h4) if all_fixed else None
        double = g_gate_doubled(hidden, wx)
        gamma_x2, gamma_h2 = gamma_x * double, gamma_h * double
        bias2 = None if bias is None else bias * double
        gamma_c2, beta_c2 = 2 * gamma_c, 2 * beta_c
        minus_one = wx.new_tensor(-1.0)
        if fused:  # the loop in C++: per step the product and one kernel (bn_lstm_kernels)
            weight, onednn = packed_weight(weight_hh, batch)
            a_steps = ops().train_forward_sequence(
                wx, weight, onednn, gamma_x, bias, gamma_h, gamma_c, beta_c, fixed, all_fixed,
                sizes, *eps, hs, cs, act, th_all, mean, invstd, observed,
            )  # fmt: skip
        recurrent = matmul_by(weight_hh, batch)
        g_cols = slice(2 * hidden, 3 * hidden)
        bn = _aten.native_batch_norm.out
        for t, n in enumerate([] if fused else sizes):
            if n < batch:
                hs[t + 1], cs[t + 1] = hs[t], cs[t]  # finished rows keep their state
            if n == 0:
                continue
            m, inv = mean[:, t], invstd[:, t]
            given = n == 1 or all_fixed
            a = a_all[t, :n]
            if given:  # normalise with the given running statistics
                assert fixed is not None
                m.copy_(fixed[:, 0, t])
                inv.copy_(fixed[:, 1, t])
                _affine(wx[t, :n], m[0], inv[0] * gamma_x2, bias2, out=x_bn[:n])
                a.copy_(recurrent(hs[t, :n]))
                _affine(a, m[1], inv[1], None, out=a_hat[:n])
                if observed is not None and n > 1:
                    _observe(observed[0, :, t], wx[t, :n])
                    _observe(observed[1, :, t], a)
            else:
                bn(wx[t, :n], gamma_x2, bias2, None, None, True, 0.0, eps[0],
                   out=x_bn[:n], save_mean=m[0], save_invstd=inv[0])  # fmt: skip
                a.copy_(recurrent(hs[t, :n]))
                bn(a, None, None, None, None, True, 0.0, eps[1],
                   out=a_hat[:n], save_mean=m[1], save_invstd=inv[1])  # fmt: skip
            s = act[t, :n]
            torch.sigmoid(torch.addcmul(x_bn[:n], a_hat[:n], gamma_h2, out=gates[:n]), out=s)
            g = torch.add(minus_one, s[:, g_cols], alpha=2, out=s[:, g_cols])
            c = torch.mul(s[:, hidden : 2 * hidden], cs[t, :n], out=cs[t + 1, :n])
            c.addcmul_(s[:, :hidden], g)
            if given:
                _affine(c, m[2, :hidden], inv[2, :hidden] * gamma_c2, beta_c2, out=y[:n])
                if observed is not None and n > 1:
                    _observe(observed[2, :, t, :hidden], c)
            else:
                bn(c, gamma_c2, beta_c2, None, None, True, 0.0, eps[2],
                   out=y[:n], save_mean=m[2, :hidden], save_invstd=inv[2, :hidden])  # fmt: skip
            th = torch.add(minus_one, torch.sigmoid(y[:n]), alpha=2, out=th_all[t, :n])
            torch.mul(s[:, 3 * hidden :], th, out=hs[t + 1, :n])
        ctx.save_for_backward(  # bias may be None, which torch allows
            x, weight_ih, wx, weight_hh, gamma_x, bias, gamma_h, gamma_c, hs, cs, a_all, act,  # type: ignore[arg-type]
            th_all, mean, invstd,
        )  # fmt: skip
        ctx.sizes = sizes  # type: ignore[attr-defined]
        ctx.ragged = ragged  # type: ignore[attr-defined]
        ctx.eps = eps  # type: ignore[attr-defined]
        ctx.all_fixed = all_fixed  # type: ignore[attr-defined]
        ctx.fused = fused  # type: ignore[attr-defined]
        ctx.a_steps = a_steps  # type: ignore[attr-defined]  # intermediates, never seen outside
        if ragged:
            running = torch.tensor(sizes, device=wx.device)[:, None] > torch.arange(
                batch, device=wx.device
            )
            output = hs[1:] * running[..., None].to(hs.dtype)  # outputs past the end: 0
        else:
            output = hs[1:].clone()
        if observed is not None:
            stats = observed.reshape(6, steps, h4)
        else:
            stats = torch.cat([mean, invstd.pow(-2) - wx.new_tensor(eps)[:, None, None]])
            stats = stats[[0, 3, 1, 4, 2, 5]]
        ctx.mark_non_differentiable(stats)
        return output, hs[steps].clone(), cs[steps].clone(), stats

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: Any, d_out: Tensor, d_h_last: Tensor | None, d_c_last: Tensor | None, _: Tensor
    ) -> tuple[Tensor | None, ...]:
        (x, weight_ih, wx, weight_hh, gamma_x, bias, gamma_h, gamma_c, hs, cs, a_all, act,
         th_all, mean, invstd) = ctx.saved_tensors  # fmt: skip
        sizes: list[int] = ctx.sizes
        eps: tuple[float, float, float] = ctx.eps
        all_fixed: bool = ctx.all_fixed
        steps, batch, h4 = wx.shape
        hidden = h4 // 4
        ragged: bool = ctx.ragged
        d_wx = wx.new_zeros(wx.shape) if ragged else torch.empty_like(wx)
        d_a = wx.new_zeros(wx.shape) if ragged else torch.empty_like(wx)
        d_gamma = wx.new_zeros(3, steps, h4)  # x, h, c
        d_beta = wx.new_zeros(3, steps, h4)
        d_gates, dy, dc_bn = (
            wx.new_empty(batch, h4),
            wx.new_empty(batch, hidden),
            wx.new_empty(batch, hidden),
        )
        as_rows = torch.contiguous_format  # the kernels read rows; an expanded grad has none
        dh = (
            hs.new_zeros(batch, hidden)
            if d_h_last is None
            else d_h_last.clone(memory_format=as_rows)
        )
        dc = (
            cs.new_zeros(batch, hidden)
            if d_c_last is None
            else d_c_last.clone(memory_format=as_rows)
        )
        if ctx.fused:
            return _fused_backward(ctx, d_out, dh, dc, sizes, all_fixed)
        back = matmul_by(weight_hh.t(), batch)  # dh_{t-1} = da_t W_h
        i_cols, f_cols = slice(0, hidden), slice(hidden, 2 * hidden)
        g_cols, o_cols = slice(2 * hidden, 3 * hidden), slice(3 * hidden, h4)
        bn_back = _aten.native_batch_norm_backward.out
        sigmoid_back, tanh_back = _aten.sigmoid_backward.grad_input, _aten.tanh_backward.grad_input
        everything = [True, True, True]
        for t in range(steps - 1, -1, -1):
            n = sizes[t]
            if n == 0:
                continue
            dh_t = dh[:n] + d_out[t, :n]
            s, th, ds = act[t, :n], th_all[t, :n], d_gates[:n]
            sigmoid_back(dh_t * th, s[:, o_cols], grad_input=ds[:, o_cols])
            tanh_back(dh_t * s[:, o_cols], th, grad_input=dy[:n])
            given = n == 1 or all_fixed
            if given:  # normalised with fixed statistics: an affine map's backward
                _affine_backward(dy[:n], cs[t + 1, :n], gamma_c, mean[2, t, :hidden],
                                 invstd[2, t, :hidden], dc_bn[:n], d_gamma[2, t, :hidden],
                                 d_beta[2, t, :hidden])  # fmt: skip
            else:
                bn_back(dy[:n], cs[t + 1, :n], gamma_c, None, None, mean[2, t, :hidden],
                        invstd[2, t, :hidden], True, eps[2], everything, out0=dc_bn[:n],
                        out1=d_gamma[2, t, :hidden], out2=d_beta[2, t, :hidden])  # fmt: skip
            dc_t = dc_bn[:n].add_(dc[:n])
            sigmoid_back(dc_t * s[:, g_cols], s[:, i_cols], grad_input=ds[:, i_cols])
            sigmoid_back(dc_t * cs[t, :n], s[:, f_cols], grad_input=ds[:, f_cols])
            tanh_back(dc_t * s[:, i_cols], s[:, g_cols], grad_input=ds[:, g_cols])
            if given:
                _affine_backward(ds, a_all[t, :n], gamma_h, mean[1, t], invstd[1, t],
                                 d_a[t, :n], d_gamma[1, t], d_beta[1, t])  # fmt: skip
                _affine_backward(ds, wx[t, :n], gamma_x, mean[0, t], invstd[0, t],
                                 d_wx[t, :n], d_gamma[0, t], d_beta[0, t])  # fmt: skip
            else:
                bn_back(ds, a_all[t, :n], gamma_h, None, None, mean[1, t], invstd[1, t], True,
                        eps[1], everything, out0=d_a[t, :n], out1=d_gamma[1, t],
                        out2=d_beta[1, t])  # fmt: skip
                bn_back(ds, wx[t, :n], gamma_x, None, None, mean[0, t], invstd[0, t], True,
                        eps[0], everything, out0=d_wx[t, :n], out1=d_gamma[0, t],
                        out2=d_beta[0, t])  # fmt: skip
            if n < batch:  # finished rows pass their gradient on unchanged
                dh[:n] = back(d_a[t, :n])
                torch.mul(dc_t, s[:, f_cols], out=dc[:n])
            else:
                dh, dc = back(d_a[t]), dc_t * s[:, f_cols]
        d_wx_flat = d_wx.view(-1, h4)
        d_x = matmul_once(d_wx_flat, weight_ih).view(x.shape)
        d_weight_ih = _transposed_matmul(d_wx_flat, x.reshape(-1, x.shape[-1]))
        d_weight_hh = _transposed_matmul(d_a.view(-1, h4), hs[:-1].reshape(-1, hidden))
        d_gamma_sum, d_beta_sum = d_gamma.sum(1), d_beta.sum(1)
        return (
            d_x,
            d_weight_ih,
            dh,
            dc,
            d_weight_hh,
            d_gamma_sum[0],
            None if bias is None else d_beta_sum[0],
            d_gamma_sum[1],
            d_gamma_sum[2, :hidden],
            d_beta_sum[2, :hidden],
            None,
            None,
            None,
            None,
        )


def _fused_backward(
    ctx: Any,
    d_out: Tensor,
    dh: Tensor,
    dc: Tensor,
    sizes: list[int],
    all_fixed: bool,
) -> tuple[Tensor | None, ...]:
    r""":class:`BNLSTMSequence`'s backward with the fused kernels: the loop over steps in
    C++, per step one kernel (everything from the step's output gradient down to those of
    its two products) and one product :math:`\partial a_t W_h`."""
    (x, weight_ih, wx, weight_hh, gamma_x, bias, gamma_h, gamma_c, hs, cs, _a_all, act,
     th_all, mean, invstd) = ctx.saved_tensors  # fmt: skip
    batch, h4 = wx.shape[1], wx.shape[2]
    hidden = h4 // 4
    d_out = d_out.contiguous()  # e.g. expanded from a sum's backward
    d_wx = wx.new_zeros(wx.shape) if ctx.ragged else torch.empty_like(wx)
    d_a = wx.new_zeros(wx.shape) if ctx.ragged else torch.empty_like(wx)
    d_gamma, d_beta = wx.new_zeros(3, h4), wx.new_zeros(3, h4)  # x, h, c: summed over steps
    back_weight, onednn = packed_weight(weight_hh.t(), batch)  # dh_{t-1} = da_t W_h
    ops().train_backward_sequence(
        d_out, act, th_all, cs, wx, ctx.a_steps, back_weight, onednn, gamma_x, gamma_h,
        gamma_c, mean, invstd, sizes, all_fixed, bias is not None, dh, dc, d_a, d_wx, d_gamma,
        d_beta,
    )  # fmt: skip
    d_wx_flat = d_wx.view(-1, h4)
    return (
        matmul_once(d_wx_flat, weight_ih).view(x.shape),
        _transposed_matmul(d_wx_flat, x.reshape(-1, x.shape[-1])),
        dh,
        dc,
        _transposed_matmul(d_a.view(-1, h4), hs[:-1].reshape(-1, hidden)),
        d_gamma[0],
        None if bias is None else d_beta[0],
        d_gamma[1],
        d_gamma[2, :hidden],
        d_beta[2, :hidden],
        None,
        None,
        None,
        None,
    )
