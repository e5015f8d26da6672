r"""JSMA, the Jacobian-based saliency map attack, as a foolbox 3 minimisation attack."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, Literal

import eagerpy as ep
from foolbox.attacks.base import MinimizationAttack, T, get_criterion, raise_if_kwargs
from foolbox.criteria import Misclassification, TargetedMisclassification
from foolbox.distances import l0
from foolbox.models import Model

from paperports._checks import check_bool, check_float, check_int
from paperports.integrations.foolbox.saliency import (
    DEFAULT_CHUNK_SIZE,
    Outputs,
    _check_outputs,
    best_features,
    best_pairs,
    check_classes,
    check_inputs,
    class_scores,
    outputs_and_gradients,
    set_rows,
)

__all__ = ["JSMA", "SaliencyMapAttack"]


class SaliencyMapAttack(MinimizationAttack):
    r"""The Jacobian-based saliency map attack (JSMA) of Papernot et al. (2016).

    At each step the attack computes the forward derivative of the model at the current
    input, picks the pair of features :math:`(p, q)` from the search domain :math:`\Gamma`
    that maximises :math:`\alpha \cdot |\beta|` subject to :math:`\alpha > 0, \beta < 0`,
    where

    .. math::

        \alpha = \sum_{i \in \{p, q\}} \frac{\partial F_t(X)}{\partial x_i}, \qquad
        \beta = \sum_{i \in \{p, q\}} \sum_{j \neq t} \frac{\partial F_j(X)}{\partial x_i},

    and changes both by :math:`\theta` (a fraction of the model's bounds range, clipped to
    the bounds). A feature leaves :math:`\Gamma` when it reaches the bound. The attack stops
    when the model predicts the target :math:`t` (success), or when the next step would
    change more than a fraction :math:`\Upsilon` of the features, after
    :math:`\lfloor n \Upsilon / 2 \rfloor` pair steps (failure). For :math:`\theta < 0`
    both inequalities are reversed (the paper's decreasing variant).

    Every input of the batch advances together; finished inputs stop changing. The result
    is an L0 minimisation: ``raw, clipped, success = attack(fmodel, x, criterion,
    epsilons=None)``. With finite L0 ``epsilons`` (numbers of features), the attack never
    changes more than ``min(epsilons)`` features, because foolbox cannot clip an L0
    perturbation after the fact.

    Criteria:
        * :class:`foolbox.criteria.TargetedMisclassification`: the paper's targeted attack.
          An input already classified as its target is a success with zero distortion.
        * :class:`foolbox.criteria.Misclassification`: untargeted; at each step the target is
          the class other than the label with the highest current output (the runner-up).

    When no pair satisfies the strict rule (for example on models whose outputs all rise
    with every feature, where :math:`\beta \geq 0` everywhere), the step falls back to the
    pair with the largest :math:`\alpha > 0`, which is ART's simplification of the rule;
    where even that is impossible the input stops (a failure). The single-feature mode
    (``pairwise=False``) applies the same rules to :math:`S(X, t)_i` of single features.

    Which outputs to differentiate: the paper differentiated the logits (the output of the
    last hidden layer, "JSMA-Z" in Carlini and Wagner's terms), so ``outputs="logits"``
    reproduces it. Softmax probabilities ("JSMA-F") make :math:`\beta = -\alpha`, so the
    pair rule becomes "the two features that raise the target's probability most"; since
    :math:`\partial p_t = p_t (\partial z_t - \sum_j p_j \partial z_j)`, that pushes the
    target against the competitors that currently matter, weighted by their probability,
    rather than against all others equally. See the docs for the measured effect and the
    default.

    Args:
        theta: The change of a chosen feature, as a fraction of the bounds range, in
            ``[-1, 0) U (0, 1]``; ``+1`` sets features to the upper bound (the paper's MNIST
            setting), negative values decrease them.
        max_perturbation: :math:`\Upsilon`, the largest fraction of features changed, in
            ``(0, 1]`` (the paper: 0.145).
        pairwise: Change pairs of features (the paper's attack) or single features.
        steps: An upper bound on the number of steps; ``None`` gives the paper's
            :math:`\lfloor n \Upsilon / 2 \rfloor` (pairs) or :math:`\lfloor n \Upsilon \rfloor`.
        outputs: Differentiate ``"logits"`` (the paper) or ``"probabilities"``.
        chunk_size: Pair-matrix entries evaluated at once in the pair search (memory bound).

    References:
        .. [#Pap16] Nicolas Papernot, Patrick McDaniel, Somesh Jha, Matt Fredrikson,
           Z. Berkay Celik, Ananthram Swami, "The Limitations of Deep Learning in Adversarial
           Settings", IEEE EuroS&P 2016, https://arxiv.org/abs/1511.07528
    """

    distance = l0

    def __init__(
        self,
        *,
        theta: float = 1.0,
        max_perturbation: float = 0.145,
        pairwise: bool = True,
        steps: int | None = None,
        outputs: Outputs = "probabilities",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        who = "SaliencyMapAttack"
        theta = check_float("theta", theta, minimum=-1.0, maximum=1.0, who=who)
        if theta == 0:
            raise ValueError(f"{who}: theta must be in [-1, 0) or (0, 1], got {theta}")
        max_perturbation = check_float(
            "max_perturbation", max_perturbation, minimum=0.0, maximum=1.0, open_low=True, who=who
        )
        pairwise = check_bool("pairwise", pairwise, who=who)
        if steps is not None:
            steps = check_int("steps", steps, minimum=1, who=who)
        chunk_size = check_int("chunk_size", chunk_size, minimum=1, who=who)
        _check_outputs(outputs)
        self.theta = theta
        self.max_perturbation = max_perturbation
        self.pairwise = pairwise
        self.steps = steps
        self.outputs: Outputs = outputs
        self.chunk_size = chunk_size

    def __call__(  # type: ignore[override,misc]
        self, model: Model, inputs: T, criterion: Any, *, epsilons: Any, **kwargs: Any
    ) -> Any:
        # foolbox's __call__ checks the bounds with a bare `assert`; check first, with a message.
        x, restore_type = ep.astensor_(inputs)
        _verify_bounds(x, model)
        if x.shape[0] == 0:  # an empty batch: empty results, in foolbox's layout
            iterable = isinstance(epsilons, Iterable)
            k = len(epsilons) if iterable else 1
            success = restore_type(ep.zeros(x, (k, 0) if iterable else (0,)).bool())
            if iterable:
                return [inputs] * k, [inputs] * k, success
            return inputs, inputs, success
        return super().__call__(model, inputs, criterion, epsilons=epsilons, **kwargs)

    def max_steps(self, num_features: int) -> int:
        """The number of steps the attack may take on inputs of ``num_features`` features."""
        per_step = 2 if self.pairwise else 1
        paper = math.floor(num_features * self.max_perturbation / per_step)
        return max(1, paper) if self.steps is None else self.steps

    def run(
        self,
        model: Model,
        inputs: T,
        criterion: Misclassification | TargetedMisclassification | T,
        *,
        early_stop: float | None = None,
        **kwargs: Any,
    ) -> T:
        raise_if_kwargs(kwargs)
        x0, restore_type = ep.astensor_(inputs)
        criterion_ = get_criterion(criterion)
        del inputs, criterion, kwargs
        _verify_bounds(x0, model)

        shape = x0.shape
        n_inputs = shape[0]
        x0f = x0.flatten(start=1)
        x = x0f
        n = x.shape[1]
        min_, max_ = model.bounds
        sign = 1.0 if self.theta > 0 else -1.0
        delta = self.theta * (max_ - min_)

        z = class_scores(model, x.reshape(shape))
        mode, classes = _criterion_classes(criterion_, n_inputs, z.shape[1])
        del z

        budget = math.floor(n * self.max_perturbation)
        if early_stop is not None:
            budget = min(budget, math.floor(early_stop))
        per_step = 2 if self.pairwise else 1

        domain = x < max_ if sign > 0 else x > min_
        changed = ep.zeros(x, x.shape).bool()
        active = ep.ones(x, (n_inputs,)).bool()
        all_rows = ep.arange(x, n_inputs)
        for _ in range(self.max_steps(n)):
            idx = all_rows[active]
            if len(idx) == 0:
                break
            xa = x[idx]
            cls = classes[idx]
            choose = _fixed(cls) if mode == "targeted" else _runner_up_of(cls)
            # one pass gives the outputs (to stop) and the forward derivative (to step)
            z, _, a, b = outputs_and_gradients(
                model, xa.reshape((-1, *shape[1:])), choose, self.outputs
            )
            pred = z.argmax(axis=-1)
            done = pred == cls if mode == "targeted" else pred != cls
            room = changed[idx].astype(int).sum(axis=-1) + per_step <= budget
            go = ep.logical_and(ep.logical_not(done), room)
            # search only the rows that will step: a finished row's search is wasted work
            sel = ep.arange(x, len(idx))[go]
            rows = idx[sel]
            active = set_rows(active, idx, go)
            if len(rows) == 0:
                break
            picks, moved = self._pick(
                sign * a[sel].flatten(start=1), sign * b[sel].flatten(start=1), domain[rows]
            )
            # inputs that succeeded, ran out of budget or found no feature to move stop here
            active = set_rows(active, rows, moved)
            xr = xa[sel]
            step = ep.where(moved[:, None], picks, ep.zeros_like(picks)).astype(x.dtype)
            xr_new = ep.clip(xr + delta * step, min_, max_)
            x = set_rows(x, rows, xr_new)
            reached = xr_new >= max_ if sign > 0 else xr_new <= min_
            not_reached = ep.logical_not(reached)
            domain = set_rows(domain, rows, ep.logical_and(domain[rows], not_reached))
            newly = ep.logical_or(changed[rows], xr_new != x0f[rows])
            changed = set_rows(changed, rows, newly)
        return restore_type(x.reshape(shape))

    def _pick(self, a: ep.Tensor, b: ep.Tensor, domain: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
        """Boolean ``(N, n)`` of the features to change, and whether any was found ``(N,)``."""
        n = a.shape[1]
        cols = ep.arange(a, n)[None, :]
        if self.pairwise:
            p, q, found = best_pairs(a, b, domain, chunk_size=self.chunk_size)
            # fallback: the pair with the largest alpha > 0 (the two largest a in the domain)
            top, top_idx = ep.where(domain, a, ep.full_like(a, -ep.inf)).topk(min(2, n))
            fallback_ok = (top.sum(axis=-1) > 0) if n >= 2 else ep.zeros(found, found.shape)
            p = ep.where(found, p, top_idx[:, 0])
            q = ep.where(found, q, top_idx[:, -1])
            picks = ep.logical_or(cols == p[:, None], cols == q[:, None])
            return picks, ep.logical_or(found, fallback_ok)
        p, found = best_features(a, b, domain)
        masked = ep.where(domain, a, ep.full_like(a, -ep.inf))
        fallback = masked.argmax(axis=-1)
        fallback_ok = masked.max(axis=-1) > 0
        p = ep.where(found, p, fallback)
        return cols == p[:, None], ep.logical_or(found, fallback_ok)


JSMA = SaliencyMapAttack
"""Alias of :class:`SaliencyMapAttack`."""


def _verify_bounds(x: ep.Tensor, model: Model) -> None:
    check_inputs(x, model)
    if x.shape[0] == 0:
        return
    lo, hi = model.bounds
    x_min, x_max = x.min().item(), x.max().item()
    if x_min < lo or x_max > hi:
        raise ValueError(
            f"inputs must lie within the model's bounds [{lo}, {hi}]; "
            f"they span [{x_min:.6g}, {x_max:.6g}]"
        )


def _criterion_classes(
    criterion: Any, n_inputs: int, num_classes: int
) -> tuple[Literal["targeted", "untargeted"], ep.Tensor]:
    if isinstance(criterion, TargetedMisclassification):
        mode: Literal["targeted", "untargeted"] = "targeted"
        classes = criterion.target_classes
        what = "target_classes"
    elif isinstance(criterion, Misclassification):
        mode, classes, what = "untargeted", criterion.labels, "labels"
    else:
        raise ValueError(
            f"unsupported criterion {criterion!r}: SaliencyMapAttack takes "
            "foolbox.criteria.TargetedMisclassification or Misclassification"
        )
    check_classes(f"the criterion's {what}", classes, n_inputs, num_classes)
    return mode, classes


def _fixed(targets: ep.Tensor) -> Callable[[ep.Tensor], ep.Tensor]:
    """Targeted: the targets do not depend on the outputs."""
    return lambda z: targets


def _runner_up_of(labels: ep.Tensor) -> Callable[[ep.Tensor], ep.Tensor]:
    """Untargeted: the target is the current runner-up to the label."""
    return lambda z: _runner_up(z, labels)


def _runner_up(z: ep.Tensor, labels: ep.Tensor) -> ep.Tensor:
    """The class other than ``labels`` with the highest output."""
    masked = ep.where(ep.onehot_like(z, labels).bool(), ep.full_like(z, -ep.inf), z)
    return masked.argmax(axis=-1)
