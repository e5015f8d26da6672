r"""Batch normalisation with separate statistics per time step (Cooijmans et al. 2016)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["RecurrentBatchNorm"]


class RecurrentBatchNorm(nn.Module):
    r"""Batch normalisation for recurrent networks, from "Recurrent Batch Normalization"
    (Cooijmans, Ballas, Laurent, Gülçehre, Courville 2016, https://arxiv.org/abs/1603.09025).

    .. math::

        \mathrm{BN}(h; \gamma, \beta) = \beta + \gamma \odot
            \frac{h - \widehat{\mathbb{E}}[h]}{\sqrt{\widehat{\mathrm{Var}}[h] + \epsilon}}

    :math:`\gamma` and :math:`\beta` are shared across time; the statistics are not. In
    training, each time step is normalised with its own batch statistics, computed over the
    sequences still running at that step (``mask``), and updates its own running mean and
    variance. Steps ``t < t_max`` keep statistics; in evaluation, steps at or past ``t_max``
    use those of step ``t_max - 1``, so sequences longer than any seen in training work. (If
    training never reached ``t_max`` steps, the last step it reached takes that role:
    ``steps_tracked`` records it, so untrained statistics are never used.) In evaluation the
    normalisation is one fixed affine map per step.

    Args:
        num_features: :math:`F`, the size of the normalised vectors.
        t_max: The number of time steps that keep their own statistics (>= 1).
        gamma_init: The initial :math:`\gamma` (the paper: 0.1; 1.0 hampers gradient flow).
        bias: Learn :math:`\beta` (initialised to 0); without it :math:`\beta = 0`.
        momentum: The running statistics' update rate; ``None`` keeps a cumulative average
            over all batches instead (as ``nn.BatchNorm1d`` does), which
            :func:`update_bn` uses to recompute exact population statistics.
        eps: Added to the variance.

    Shapes:
        - input: ``(T, B, F)``, the steps ``start .. start + T - 1``;
          ``mask``: ``(T, B)``, true where a sequence is running.
        - output: ``(T, B, F)``.
    """

    def __init__(
        self,
        num_features: int,
        t_max: int,
        *,
        gamma_init: float = 0.1,
        bias: bool = True,
        momentum: float | None = 0.1,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {t_max}")
        if num_features < 1:
            raise ValueError(f"num_features must be >= 1, got {num_features}")
        self.num_features = num_features
        self.t_max = t_max
        self.gamma_init = gamma_init
        self.momentum = momentum
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(num_features))
        self.bias = nn.Parameter(torch.empty(num_features)) if bias else None
        self.register_buffer("running_mean", torch.zeros(t_max, num_features))
        self.register_buffer("running_var", torch.ones(t_max, num_features))
        self.register_buffer("steps_tracked", torch.zeros((), dtype=torch.long))
        self.register_buffer("batches_tracked", torch.zeros(t_max, dtype=torch.long))
        self.reset_parameters()

    running_mean: Tensor
    running_var: Tensor
    steps_tracked: Tensor
    batches_tracked: Tensor

    def reset_parameters(self) -> None:
        """:math:`\\gamma` = ``gamma_init``, :math:`\\beta` = 0, statistics reset."""
        nn.init.constant_(self.weight, self.gamma_init)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        self.reset_running_stats()

    def reset_running_stats(self) -> None:
        """Forget the running statistics (``gamma`` and ``beta`` stay)."""
        self.running_mean.zero_()
        self.running_var.fill_(1.0)
        self.steps_tracked.zero_()
        self.batches_tracked.zero_()

    def forward(self, x: Tensor, start: int = 0, mask: Tensor | None = None) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != self.num_features:
            raise ValueError(
                f"expected input of shape (T, B, {self.num_features}), got {tuple(x.shape)}"
            )
        if self.training:
            x_hat, mean, var, count = self._batch_normalise(x, mask)
            self.update_statistics(start, mean.squeeze(1), var.squeeze(1), count)
            return self._scale_shift(x_hat)
        scale, shift = self.affine(start, x.shape[0])
        return x * scale[:, None] + shift[:, None]

    def affine(self, start: int, steps: int) -> tuple[Tensor, Tensor]:
        """Evaluation's per-step maps: ``BN(x)`` at step ``start + t`` is
        ``x * scale[t] + shift[t]``; both ``(steps, F)``."""
        # the last step with statistics of its own: min(t_max, longest step trained) - 1
        last = max(1, min(self.t_max, int(self.steps_tracked))) - 1
        idx = torch.arange(start, start + steps, device=self.weight.device).clamp_(max=last)
        scale = self.weight * torch.rsqrt(self.running_var[idx] + self.eps)
        shift = -self.running_mean[idx] * scale
        if self.bias is not None:
            shift = shift + self.bias
        return scale, shift

    def _scale_shift(self, x_hat: Tensor) -> Tensor:
        r""":math:`\gamma \hat x + \beta`."""
        out = x_hat * self.weight
        return out + self.bias if self.bias is not None else out

    def _batch_normalise(
        self, x: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(x_hat, mean (T, 1, F), biased var (T, 1, F), count (T, 1))`` over the batch."""
        if mask is None:
            count = torch.full((x.shape[0], 1), float(x.shape[1]), device=x.device, dtype=x.dtype)
            mean = x.mean(dim=1, keepdim=True)
            var = (x - mean).pow(2).mean(dim=1, keepdim=True)
        else:
            w = mask.to(x.dtype).unsqueeze(-1)  # (T, B, 1)
            count = w.sum(dim=1)  # (T, 1)
            denom = count.clamp(min=1.0).unsqueeze(1)
            mean = (x * w).sum(dim=1, keepdim=True) / denom
            var = ((x - mean).pow(2) * w).sum(dim=1, keepdim=True) / denom
        return (x - mean) * torch.rsqrt(var + self.eps), mean, var, count

    @torch.no_grad()
    def update_statistics(self, start: int, mean: Tensor, var: Tensor, count: Tensor) -> None:
        """Update the running statistics of steps ``start ..`` from batch statistics
        ``mean, var`` ``(T, F)`` (biased) over ``count`` ``(T, 1)`` sequences. Only steps
        ``< t_max`` with at least two running sequences update their own statistics."""
        if self.momentum is not None and self.momentum <= 0:
            return
        n_keep = max(0, min(mean.shape[0], self.t_max - start))
        if n_keep == 0:
            return
        mean, var, count = mean[:n_keep], var[:n_keep], count[:n_keep]
        ok = count > 1  # (T, 1): one sequence gives no variance estimate
        unbiased = var * count / (count - 1).clamp(min=1.0)
        sl = slice(start, start + n_keep)
        self.batches_tracked[sl] += ok.flatten().long()
        if self.momentum is None:  # cumulative average: the n-th batch weighs 1 / n
            m = 1.0 / self.batches_tracked[sl].clamp(min=1).to(mean.dtype)[:, None]
        else:
            m = torch.full_like(mean[:, :1], self.momentum)
        rm, rv = self.running_mean[sl], self.running_var[sl]
        rm.copy_(torch.where(ok, (1 - m) * rm + m * mean.detach(), rm))
        rv.copy_(torch.where(ok, (1 - m) * rv + m * unbiased.detach(), rv))
        if bool(ok.any()):
            last_ok = int(torch.nonzero(ok.flatten()).max()) + 1
            self.steps_tracked.fill_(max(int(self.steps_tracked), start + last_ok))

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, t_max={self.t_max}, gamma_init={self.gamma_init}, "
            f"bias={self.bias is not None}, momentum={self.momentum}, eps={self.eps}"
        )
