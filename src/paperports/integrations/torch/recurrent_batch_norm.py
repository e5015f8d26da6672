r"""Batch normalisation with separate statistics per time step (Cooijmans et al. 2016)."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from paperports._checks import (
    check_batch_for_statistics,
    check_float,
    check_floating_tensor,
    check_index_tensor,
    check_int,
    check_mask,
    values_known,
)

__all__ = ["RecurrentBatchNorm", "in_process_group"]


def in_process_group(group: dist.ProcessGroup | None = None) -> bool:
    """Whether this process is in an initialised process group (``None``: the default one)
    of more than one process: a group of one is no group."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


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

    A batch statistic needs at least two values: training on a batch of one sequence raises,
    as ``nn.BatchNorm`` does ("Expected more than 1 value per channel when training"). With
    a ``mask``, a step where fewer than two sequences still run (the tail of a batch whose
    longest sequence is unique) is normalised with that step's running statistics instead,
    as in evaluation, and leaves them unchanged.

    The statistics grow with training: a new module holds those of step 0 (mean 0,
    variance 1) and training at steps past the ones held adds theirs, up to ``t_max``, so a
    module trained on sequences of 100 steps saves 100 steps' statistics whatever its
    ``t_max`` (``allocated_steps``; :meth:`reserve_steps` makes room ahead of time).
    ``load_state_dict`` takes statistics of any length up to ``t_max`` and resizes to it.
    Growing replaces a buffer's storage in place, so what holds the buffer (a
    ``DistributedDataParallel`` wrapper, a scripted twin) sees the new one. In a process
    group of more than one process, the first update allocates all ``t_max`` steps, so that
    every process holds buffers of one size (``DistributedDataParallel`` copies process 0's
    buffers into the others', which buffers of different sizes would misalign).

    ``torch.optim.swa_utils.update_bn`` recomputes these statistics too (it looks for
    ``nn.BatchNorm`` layers; each recurrent batch norm holds a stateless handle that it
    finds); :func:`update_bn` does the same and also keeps the trained statistics if it
    fails.

    NaN or infinite inputs propagate to the output, as in ``nn.BatchNorm``; unlike there, a
    step whose batch statistics are not finite does not update its running statistics, and
    a ``RuntimeWarning`` names the steps. So a bad batch shows in the loss without erasing
    the statistics training has gathered; :func:`update_bn` recomputes them from clean data.

    Args:
        num_features: :math:`F`, the size of the normalised vectors.
        t_max: The number of time steps that keep their own statistics (>= 1).
        gamma_init: The initial :math:`\gamma` (the paper: 0.1; 1.0 hampers gradient flow).
        bias: Learn :math:`\beta` (initialised to 0); without it :math:`\beta = 0`.
        momentum: The running statistics' update rate in ``[0, 1]``; ``None`` keeps a
            cumulative average over all batches instead (as ``nn.BatchNorm1d`` does), which
            :func:`update_bn` uses to recompute exact population statistics.
        eps: Added to the variance (> 0).
        device: Where to create the parameters and statistics.
        dtype: Their floating-point type.

    In training, ``stale_from`` (a step >= 1, or a 0-d integer tensor holding one, which
    graph capture keeps an operation of the graph) normalises the steps from it on with the
    running statistics of step ``stale_from - 1`` as they are when called, as evaluation
    past a ``t_max`` of ``stale_from`` would; their batch statistics still update their
    own (``BNLSTM``'s ``random_t_max`` draws it).

    Shapes:
        - input: ``(T, B, F)``, the steps ``start .. start + T - 1`` (``start >= 0``);
          ``mask``: ``(T, B)`` booleans, true where a sequence is running.
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
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        num_features = check_int("num_features", num_features, minimum=1, who=who)
        t_max = check_int("t_max", t_max, minimum=1, who=who)
        gamma_init = check_float("gamma_init", gamma_init, who=who)
        if momentum is not None:
            momentum = check_float("momentum", momentum, minimum=0.0, maximum=1.0, who=who)
        eps = check_float("eps", eps, minimum=0.0, open_low=True, who=who)
        self.num_features = num_features
        self.t_max = t_max
        self.gamma_init = gamma_init
        self.momentum = momentum
        self.eps = eps
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(num_features, **factory))
        self.bias = nn.Parameter(torch.empty(num_features, **factory)) if bias else None
        # statistics for step 0 only: they grow with the steps trained (reserve_steps)
        self.register_buffer("running_mean", torch.zeros(1, num_features, **factory))
        self.register_buffer("running_var", torch.ones(1, num_features, **factory))
        self.register_buffer("steps_tracked", torch.zeros((), dtype=torch.long, device=device))
        self.register_buffer("batches_tracked", torch.zeros(1, dtype=torch.long, device=device))
        # True while update_bn (ours, or torch's through the handle) recomputes the statistics:
        # BNLSTM draws no random_t_max step then, so they are those of evaluation's network
        self._recomputing = False
        self._swa_update_bn = _SwaUpdateBnHandle(self)
        self._agreed = False  # see agree_across_processes
        self.reset_parameters()

    running_mean: Tensor
    running_var: Tensor
    steps_tracked: Tensor
    batches_tracked: Tensor
    _recomputing: bool = False  # also for modules pickled before it existed

    def reset_parameters(self) -> None:
        """:math:`\\gamma` = ``gamma_init``, :math:`\\beta` = 0, statistics reset."""
        nn.init.constant_(self.weight, self.gamma_init)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        self.reset_running_stats()

    def reset_running_stats(self) -> None:
        """Forget the running statistics (``gamma`` and ``beta`` stay; so does the number of
        steps allocated)."""
        self.running_mean.zero_()
        self.running_var.fill_(1.0)
        self.steps_tracked.zero_()
        self.batches_tracked.zero_()

    @property
    def allocated_steps(self) -> int:
        """The steps whose statistics the buffers hold now (``1 .. t_max``)."""
        return int(self.running_mean.shape[0])

    def reserve_steps(self, steps: int) -> None:
        """Make room for the statistics of steps ``0 .. steps - 1`` (at most ``t_max``): the
        new steps start untracked, at mean 0 and variance 1. Never shrinks. Training calls
        it; call it yourself to fix the buffers' size ahead of graph capture, for example."""
        steps = check_int("steps", steps, minimum=0, who=type(self).__name__)
        steps = min(steps, self.t_max)
        if steps > self.allocated_steps:
            self._resize_statistics(steps)

    @torch.no_grad()
    def _resize_statistics(self, steps: int) -> None:
        """Statistics buffers for exactly ``steps`` steps: the first ones kept, new ones
        untracked. In place (``Tensor.set_``), so holders of the buffers see the change;
        under ``torch.compile``, which cannot trace that, the buffers are replaced."""
        keep = min(steps, self.allocated_steps)
        extra = steps - keep
        resized = {
            "running_mean": torch.cat(
                [self.running_mean[:keep], self.running_mean.new_zeros(extra, self.num_features)]
            ),
            "running_var": torch.cat(
                [self.running_var[:keep], self.running_var.new_ones(extra, self.num_features)]
            ),
            "batches_tracked": torch.cat(
                [self.batches_tracked[:keep], self.batches_tracked.new_zeros(extra)]
            ),
        }
        for name, value in resized.items():
            if torch.compiler.is_compiling():
                setattr(self, name, value)  # dynamo records it (and recompiles for the shape)
            else:
                getattr(self, name).set_(value)

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """As ``nn.Module``'s, after resizing the statistics to those being loaded (any
        number of steps from 1 to ``t_max``); more than ``t_max`` is an error naming it."""
        mean = state_dict.get(prefix + "running_mean")
        if isinstance(mean, Tensor) and mean.dim() == 2 and mean.shape[1] == self.num_features:
            steps = int(mean.shape[0])
            if steps > self.t_max:
                error_msgs.append(
                    f"{prefix}running_mean holds the statistics of {steps} steps, more than "
                    f"this module's t_max={self.t_max}: build it with t_max >= {steps}"
                )
                return
            if steps >= 1 and steps != self.allocated_steps:
                self._resize_statistics(steps)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def synchronises(self) -> bool:
        """Whether batch statistics are shared across processes now (see
        :class:`SyncRecurrentBatchNorm`); never for this class."""
        return False

    _synchronising_kind = False  # SyncRecurrentBatchNorm's is True

    def _statistics_group(self) -> dist.ProcessGroup | None:
        """The process group whose processes must agree on synchronising (the default)."""
        return None

    def agree_across_processes(self) -> None:
        """Refuse, on the first training call inside a process group of more than one
        process, a model whose processes mix this local norm with
        :class:`SyncRecurrentBatchNorm`: one collective call, once per norm.

        A synchronised norm all-reduces its statistics at every step and a local one makes
        no collective call, so a mix would leave the synchronised processes waiting for the
        group's timeout. Both kinds call this before their first statistics (the
        :class:`BNLSTM` fast path included), so every process raises at once, naming the
        mix. Every process must then train the norm, as they do under
        ``DistributedDataParallel``."""
        if getattr(self, "_agreed", False) or not self.training or torch.compiler.is_compiling():
            return
        group = self._statistics_group()
        if not in_process_group(group):
            return
        count = torch.tensor([float(self._synchronising_kind)], device=self.weight.device)
        dist.all_reduce(count, group=group)
        processes = dist.get_world_size(group)
        if 0 < int(count.item()) < processes:
            raise RuntimeError(
                f"{type(self).__name__}: the processes mix synchronised and local recurrent "
                f"batch norms: {int(count.item())} of {processes} processes hold "
                "SyncRecurrentBatchNorm here, the others RecurrentBatchNorm. Convert every "
                "process's model with SyncRecurrentBatchNorm.convert_sync_batchnorm, or none."
            )
        self._agreed = True

    def forward(
        self,
        x: Tensor,
        start: int = 0,
        mask: Tensor | None = None,
        stale_from: int | Tensor | None = None,
    ) -> Tensor:
        who = type(self).__name__
        check_floating_tensor("input", x, dtype=self.weight.dtype, who=who, module="module")
        if x.dim() != 3 or x.shape[-1] != self.num_features:
            raise ValueError(
                f"{who}: expected input of shape (T, B, {self.num_features}), got {tuple(x.shape)}"
            )
        start = check_int("start", start, minimum=0, who=who)
        if mask is not None:
            check_mask("mask", mask, (x.shape[0], x.shape[1]), who=who)
        if isinstance(stale_from, Tensor):
            if stale_from.dim() != 0:
                raise ValueError(
                    f"{who}: stale_from must be a step (an int >= 1) or a 0-d integer tensor, "
                    f"got a tensor of shape {tuple(stale_from.shape)}"
                )
            check_index_tensor("stale_from", stale_from, low=1, high=None, what="a step", who=who)
        elif stale_from is not None:
            stale_from = check_int("stale_from", stale_from, minimum=1, who=who)
        if x.numel() == 0:  # no step or no sequence: nothing to normalise or to track
            return x * self.weight
        if self.training:
            self.agree_across_processes()
            if mask is None:
                check_batch_for_statistics(x.shape[1], tuple(x.shape), who=who)
            x_hat, mean, var, count = self._batch_normalise(x, mask, start, stale_from)
            self.update_statistics(start, mean.squeeze(1), var.squeeze(1), count)
            return self._scale_shift(x_hat)
        scale, shift = self.affine(start, x.shape[0])
        return x * scale[:, None] + shift[:, None]

    def last_tracked_step(self) -> Tensor:
        """The last step whose statistics evaluation may use, as a 0-d tensor:
        ``min(allocated_steps, steps_tracked) - 1`` (step 0 before any training). A tensor, so that
        graph capture (``torch.compile``, ``torch.export``, ``torch.jit.trace``) keeps it a
        value of the model's state rather than a constant of the trace."""
        return self.steps_tracked.clamp(min=1, max=self.allocated_steps) - 1

    def running_statistics(
        self, start: int, steps: int, upto: int | Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The running mean and variance that steps ``start .. start + steps - 1`` use in
        evaluation, each ``(steps, F)``: their own, or the last tracked step's past it
        (past step ``upto`` too, where given: evaluation as if ``t_max`` were ``upto + 1``)."""
        idx = torch.arange(start, start + steps, device=self.running_mean.device)
        idx = torch.minimum(idx, self.last_tracked_step())
        if upto is not None:
            idx = idx.clamp(max=upto)
        return self.running_mean[idx], self.running_var[idx]

    def affine(self, start: int, steps: int) -> tuple[Tensor, Tensor]:
        """Evaluation's per-step maps: ``BN(x)`` at step ``start + t`` is
        ``x * scale[t] + shift[t]``; both ``(steps, F)``."""
        start = check_int("start", start, minimum=0, who=type(self).__name__)
        steps = check_int("steps", steps, minimum=0, who=type(self).__name__)
        mean, var = self.running_statistics(start, steps)
        scale = self.weight * torch.rsqrt(var + self.eps)
        shift = -mean * scale
        if self.bias is not None:
            shift = shift + self.bias
        return scale, shift

    def _scale_shift(self, x_hat: Tensor) -> Tensor:
        r""":math:`\gamma \hat x + \beta`."""
        out = x_hat * self.weight
        return out + self.bias if self.bias is not None else out

    def _batch_normalise(
        self, x: Tensor, mask: Tensor | None, start: int, stale_from: int | Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(x_hat, mean (T, 1, F), biased var (T, 1, F), count (T, 1))`` over the batch.

        Steps with fewer than two running sequences are normalised with their running
        statistics (``count`` says which: the update skips them); so are steps at or past
        ``stale_from``, with those of step ``stale_from - 1``, as evaluation past a
        ``t_max`` of ``stale_from`` would (their batch statistics still update theirs)."""
        mean, var, count = self._batch_statistics(x, mask)
        few = (count < 2).unsqueeze(1)  # (T, 1, 1): a statistic of one value is no statistic
        # a drawn step as a tensor (graph capture) may be any: every step is checked
        stale = stale_from is not None and (
            isinstance(stale_from, Tensor) or stale_from < start + x.shape[0]
        )
        # without a mask every step has the whole batch, of two or more (forward checks it)
        if not stale and (mask is None or (values_known(count) and not bool(few.any()))):
            return (x - mean) * torch.rsqrt(var + self.eps), mean, var, count
        upto = None if stale_from is None else stale_from - 1
        running_mean, running_var = self.running_statistics(start, x.shape[0], upto)
        if stale:
            assert stale_from is not None
            step = torch.arange(start, start + x.shape[0], device=few.device)
            few = few | (step >= stale_from)[:, None, None]
        use_mean = torch.where(few, running_mean[:, None].to(x.dtype), mean)
        use_var = torch.where(few, running_var[:, None].to(x.dtype), var)
        return (x - use_mean) * torch.rsqrt(use_var + self.eps), mean, var, count

    def _batch_statistics(self, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """``(mean (T, 1, F), biased var (T, 1, F), count (T, 1))`` of each step over the
        running sequences (all without ``mask``)."""
        if mask is None:
            count = torch.full((x.shape[0], 1), float(x.shape[1]), device=x.device, dtype=x.dtype)
            mean = x.mean(dim=1, keepdim=True)
            return mean, (x - mean).pow(2).mean(dim=1, keepdim=True), count
        w = mask.to(x.dtype).unsqueeze(-1)  # (T, B, 1)
        count = w.sum(dim=1)  # (T, 1)
        denom = count.clamp(min=1.0).unsqueeze(1)
        mean = (x * w).sum(dim=1, keepdim=True) / denom
        return mean, ((x - mean).pow(2) * w).sum(dim=1, keepdim=True) / denom, count

    @torch.no_grad()
    def update_statistics(self, start: int, mean: Tensor, var: Tensor, count: Tensor) -> None:
        """Update the running statistics of steps ``start ..`` from batch statistics
        ``mean, var`` ``(T, F)`` (biased) over ``count`` ``(T, 1)`` sequences. Only steps
        ``< t_max`` with at least two running sequences and finite statistics update their
        own statistics.

        Tensor operations only, never a value read back into Python: the same update runs
        eagerly, on the meta device and inside a captured graph."""
        if self.momentum is not None and self.momentum <= 0:
            return  # nothing to update
        n_keep = max(0, min(mean.shape[0], self.t_max - start))
        if n_keep == 0:
            return
        mean, var, count = mean[:n_keep], var[:n_keep], count[:n_keep]
        # On several processes, every process holds all t_max steps from its first update:
        # DistributedDataParallel broadcasts the buffers of process 0 into the others' as
        # flat buckets, and processes whose batches reached different lengths would hold
        # buffers of different sizes, which that copy misaligns without an error.
        self.reserve_steps(self.t_max if in_process_group() else start + n_keep)
        ok = count > 1  # (T, 1): one sequence gives no variance estimate
        finite = torch.isfinite(mean).all(-1, keepdim=True) & torch.isfinite(var).all(
            -1, keepdim=True
        )
        if values_known(mean) and not bool((finite | ~ok).all()):
            bad = (start + torch.nonzero((~finite & ok).flatten()).flatten()).tolist()
            warnings.warn(
                f"{type(self).__name__}: the batch statistics of step(s) {bad[:10]} are not "
                "finite (NaN or infinite inputs); those steps keep their running statistics",
                RuntimeWarning,
                stacklevel=3,
            )
        ok = ok & finite
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
        # steps_tracked: the last step that updated, if it is past the one recorded
        step = torch.arange(start + 1, start + n_keep + 1, device=ok.device)
        reached = torch.where(ok.flatten(), step, torch.zeros_like(step)).max()
        self.steps_tracked.copy_(torch.maximum(self.steps_tracked, reached))

    def add_module(self, name: str, module: nn.Module | None) -> None:
        """As ``nn.Module.add_module``, but the handle that serves
        ``torch.optim.swa_utils.update_bn`` stays: ``nn.SyncBatchNorm.convert_sync_batchnorm``
        takes it for an ``nn.BatchNorm`` layer and would put an unrelated one in its place."""
        keep = name == "_swa_update_bn" and "_swa_update_bn" in self._modules
        if keep and not isinstance(module, _SwaUpdateBnHandle):
            return
        super().add_module(name, module)

    def __repr__(self) -> str:  # the swa handle is an implementation detail
        return f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, t_max={self.t_max}, gamma_init={self.gamma_init}, "
            f"bias={self.bias is not None}, momentum={self.momentum}, eps={self.eps}"
        )


class _SwaUpdateBnHandle(_BatchNorm):
    """What ``torch.optim.swa_utils.update_bn`` finds of a :class:`RecurrentBatchNorm`.

    That function looks for ``_BatchNorm`` modules, resets their running statistics, sets
    their ``momentum`` to ``None`` (a cumulative average), runs the loader through the
    model and puts the momentum back. This handle is such a module, with no parameters,
    buffers or state of its own: it forwards those three operations to its owner, so
    torch's function recomputes the recurrent statistics as :func:`update_bn` does. It
    takes no part in the forward pass.
    """

    _owner: RecurrentBatchNorm

    def __init__(self, owner: RecurrentBatchNorm) -> None:
        object.__setattr__(self, "_owner", owner)  # not a child: no cycle in modules()
        super().__init__(1, momentum=owner.momentum, affine=False, track_running_stats=False)
        # _BatchNorm's __init__ resets too: that reset starts no recomputation
        self.__dict__["_pending_settings"] = 0
        owner._recomputing = False

    @property  # type: ignore[override]
    def momentum(self) -> float | None:
        return self._owner.momentum

    @momentum.setter
    def momentum(self, value: float | None) -> None:
        self._owner.momentum = value
        # torch's update_bn resets, sets the momentum to None, runs the loader and sets the
        # momentum back: the second setting after a reset ends the recomputation
        pending = self.__dict__.get("_pending_settings", 0)
        if pending > 0:
            self.__dict__["_pending_settings"] = pending - 1
            self._owner._recomputing = pending > 1

    def reset_running_stats(self) -> None:
        self._owner.reset_running_stats()
        self._owner._recomputing = True
        self.__dict__["_pending_settings"] = 2

    def _check_input_dim(self, input: Tensor) -> None:
        raise RuntimeError("this handle only serves torch.optim.swa_utils.update_bn")

    def forward(self, input: Tensor) -> Tensor:
        raise RuntimeError(
            "this handle of a RecurrentBatchNorm only serves torch.optim.swa_utils.update_bn; "
            "call the RecurrentBatchNorm itself"
        )

    def extra_repr(self) -> str:
        return "for torch.optim.swa_utils.update_bn"
