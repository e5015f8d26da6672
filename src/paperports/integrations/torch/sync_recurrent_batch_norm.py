r"""Recurrent batch statistics synchronised across processes, as ``nn.SyncBatchNorm`` does
for ``nn.BatchNorm``."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from paperports.integrations.torch.recurrent_batch_norm import (
    RecurrentBatchNorm,
    in_process_group,
)

__all__ = ["SyncRecurrentBatchNorm"]


class SyncRecurrentBatchNorm(RecurrentBatchNorm):
    r""":class:`RecurrentBatchNorm` whose batch statistics cover the batch of every process
    in ``process_group``.

    Under ``DistributedDataParallel`` each process sees its part of the batch, so each would
    normalise step :math:`t` with the statistics of its own part. Here, in training, the
    per-step sums over the running sequences, their counts and the sums of squared
    deviations are all-reduced across the group (with autograd, so gradients flow through
    the shared statistics as in ``nn.SyncBatchNorm``). Normalisation, gradients and running
    statistics are then those of one process holding the whole batch, identical on every
    process. Evaluation, and training outside an initialised process group or in a group of
    one, are exactly :class:`RecurrentBatchNorm`.

    Every process must call it the same number of times with the same number of steps (a
    padded batch, as ``DistributedSampler`` and a collate function give), and each needs at
    least two sequences, as a local norm does. A :class:`BNLSTM` holding synchronised norms
    runs its per-step computation in training (its fast path computes local statistics).

    Build it by converting a model: :meth:`convert_sync_batchnorm`.

    Args:
        process_group: The processes to synchronise (``None``: the default group).
        **kwargs: Those of :class:`RecurrentBatchNorm`.
    """

    def __init__(
        self,
        num_features: int,
        t_max: int,
        *,
        process_group: dist.ProcessGroup | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(num_features, t_max, **kwargs)
        self.process_group = check_process_group(process_group, who=type(self).__name__)

    _synchronising_kind = True

    def _statistics_group(self) -> dist.ProcessGroup | None:
        return self.process_group

    def synchronises(self) -> bool:
        """Whether the statistics are all-reduced now: training, in an initialised process
        group of more than one process."""
        return self.training and in_process_group(self.process_group)

    def _batch_statistics(self, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """As :class:`RecurrentBatchNorm`'s, with the sums and counts over every process."""
        if not self.synchronises():
            return super()._batch_statistics(x, mask)
        group = self.process_group
        w = torch.ones_like(x[..., :1]) if mask is None else mask.to(x.dtype).unsqueeze(-1)
        count = _all_reduce(w.sum(dim=1), group)  # (T, 1), over every process
        denom = count.clamp(min=1.0).unsqueeze(1)
        mean = _all_reduce((x * w).sum(dim=1, keepdim=True), group) / denom
        var = _all_reduce(((x - mean).pow(2) * w).sum(dim=1, keepdim=True), group) / denom
        return mean, var, count

    @classmethod
    def convert_sync_batchnorm(
        cls, module: nn.Module, process_group: dist.ProcessGroup | None = None
    ) -> nn.Module:
        """``module`` with every :class:`RecurrentBatchNorm` inside it (in a
        :class:`BNLSTM`, a :class:`BNLSTMCell` or one of the transformers models) replaced
        by a :class:`SyncRecurrentBatchNorm` over the same parameters and statistics, as
        ``nn.SyncBatchNorm.convert_sync_batchnorm`` does for ``nn.BatchNorm``.

        Example::

            >>> model = SyncRecurrentBatchNorm.convert_sync_batchnorm(BNLSTM(8, 32))
            >>> ddp = nn.parallel.DistributedDataParallel(model)  # doctest: +SKIP
        """
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"convert_sync_batchnorm: module must be a torch.nn.Module, got "
                f"{type(module).__name__}"
            )
        check_process_group(process_group, who="convert_sync_batchnorm")
        if isinstance(module, RecurrentBatchNorm):
            if isinstance(module, cls):
                module.process_group = process_group
                return module
            converted = cls(
                module.num_features,
                module.t_max,
                gamma_init=module.gamma_init,
                bias=module.bias is not None,
                momentum=module.momentum,
                eps=module.eps,
                process_group=process_group,
                device=module.weight.device,
                dtype=module.weight.dtype,
            )
            converted.weight = module.weight  # the same parameters and statistics
            converted.bias = module.bias
            for name, buffer in module.named_buffers(recurse=False):
                setattr(converted, name, buffer)
            return converted.train(module.training)
        for name, child in module.named_children():
            module.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return module


def check_process_group(group: Any, *, who: str) -> dist.ProcessGroup | None:
    """``group`` if it is ``None`` or a ``torch.distributed.ProcessGroup``."""
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(
            f"{who}: process_group must be a torch.distributed.ProcessGroup or None (the "
            f"default group), got {type(group).__name__}"
        )
    return group


def _all_reduce(tensor: Tensor, group: dist.ProcessGroup | None) -> Tensor:
    """The sum over the group's processes, differentiable: its backward sums the gradients
    the same way (``torch.distributed.nn.functional.all_reduce``, now deprecated, did)."""
    return _AllReduceSum.apply(tensor, group)  # type: ignore[no-untyped-call,no-any-return]


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: dist.ProcessGroup | None) -> Tensor:
        ctx.group = group
        out = tensor.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        total = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(total, group=ctx.group)
        return total, None
