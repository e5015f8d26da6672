r"""JSMA, the Jacobian-based saliency map attack, as a foolbox 3 minimisation attack."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import eagerpy as ep
import numpy as np
from foolbox.attacks.base import (
    MinimizationAttack,
    T,
    get_criterion,
    get_is_adversarial,
    raise_if_kwargs,
)
from foolbox.criteria import Criterion, Misclassification, TargetedMisclassification
from foolbox.distances import l0
from foolbox.models import Model

from paperports._checks import check_bool, check_choice, check_float, check_int
from paperports.integrations.foolbox.saliency import (
    DEFAULT_CHUNK_SIZE,
    Outputs,
    _check_outputs,
    best_aligned_pairs,
    best_features,
    best_pairs,
    check_classes,
    check_inputs,
    class_scores,
    count_true,
    in_layout_of,
    outputs_and_gradients,
    scatter_rows,
    set_rows,
    take_rows,
    topk,
)

__all__ = ["JSMA", "AttackStatistics", "SaliencyMapAttack", "Variant"]

Variant = Literal["jsma", "wjsma", "tjsma"]
"""The saliency rule: Papernot et al.'s JSMA, or Loison et al.'s weighted (WJSMA) or
Taylor (TJSMA) variant."""


@dataclass(frozen=True)
class AttackStatistics:
    """What one call of :class:`SaliencyMapAttack` did, per input: ``steps`` taken (pairs,
    or features, changed: with ``pairs_per_step > 1`` a derivative gives several), and
    ``fallback_steps`` of them where no pair (feature) satisfied the paper's strict rule and
    the largest-alpha fallback chose one."""

    steps: np.ndarray
    fallback_steps: np.ndarray


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
    epsilons=None)``.

    Epsilons, foolbox's convention: the attack runs once, and each epsilon of a list is
    judged on its own, as if the attack had run with that budget: ``clipped[k]`` is what
    a run limited to ``epsilons[k]`` features returns (the attack is greedy, so that run is
    a prefix of the longest one) and ``success[k]`` whether it is adversarial; ``None``
    (or ``inf``) is the unbounded result. An epsilon is a count of features (an integer,
    or a whole float >= 2) or a fraction of the features (a float in ``(0, 1)``, rounded
    down); ``0`` allows no change. A list mixing counts and fractions, negative values,
    NaN and the ambiguous ``1.0`` are refused. ``raw`` is the longest run's result for
    every epsilon, as foolbox's minimisation attacks return it. No epsilon lets the attack
    change more than ``max_perturbation`` of the features: raise that for a curve that
    goes further.

    Criteria:
        * :class:`foolbox.criteria.TargetedMisclassification`: the paper's targeted attack.
          An input already classified as its target is a success with zero distortion.
        * :class:`foolbox.criteria.Misclassification`: untargeted; at each step the target is
          the class other than the label with the highest current output (the runner-up).

    When no pair satisfies the strict rule (for example on models whose outputs all rise
    with every feature, where :math:`\beta \geq 0` everywhere), the step falls back to the
    pair with the largest :math:`\alpha > 0`, which is ART's simplification of the rule and
    not the paper's; ``fallback=False`` stops the input there instead, as the paper's
    algorithm does. Where even the fallback finds nothing the input stops (a failure).
    How often the fallback chose a step is in ``last_statistics`` after each call. The
    single-feature mode (``pairwise=False``) applies the same rules to :math:`S(X, t)_i` of
    single features.

    Which outputs to differentiate: the paper differentiated the logits (the output of the
    last hidden layer, "JSMA-Z" in Carlini and Wagner's terms), so ``outputs="logits"``
    reproduces it. Softmax probabilities ("JSMA-F") make :math:`\beta = -\alpha`, so the
    pair rule becomes "the two features that raise the target's probability most"; since
    :math:`\partial p_t = p_t (\partial z_t - \sum_j p_j \partial z_j)`, that pushes the
    target against the competitors that currently matter, weighted by their probability,
    rather than against all others equally. See the docs for the measured effect and the
    default.

    Variants (Loison, Combey and Hajri 2020, "Probabilistic Jacobian-based Saliency Maps
    Attacks"): ``variant="wjsma"`` differentiates the logits :math:`Z` and weights each other
    class by its current probability :math:`F_j = \mathrm{softmax}(Z)_j`,

    .. math::

        \alpha = \sum_{i \in \{p, q\}} \frac{\partial Z_t(X)}{\partial x_i}, \qquad
        \beta = \sum_{i \in \{p, q\}} \sum_{j \neq t} F_j(X)
        \frac{\partial Z_j(X)}{\partial x_i},

    so that competitors that are far from winning no longer veto a pair. ``variant="tjsma"``
    also multiplies each feature's two derivatives by :math:`\delta_i`, the change a step
    would make to it (the first-order Taylor term of the change in :math:`Z`):
    :math:`\delta_i = 1 - x_i` for :math:`\theta = +1` on ``[0, 1]`` inputs, as in the
    variants paper; in general :math:`\min(|\theta| \cdot` range, the distance to the
    bound the step moves towards), which is our extension to :math:`|\theta| < 1` and to
    decreasing attacks. Both keep the pair rule, the fallback and everything else above.

    Args:
        theta: The change of a chosen feature, as a fraction of the bounds range, in
            ``[-1, 0) U (0, 1]``; ``+1`` sets features to the upper bound (the paper's MNIST
            setting), negative values decrease them.
        max_perturbation: :math:`\Upsilon`, the largest fraction of features changed, in
            ``(0, 1]`` (the paper: 0.145).
        pairwise: Change pairs of features (the paper's attack) or single features.
        steps: An upper bound on the number of steps (derivatives); ``None`` gives the paper's
            :math:`\lfloor n \Upsilon / 2 \rfloor` (pairs) or :math:`\lfloor n \Upsilon \rfloor`.
        outputs: Differentiate ``"logits"`` (the paper) or ``"probabilities"``; ``None``:
            probabilities for JSMA, logits for the variants (they are defined on logits, so
            they refuse ``"probabilities"``).
        chunk_size: Pair-matrix entries evaluated at once in the pair search (memory bound).
        fallback: Where no pair (or feature) satisfies the strict rule, take the one with
            the largest :math:`\alpha > 0` (ART's rule); ``False``: stop, as the paper does.
        pairs_per_step: Pairs (features) changed per forward derivative. ``1`` is the
            paper's attack. ``k > 1`` is an opt-in mode for large inputs: each derivative
            gives up to ``k`` disjoint pairs, each the best among the features the earlier
            ones left (with ``theta = 1``, the paper's next ``k`` steps had the derivative
            not changed), changed together; success is checked once per derivative, so an
            input may change up to ``k - 1`` pairs more than it needed. Each epsilon is
            still judged as a run with that budget. See the docs for its success, L0 and
            speed against the paper's mode.
        per_pixel: A feature is a pixel across all its channels, as the paper's algorithm
            works on pixels (for colour images): a pixel's :math:`a` and :math:`b` are the
            sums over its channels, and a step changes every channel of the chosen pixels.
            The channel axis is the model's ``data_format`` (``channels_first`` where it has
            none); inputs need one, ``(N, C, ...)``. Budgets and epsilons still count
            features, as foolbox's L0 does (a pixel is ``C`` of them).
        variant: ``"jsma"`` (the paper), ``"wjsma"`` or ``"tjsma"`` (see above).

    Attributes:
        last_statistics: After each call, :class:`AttackStatistics`: the steps each input
            took, and how many of them the fallback chose.

    References:
        .. [#Pap16] Nicolas Papernot, Patrick McDaniel, Somesh Jha, Matt Fredrikson,
           Z. Berkay Celik, Ananthram Swami, "The Limitations of Deep Learning in Adversarial
           Settings", IEEE EuroS&P 2016, https://arxiv.org/abs/1511.07528
        .. [#Loi20] António Loison, Théo Combey, Hatem Hajri, "Probabilistic Jacobian-based
           Saliency Maps Attacks", 2020, https://arxiv.org/abs/2007.06032
    """

    distance = l0

    def __init__(
        self,
        *,
        theta: float = 1.0,
        max_perturbation: float = 0.145,
        pairwise: bool = True,
        steps: int | None = None,
        outputs: Outputs | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        fallback: bool = True,
        pairs_per_step: int = 1,
        per_pixel: bool = False,
        variant: Variant = "jsma",
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
        variant = check_choice("variant", variant, ("jsma", "wjsma", "tjsma"), who=who)
        if outputs is None:
            outputs = "probabilities" if variant == "jsma" else "logits"
        _check_outputs(outputs)
        if variant != "jsma" and outputs != "logits":
            raise ValueError(
                f"{who}: variant={variant!r} weights the logits' derivatives by the "
                f"probabilities; it takes outputs='logits' (or None), got {outputs!r}"
            )
        self.variant: Variant = variant
        self.theta = theta
        self.max_perturbation = max_perturbation
        self.pairwise = pairwise
        self.steps = steps
        self.outputs: Outputs = outputs
        self.chunk_size = chunk_size
        self.fallback = check_bool("fallback", fallback, who=who)
        self.pairs_per_step = check_int("pairs_per_step", pairs_per_step, minimum=1, who=who)
        self.per_pixel = check_bool("per_pixel", per_pixel, who=who)
        self.last_statistics: AttackStatistics | None = None

    def __call__(  # type: ignore[override,misc]
        self, model: Model, inputs: T, criterion: Any, *, epsilons: Any, **kwargs: Any
    ) -> Any:
        """``raw, clipped, success`` for ``epsilons`` (see the class docstring): lists of
        one tensor per epsilon and a ``(K, N)`` success tensor for a list, single tensors
        and ``(N,)`` for one epsilon, as foolbox's attacks return them."""
        if kwargs:
            raise TypeError(
                f"SaliencyMapAttack got unexpected keyword arguments {sorted(kwargs)}; it takes "
                "model, inputs, criterion and epsilons"
            )
        if not isinstance(criterion, Criterion):
            try:  # foolbox reads a tensor of labels as Misclassification(labels)
                ep.astensor(criterion)
            except ValueError:
                raise TypeError(
                    "criterion must be a foolbox criterion (TargetedMisclassification or "
                    f"Misclassification) or a tensor of labels, got {type(criterion).__name__}"
                ) from None
        # foolbox's __call__ checks the bounds with a bare `assert`; check first, with a message.
        x, restore_type = ep.astensor_(inputs)
        _verify_bounds(x, model)
        iterable = isinstance(epsilons, Iterable) and not isinstance(epsilons, str)
        listed = list(epsilons) if iterable else [epsilons]
        n_features = math.prod(x.shape[1:])
        counts = epsilon_counts(listed, n_features)
        if x.shape[0] == 0:  # an empty batch: empty results, in foolbox's layout
            success = ep.zeros(x, (len(listed), 0)).bool()
            self.last_statistics = AttackStatistics(np.zeros(0, int), np.zeros(0, int))
        else:
            criterion_ = get_criterion(criterion)
            is_adversarial = get_is_adversarial(criterion_, model)
            budget = self.budget(n_features)
            if None not in counts:
                budget = min(budget, max(c for c in counts if c is not None))
            thresholds = sorted({c for c in counts if c is not None})
            xp, snapshots = self._attack(model, x, criterion_, budget, thresholds)
            clipped = [xp if c is None else snapshots[thresholds.index(c)] for c in counts]
            success = ep.stack([is_adversarial(xc) for xc in clipped])
            x = xp
        raw_ = restore_type(x)
        clipped_ = [restore_type(c) for c in clipped] if x.shape[0] else [raw_] * len(listed)
        if iterable:
            return [raw_] * len(listed), clipped_, restore_type(success)
        return raw_, clipped_[0], restore_type(success[0])

    def max_steps(self, num_features: int) -> int:
        """The number of steps the attack may take on inputs of ``num_features`` features."""
        per_step = 2 if self.pairwise else 1
        paper = math.floor(num_features * self.max_perturbation / per_step)
        return max(1, paper) if self.steps is None else self.steps

    def budget(self, num_features: int) -> int:
        r"""The most features the attack changes: :math:`\lfloor n \Upsilon \rfloor`."""
        return math.floor(num_features * self.max_perturbation)

    def run(
        self,
        model: Model,
        inputs: T,
        criterion: Misclassification | TargetedMisclassification | T,
        *,
        early_stop: float | None = None,
        **kwargs: Any,
    ) -> T:
        """The attack's result with foolbox's ``run`` signature; ``early_stop``, a count of
        features, caps the budget."""
        raise_if_kwargs(kwargs)
        x0, restore_type = ep.astensor_(inputs)
        criterion_ = get_criterion(criterion)
        del inputs, criterion, kwargs
        _verify_bounds(x0, model)
        budget = self.budget(math.prod(x0.shape[1:]))
        if early_stop is not None:
            budget = min(budget, math.floor(early_stop))
        xp, _ = self._attack(model, x0, criterion_, budget, [])
        return restore_type(xp)

    def _attack(
        self,
        model: Model,
        x0: ep.Tensor,
        criterion: Criterion,
        budget: int,
        thresholds: list[int],
    ) -> tuple[ep.Tensor, list[ep.Tensor]]:
        """The attack with at most ``budget`` changed features; also, for each of the
        ``thresholds`` (counts of features, each at most ``budget``), what a run with that
        budget returns: the state at which it would have stopped."""
        shape = x0.shape
        n_inputs = shape[0]
        x0f = x0.flatten(start=1)
        x = x0f
        n = x.shape[1]
        min_, max_ = model.bounds
        sign = 1.0 if self.theta > 0 else -1.0
        delta = self.theta * (max_ - min_)

        z = class_scores(model, in_layout_of(x.reshape(shape), x0))
        mode, classes = _criterion_classes(criterion, n_inputs, z.shape[1])
        del z

        width, last = _pixel_layout(self.per_pixel, shape, model)
        per_step = (2 if self.pairwise else 1) * width  # features a step may change, at most
        domain = x < max_ if sign > 0 else x > min_
        changed = ep.zeros(x, x.shape).bool()
        counts = ep.zeros(x, (n_inputs,)).astype(int)  # per input: changed features, counted
        active = ep.ones(x, (n_inputs,)).bool()
        all_rows = ep.arange(x, n_inputs)
        steps = ep.zeros(x, (n_inputs,)).astype(int)  # per input: steps taken, and by fallback
        fallbacks = ep.zeros(x, (n_inputs,)).astype(int)
        snapshots = [x for _ in thresholds]  # the state where each smaller budget stops
        frozen = [ep.zeros(x, (n_inputs,)).bool() for _ in thresholds]
        many = self.pairs_per_step > 1
        sparse = not many and width == 1  # one pair of values per step: update by index
        for _ in range(self.max_steps(n // width)):
            idx = all_rows[active]
            if len(idx) == 0:
                break
            xa = take_rows(x, idx)
            cls = take_rows(classes, idx)
            choose = _fixed(cls) if mode == "targeted" else _runner_up_of(cls)
            # one pass gives the outputs (to stop) and the forward derivative (to step)
            z, _, a, b = outputs_and_gradients(
                model,
                in_layout_of(xa.reshape((-1, *shape[1:])), x0),
                choose,
                self.outputs,
                weighted=self.variant != "jsma",
            )
            pred = z.argmax(axis=-1)
            done = pred == cls if mode == "targeted" else pred != cls
            used = take_rows(counts, idx)
            not_done = ep.logical_not(done)
            for k, threshold in enumerate(thresholds):  # a run with this budget stops here
                stops = ep.logical_and(not_done, used + per_step > threshold)
                stops = ep.logical_and(stops, ep.logical_not(take_rows(frozen[k], idx)))
                if bool(stops.any().item()):
                    stopped = idx[stops]
                    snapshots[k] = set_rows(snapshots[k], stopped, x[stopped])
                    frozen[k] = set_rows(frozen[k], stopped, ep.ones(x, (len(stopped),)).bool())
            room = used + per_step <= budget
            go = ep.logical_and(not_done, room)
            # search only the rows that will step: a finished row's search is wasted work
            sel = ep.arange(x, len(idx))[go]
            rows = take_rows(idx, sel)
            active = set_rows(active, idx, go)
            if len(rows) == 0:
                break
            a_sel = take_rows(a, sel).flatten(start=1)
            # probabilities: b = -a exactly, negated faster than flattened (a copy when the
            # input is channels-last)
            b_sel = (
                -a_sel if self.outputs == "probabilities" else take_rows(b, sel).flatten(start=1)
            )
            xr, changed_r, domain_r = (
                take_rows(xa, sel),
                take_rows(changed, rows),
                take_rows(domain, rows),
            )
            if self.variant == "tjsma":  # each derivative times the change a step makes
                reach = max_ - xr if sign > 0 else xr - min_
                taylor = ep.minimum(reach, ep.full_like(reach, abs(delta)))
                a_sel, b_sel = a_sel * taylor, b_sel * taylor
            if sign < 0:
                a_sel, b_sel = -a_sel, -b_sel
            if width > 1:  # pixels: the channels' sums, movable while any channel is
                a_sel, b_sel = _pixels(a_sel, width, last), _pixels(b_sel, width, last)
                domain_r = _pixels(domain_r.astype(int), width, last) > 0
            if sparse:  # the paper's step on values: two indices, no (N, n) masks
                at, found, by_fallback = self._pick(a_sel, b_sel, domain_r)
                moves = found.astype(int)
                used_fallback = ep.logical_and(by_fallback, found).astype(int)
                rank = None
            else:
                picks, moves, used_fallback, used_before, rank = self._pick_many(
                    a_sel,
                    b_sel,
                    domain_r,
                    # only k > 1 counts the features each pair adds within the step
                    width - _pixels(changed_r.astype(int), width, last) if many else None,
                    take_rows(used, sel),
                    budget,
                    per_step,
                )
            if width > 1:
                picks = _features(picks, width, last)
                rank = None if rank is None else _features(rank, width, last)
            for k, threshold in enumerate(thresholds if rank is not None else []):
                # a budget that ends inside this step: the pairs it takes, then it stops
                pairs = ep.zeros_like(moves)
                for before in used_before:
                    pairs = pairs + (before + per_step <= threshold).astype(int)
                inside = ep.logical_and(pairs < moves, ep.logical_not(take_rows(frozen[k], rows)))
                if bool(inside.any().item()):
                    assert rank is not None
                    part = ep.logical_and(picks, rank < pairs[:, None]).astype(x.dtype)
                    x_part = ep.clip(xr + delta * part, min_, max_)
                    stopped = rows[inside]
                    snapshots[k] = set_rows(snapshots[k], stopped, x_part[inside])
                    frozen[k] = set_rows(frozen[k], stopped, ep.ones(x, (len(stopped),)).bool())
            moved = moves > 0
            steps = set_rows(steps, rows, take_rows(steps, rows) + moves)
            fallbacks = set_rows(fallbacks, rows, take_rows(fallbacks, rows) + used_fallback)
            # inputs that succeeded, ran out of budget or found no feature to move stop here
            active = set_rows(active, rows, moved)
            x0_r = take_rows(x0f, rows)
            if sparse:  # change the chosen features only (an input that found none keeps its)
                old = xr.take_along_axis(at, axis=-1)
                new = ep.where(moved[:, None], ep.clip(old + delta, min_, max_), old)
                reached = new >= max_ if sign > 0 else new <= min_
                stays = ep.logical_and(
                    domain_r.take_along_axis(at, axis=-1), ep.logical_not(reached)
                )
                before = changed_r.take_along_axis(at, axis=-1)
                differs = ep.logical_or(before, new != x0_r.take_along_axis(at, axis=-1))
                gained = count_true(ep.logical_and(differs, ep.logical_not(before)))  # at: distinct
                counts = set_rows(counts, rows, take_rows(counts, rows) + gained)
                x = set_rows(x, rows, scatter_rows(xr, at, new))
                domain = set_rows(domain, rows, scatter_rows(domain_r, at, stays))
                changed = set_rows(changed, rows, scatter_rows(changed_r, at, differs))
                continue
            xr_new = ep.clip(xr + delta * picks.astype(x.dtype), min_, max_)
            x = set_rows(x, rows, xr_new)
            reached = xr_new >= max_ if sign > 0 else xr_new <= min_
            not_reached = ep.logical_not(reached)
            domain = set_rows(domain, rows, ep.logical_and(take_rows(domain, rows), not_reached))
            newly = ep.logical_or(changed_r, xr_new != x0_r)
            changed = set_rows(changed, rows, newly)
            counts = set_rows(counts, rows, count_true(newly))
        # rows a smaller budget never stopped ended as the longest run did
        final = [ep.where(f[:, None], snap, x) for f, snap in zip(frozen, snapshots, strict=True)]
        self.last_statistics = AttackStatistics(
            steps=np.asarray(steps.numpy()), fallback_steps=np.asarray(fallbacks.numpy())
        )
        return in_layout_of(x.reshape(shape), x0), [
            in_layout_of(f.reshape(shape), x0) for f in final
        ]

    def _pick_many(
        self,
        a: ep.Tensor,
        b: ep.Tensor,
        domain: ep.Tensor,
        fresh: ep.Tensor | None,
        used: ep.Tensor,
        budget: int,
        per_step: int,
    ) -> tuple[ep.Tensor, ep.Tensor, ep.Tensor, list[ep.Tensor], ep.Tensor | None]:
        """Up to ``pairs_per_step`` disjoint pairs (features) from one derivative, each the
        best among the features the earlier ones left, while the budget has room.

        Returns the boolean ``(N, n)`` of features to change; per input, how many pairs
        were taken and how many of them the fallback chose; for each pair ``j``, the
        features changed before it ``(N,)``; and for each feature the ``j`` of its pair
        (``pairs_per_step`` where none; ``None`` for one pair per step). ``fresh``: per
        feature (pixel), how many features changing it would add to the L0 at most (needed
        for more than one pair per step); ``per_step`` bounds it for a step."""
        if self.pairs_per_step == 1:  # the paper's step: one pick, nothing to rank or count
            at, moved, used_fallback = self._pick(a, b, domain)
            picks = ep.logical_and(_mask(at, domain.shape[1]), moved[:, None])
            fallbacks = ep.logical_and(used_fallback, moved).astype(int)
            return picks, moved.astype(int), fallbacks, [used], None
        assert fresh is not None
        picks = ep.zeros_like(domain)
        rank = ep.full(used, domain.shape, self.pairs_per_step)
        moves = ep.zeros_like(used)
        fallbacks = ep.zeros_like(used)
        going = ep.ones(used, used.shape).bool()
        used_before: list[ep.Tensor] = []
        only_fallback = False
        for j in range(self.pairs_per_step):
            going = ep.logical_and(going, used + per_step <= budget)
            if j and not bool(going.any().item()):
                break
            if j and self.pairwise and (self.outputs == "probabilities" or only_fallback):
                # the rest are the largest a, two by two: one top-k, not one search per pair
                return self._largest_pairs(
                    a,
                    domain,
                    fresh,
                    budget,
                    per_step,
                    j,
                    (picks, rank, moves, fallbacks, going),
                    used,
                    used_before,
                    only_fallback,
                )
            free = domain if j == 0 else ep.logical_and(domain, ep.logical_not(picks))
            at, moved, used_fallback = self._pick(a, b, free)
            chosen = _mask(at, domain.shape[1])
            moved = ep.logical_and(moved, going)
            # no strict pair now, none later: the domain only shrinks
            only_fallback = bool(ep.logical_or(used_fallback, ep.logical_not(moved)).all().item())
            chosen = ep.logical_and(chosen, moved[:, None])
            used_before.append(used)
            picks = chosen if j == 0 else ep.logical_or(picks, chosen)
            moves = moves + moved.astype(int)
            fallbacks = fallbacks + ep.logical_and(used_fallback, moved).astype(int)
            going = moved
            rank = ep.where(chosen, ep.full_like(rank, j), rank)
            used = used + (chosen.astype(int) * fresh).sum(axis=-1)
        return picks, moves, fallbacks, used_before, rank

    def _largest_pairs(
        self,
        a: ep.Tensor,
        domain: ep.Tensor,
        fresh: ep.Tensor,
        budget: int,
        per_step: int,
        j0: int,
        state: tuple[ep.Tensor, ep.Tensor, ep.Tensor, ep.Tensor, ep.Tensor],
        used: ep.Tensor,
        used_before: list[ep.Tensor],
        fallback: bool,
    ) -> tuple[ep.Tensor, ep.Tensor, ep.Tensor, list[ep.Tensor], ep.Tensor]:
        """Pairs ``j0, j0 + 1, ...`` of :meth:`_pick_many` where each is the two largest
        ``a`` left (probabilities, or the fallback alone): the largest ``a``, two by two,
        while they sum to more than zero and the budget has room. Ties among equal ``a``
        go as ``topk`` orders them."""
        picks, rank, moves, fallbacks, going = state
        n = a.shape[1]
        left = self.pairs_per_step - j0
        free = ep.logical_and(domain, ep.logical_not(picks))
        values, idx = topk(ep.where(free, a, ep.full_like(a, -ep.inf)), min(n, 2 * left))
        left = idx.shape[1] // 2
        values, idx = values[:, : 2 * left], idx[:, : 2 * left]
        adds = fresh.take_along_axis(idx, axis=-1)
        new = adds[:, 0::2] + adds[:, 1::2]  # (N, left): features each pair adds, at most
        before = used[:, None] + new.cumsum(axis=-1) - new
        ok = ep.logical_and(values[:, 0::2] + values[:, 1::2] > 0, values[:, 1::2] > -ep.inf)
        ok = ep.logical_and(ok, before + per_step <= budget)
        ok = ep.logical_and(ok, going[:, None])
        ok = ep.logical_not(ok).astype(int).cumsum(axis=-1) == 0  # a run of pairs, then none
        taken = count_true(ok)
        pair_of = ep.arange(idx, 2 * left)[None, :] // 2  # the pair of each of the 2 * left
        chosen_j = ep.where(pair_of < taken[:, None], pair_of + j0, ep.full_like(idx, -1))
        marks = scatter_rows(ep.full_like(rank, -1), idx, chosen_j)  # -1, or the new pair's j
        newly = ep.logical_and(marks >= 0, ep.logical_not(picks))
        rank = ep.where(newly, marks, rank)
        picks = ep.logical_or(picks, newly)
        for j in range(left):
            used_before.append(before[:, j])
        moves = moves + taken
        if fallback:
            fallbacks = fallbacks + taken
        return picks, moves, fallbacks, used_before, rank

    def _pick(
        self, a: ep.Tensor, b: ep.Tensor, domain: ep.Tensor
    ) -> tuple[ep.Tensor, ep.Tensor, ep.Tensor]:
        """The features to change, ``(N, 2)`` indices (``(N, 1)`` for single features),
        whether any was found ``(N,)``, and whether the fallback chose them ``(N,)`` (no
        feature satisfied the strict rule)."""
        n = a.shape[1]
        if self.pairwise:
            if self.outputs == "probabilities":  # b = -a exactly: no check needed
                p, q, found = best_aligned_pairs(a, domain)
            else:
                p, q, found = best_pairs(a, b, domain, chunk_size=self.chunk_size)
            if bool(found.all().item()) or n < 2:
                fallback_ok = ep.zeros(found, found.shape).bool()
            else:  # the pair with the largest alpha > 0 (the two largest a in the domain)
                top, top_idx = topk(ep.where(domain, a, ep.full_like(a, -ep.inf)), 2)
                fallback_ok = top.sum(axis=-1) > 0
                p = ep.where(found, p, top_idx[:, 0])
                q = ep.where(found, q, top_idx[:, -1])
            at = ep.stack([p, q], axis=1)
        else:
            p, found = best_features(a, b, domain)
            masked = ep.where(domain, a, ep.full_like(a, -ep.inf))
            fallback_ok = masked.max(axis=-1) > 0
            at = ep.where(found, p, masked.argmax(axis=-1))[:, None]
        if not self.fallback:
            fallback_ok = ep.zeros(found, found.shape).bool()
        used_fallback = ep.logical_and(ep.logical_not(found), fallback_ok)
        return at, ep.logical_or(found, fallback_ok), used_fallback


JSMA = SaliencyMapAttack
"""Alias of :class:`SaliencyMapAttack`."""


def epsilon_counts(epsilons: list[Any], num_features: int) -> list[int | None]:
    """The L0 budgets, in features, that ``epsilons`` name (``None``: no limit).

    An epsilon is ``None`` or ``inf`` (no limit), a count (an integer, or a whole float of
    at least 2) or a fraction of the ``num_features`` (a float in ``(0, 1)``, rounded
    down). Refused: negative values, NaN, other types, ``1.0`` (one feature, or all of
    them?) and a list mixing counts and fractions.
    """
    counts: list[int | None] = []
    kinds = set()
    for k, eps in enumerate(epsilons):
        name = f"epsilons[{k}]" if len(epsilons) > 1 else "epsilons"
        if eps is None:
            counts.append(None)
            continue
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
            raise TypeError(
                f"{name} must be None, a count of features or a fraction of them; got "
                f"{type(eps).__name__}"
            )
        value = float(eps)
        if math.isnan(value) or value < 0:
            raise ValueError(f"{name} must be >= 0 (an L0 budget), got {eps}")
        if math.isinf(value):
            counts.append(None)
            continue
        if isinstance(eps, (int, np.integer)) or value == 0:
            if value:  # 0 is both a count and a fraction
                kinds.add("count")
            counts.append(int(value))
        elif value < 1:
            kinds.add("fraction")
            counts.append(math.floor(value * num_features))
        elif value == 1:
            raise ValueError(
                f"{name} = 1.0 is ambiguous for an L0 budget: pass 1 for one feature, or None "
                "for no limit"
            )
        elif value.is_integer():
            kinds.add("count")
            counts.append(int(value))
        else:
            raise ValueError(
                f"{name} must be a whole count of features or a fraction in (0, 1), got {eps}"
            )
    if len(kinds) > 1:
        raise ValueError(
            "epsilons mix counts of features and fractions of them; use one kind, e.g. "
            f"[5, 10, 20] or [0.01, 0.05, 0.1]; got {list(epsilons)}"
        )
    return counts


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


def _mask(at: ep.Tensor, n: int) -> ep.Tensor:
    """Boolean ``(N, n)``: true at the indices ``at`` ``(N, k)`` of each row."""
    cols = ep.arange(at, n)[None, :]
    mask = cols == at[:, :1]
    for k in range(1, at.shape[1]):
        mask = ep.logical_or(mask, cols == at[:, k : k + 1])
    return mask


def _pixel_layout(per_pixel: bool, shape: tuple[int, ...], model: Model) -> tuple[int, bool]:
    """``(channels, channels_last)`` of the inputs for ``per_pixel``; ``(1, False)`` where a
    feature is a single value."""
    if not per_pixel:
        return 1, False
    if len(shape) < 3:
        raise ValueError(
            "per_pixel=True needs inputs with a channel axis, (N, C, ...) or (N, ..., C); "
            f"got inputs of shape {tuple(shape)}"
        )
    last = getattr(model, "data_format", "channels_first") == "channels_last"
    return shape[-1] if last else shape[1], last


def _pixels(t: ep.Tensor, width: int, last: bool) -> ep.Tensor:
    """``(N, n)`` features to ``(N, n / width)`` pixels: the sum over each pixel's channels."""
    if width == 1:
        return t
    grouped = t.reshape((t.shape[0], -1, width) if last else (t.shape[0], width, -1))
    return grouped.sum(axis=2 if last else 1)


def _features(t: ep.Tensor, width: int, last: bool) -> ep.Tensor:
    """``(N, P)`` pixels to ``(N, P * width)`` features: each pixel's value on its channels."""
    if width == 1:
        return t
    if last:
        return ep.tile(t[:, :, None], (1, 1, width)).reshape((t.shape[0], -1))
    return ep.tile(t[:, None, :], (1, width, 1)).reshape((t.shape[0], -1))
