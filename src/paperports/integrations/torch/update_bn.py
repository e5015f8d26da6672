"""Recompute the population statistics of recurrent batch norms after training."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from paperports.integrations.torch.recurrent_batch_norm import RecurrentBatchNorm

__all__ = ["update_bn"]


@torch.no_grad()
def update_bn(
    loader: Iterable[Any],
    model: nn.Module,
    forward: Callable[[nn.Module, Any], Any] | None = None,
) -> None:
    """Reset and recompute the running statistics of every :class:`RecurrentBatchNorm` in
    ``model`` as a cumulative average over ``loader``, the way
    ``torch.optim.swa_utils.update_bn`` does for ``nn.BatchNorm``.

    Running averages with a momentum trail weights that are still changing, and in a
    recurrent network an error at early steps compounds through time. Recomputing the
    statistics once after training makes evaluation match training's normalisation.
    Parameters are not changed; the model is left in the mode it was in.

    Args:
        loader: Batches: tensors, ``(input, ...)`` tuples or lists (the first element is
            the input), or dicts of keyword arguments.
        model: Any module holding recurrent batch norms.
        forward: ``forward(model, batch)``, for batches of another form.
    """
    norms = [m for m in model.modules() if isinstance(m, RecurrentBatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    was_training = model.training
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    try:
        for batch in loader:
            if forward is not None:
                forward(model, batch)
            elif isinstance(batch, (tuple, list)):
                model(batch[0])
            elif isinstance(batch, dict):
                model(**batch)
            else:
                model(batch)
    finally:
        for m, momentum in zip(norms, momenta, strict=True):
            m.momentum = momentum
        model.train(was_training)
