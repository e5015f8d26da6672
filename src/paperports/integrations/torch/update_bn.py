"""Recompute the population statistics of recurrent batch norms after training."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from paperports.integrations.torch.recurrent_batch_norm import (
    RecurrentBatchNorm,
    in_process_group,
)
from paperports.integrations.torch.sync_recurrent_batch_norm import (
    SyncRecurrentBatchNorm,
    check_process_group,
)

__all__ = ["update_bn"]


@torch.no_grad()
def update_bn(
    loader: Iterable[Any],
    model: nn.Module,
    forward: Callable[[nn.Module, Any], Any] | None = None,
    process_group: dist.ProcessGroup | None = None,
) -> None:
    """Reset and recompute the running statistics of every :class:`RecurrentBatchNorm` in
    ``model`` as a cumulative average over ``loader``, the way
    ``torch.optim.swa_utils.update_bn`` does for ``nn.BatchNorm``.

    Running averages with a momentum trail weights that are still changing, and in a
    recurrent network an error at early steps compounds through time. Recomputing the
    statistics once after training makes evaluation match training's normalisation.
    Parameters are not changed; the model is left in the mode it was in. ``BNLSTM``'s
    ``random_t_max`` draws no step meanwhile: the statistics are those of the network that
    evaluation runs, every step normalised with its own.

    The trained statistics are never lost: if the loader is empty, if a batch raises, or if
    no step of any batch had the two sequences a batch statistic needs, the statistics are
    restored as they were and an error says why. Batches with NaN or infinite values do not
    count (each norm warns and skips them), so ``update_bn`` over clean data also repairs
    statistics that a bad training batch left behind.

    Args:
        loader: Batches: tensors, ``(input, ...)`` tuples or lists (the first element is
            the input), or dicts of keyword arguments. Each batch needs at least two
            sequences (the statistics of one sequence are not statistics).
        model: Any module holding recurrent batch norms.
        forward: ``forward(model, batch)``, for batches of another form.
        process_group: Under ``torch.distributed`` (an initialised process group of more
            than one process), every process calls ``update_bn`` on its own part of the
            data, and the statistics of the local norms are then averaged over all batches
            of all processes (the cumulative average one process would compute over the
            union); :class:`SyncRecurrentBatchNorm` shares each batch's statistics anyway.
            ``None``: the default group.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``, ``loader`` is not iterable, or
            ``process_group`` is not a process group.
        ValueError: the loader gave no batch, or no batch with two or more sequences.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"update_bn: model must be a torch.nn.Module, got {type(model).__name__}")
    check_process_group(process_group, who="update_bn")
    if forward is not None and not callable(forward):
        raise TypeError(f"update_bn: forward must be callable, got {type(forward).__name__}")
    try:
        batches = iter(loader)
    except TypeError:
        raise TypeError(
            f"update_bn: loader must be an iterable of batches, got {type(loader).__name__}"
        ) from None
    norms = [m for m in model.modules() if isinstance(m, RecurrentBatchNorm)]
    if not norms:
        return
    saved = [_snapshot(m) for m in norms]
    was_training = model.training
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m._recomputing = True
    model.train()
    seen = 0
    try:
        for batch in batches:
            seen += 1
            if forward is not None:
                forward(model, batch)
            elif isinstance(batch, (tuple, list)):
                model(batch[0])
            elif isinstance(batch, dict):
                model(**batch)
            else:
                model(batch)
    except BaseException as err:
        _restore_all(norms, saved)
        if hasattr(err, "add_note"):  # Python >= 3.11
            err.add_note(f"update_bn: at batch {seen}; the trained statistics were restored")
        raise
    else:
        if in_process_group(process_group):
            seen = _all_reduce_statistics(norms, seen, process_group)
        problem = None
        if seen == 0:
            problem = "the loader gave no batch; it needs at least one batch of two or more "
            problem += "sequences"
        elif not any(int(m.steps_tracked) > 0 for m in norms):
            problem = f"none of the {seen} batch(es) gave a statistic: each step needs at "
            problem += "least two sequences running, with finite values"
        if problem is not None:
            _restore_all(norms, saved)
            raise ValueError(f"update_bn: {problem} (the trained statistics are kept)")
    finally:
        for m, state in zip(norms, saved, strict=True):
            m.momentum = state["momentum"]
            m._recomputing = state["recomputing"]
        model.train(was_training)


def _snapshot(norm: RecurrentBatchNorm) -> dict[str, Any]:
    """The norm's statistics and momentum, copied."""
    buffers: dict[str, Tensor] = {
        name: buffer.clone() for name, buffer in norm.named_buffers(recurse=False)
    }
    return {"buffers": buffers, "momentum": norm.momentum, "recomputing": norm._recomputing}


def _restore_all(norms: list[RecurrentBatchNorm], saved: list[dict[str, Any]]) -> None:
    for norm, state in zip(norms, saved, strict=True):
        for name, buffer in norm.named_buffers(recurse=False):
            buffer.copy_(state["buffers"][name])


def _all_reduce_statistics(
    norms: list[RecurrentBatchNorm], seen: int, group: dist.ProcessGroup | None
) -> int:
    """Average each local norm's cumulative statistics over the batches of every process,
    per step (weighted by each process's count of batches); returns the batches seen by
    all processes together. Synchronised norms already agree."""
    total_seen = torch.tensor([seen], dtype=torch.long)
    dist.all_reduce(total_seen, group=group)
    for norm in norms:
        if isinstance(norm, SyncRecurrentBatchNorm):
            continue
        # one size for the sum: a process that updated holds t_max steps (in a group the
        # first update allocates them all), one that saw no batch may still hold fewer
        steps = torch.tensor([norm.allocated_steps], dtype=torch.long)
        dist.all_reduce(steps, op=dist.ReduceOp.MAX, group=group)
        norm.reserve_steps(int(steps))
        weight = norm.batches_tracked.to(norm.running_mean.dtype)[:, None]  # (steps, 1)
        sums = torch.cat([weight * norm.running_mean, weight * norm.running_var, weight], dim=1)
        dist.all_reduce(sums, group=group)
        batches = sums[:, -1:]
        averages = torch.split(sums[:, :-1] / batches.clamp(min=1), norm.num_features, dim=1)
        for running, average in zip((norm.running_mean, norm.running_var), averages, strict=True):
            running.copy_(torch.where(batches > 0, average, running))
        norm.batches_tracked.copy_(batches.flatten().round().long())
        dist.all_reduce(norm.steps_tracked, op=dist.ReduceOp.MAX, group=group)
    return int(total_seen)
