r"""Forward derivatives, adversarial saliency maps and the saliency pair search of JSMA.

Papernot et al. (2016), "The Limitations of Deep Learning in Adversarial Settings"
(https://arxiv.org/abs/1511.07528), Section III.

For a classifier :math:`F` with outputs :math:`F_j` (logits or softmax probabilities), the
*forward derivative* is the Jacobian :math:`\nabla F(X) = [\partial F_j / \partial x_i]`.
For a target class :math:`t` write

.. math::

    a_i = \frac{\partial F_t(X)}{\partial x_i}, \qquad
    b_i = \sum_{j \neq t} \frac{\partial F_j(X)}{\partial x_i}.

The saliency map for increasing features is

.. math::

    S(X, t)_i = \begin{cases} 0 & \text{if } a_i < 0 \text{ or } b_i > 0 \\
                a_i \, |b_i| & \text{otherwise,} \end{cases}

and for decreasing features the same with both inequalities reversed. The attack's pair
rule picks :math:`(p, q)` maximising :math:`\alpha \cdot |\beta|` with
:math:`\alpha = a_p + a_q > 0` and :math:`\beta = b_p + b_q < 0`.

The probabilistic variants of Loison, Combey and Hajri (2020,
https://arxiv.org/abs/2007.06032) differentiate the logits :math:`Z` and weight the other
classes by their softmax probabilities :math:`F_j = \mathrm{softmax}(Z)_j`: WJSMA uses
:math:`b_i = \sum_{j \neq t} F_j(X) \, \partial Z_j(X) / \partial x_i` (``weighted=True`` in
:func:`outputs_and_gradients`); TJSMA also multiplies :math:`a_i` and :math:`b_i` by the
change of feature :math:`i` that a step would make, the first-order Taylor term (the
attack does that).

Only :math:`a` and :math:`b` enter the attack, so one backward pass on a batch of twice
the size gives both (``b`` as the gradient of :math:`\sum_j F_j` minus ``a``); for softmax
probabilities :math:`\sum_j F_j = 1`, so :math:`b = -a` exactly and one backward pass on
the batch itself suffices. :func:`forward_derivative` gives the whole Jacobian, with one
backward pass on a batch replicated once per class.

Everything here works on eagerpy tensors, so one implementation serves every framework
that foolbox supports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Literal

import eagerpy as ep
from foolbox.models import JAXModel, Model, PyTorchModel, TensorFlowModel

from paperports._checks import DtypeError, check_int

__all__ = [
    "Outputs",
    "best_aligned_pairs",
    "best_features",
    "best_pairs",
    "check_classes",
    "check_inputs",
    "forward_derivative",
    "saliency_map",
    "target_gradients",
]

Outputs = Literal["logits", "probabilities"]
"""Which outputs of the model the forward derivative differentiates."""

DEFAULT_CHUNK_SIZE = 1 << 22
"""Pair-matrix entries evaluated at once (per batch) by :func:`best_pairs`."""


def _check_outputs(outputs: str) -> None:
    if outputs not in ("logits", "probabilities"):
        raise ValueError(f"outputs must be 'logits' or 'probabilities', got {outputs!r}")


# foolbox's framework models and the eagerpy tensors each runs on
_FRAMEWORKS = (
    (PyTorchModel, ep.PyTorchTensor, "torch.Tensor"),
    (JAXModel, ep.JAXTensor, "jax.Array"),
    (TensorFlowModel, ep.TensorFlowTensor, "tf.Tensor"),
)


def check_inputs(x: ep.Tensor, model: Model) -> None:
    """Inputs that an attack can work on: a batch of floating-point values, none NaN or
    infinite, of the framework the model runs in (a foolbox ``PyTorchModel`` given NumPy
    arrays fails deep inside foolbox with an ``AttributeError``)."""
    for model_type, tensor, name in _FRAMEWORKS:
        if isinstance(model, model_type) and not isinstance(x, tensor):
            raise TypeError(
                f"inputs are {type(x.raw).__module__}.{type(x.raw).__name__}, but the model "
                f"is a foolbox {model_type.__name__}, which runs on {name}: pass the inputs "
                f"(and the labels) as {name}"
            )
    if x.ndim < 1:
        raise ValueError(f"inputs must be a batch (N, ...), got a scalar of shape {x.shape}")
    if not _is_floating(x):
        raise DtypeError(f"inputs must be floating-point, got dtype {x.dtype}")
    if x.shape[0] and bool(ep.logical_or(ep.isnan(x), ep.isinf(x)).any().item()):
        raise ValueError("inputs hold NaN or infinite values; an attack needs real inputs")


def _is_floating(x: ep.Tensor) -> bool:
    return "float" in str(x.dtype) or "bfloat" in str(x.dtype)


def check_classes(name: str, classes: ep.Tensor, n_inputs: int, num_classes: int) -> None:
    """Integer classes, one per input, in ``[0, num_classes)`` (a class of -1 would index
    the last class, silently)."""
    if classes.shape != (n_inputs,):
        raise ValueError(f"{name} must have shape ({n_inputs},), got {tuple(classes.shape)}")
    if _is_floating(classes) or "bool" in str(classes.dtype):
        raise DtypeError(f"{name} must hold integer classes, got dtype {classes.dtype}")
    if n_inputs == 0:
        return
    lo, hi = classes.min().item(), classes.max().item()
    if lo < 0 or hi >= num_classes:
        raise ValueError(
            f"{name} must lie in [0, {num_classes}) for a model with {num_classes} classes; "
            f"got values in [{lo}, {hi}]"
        )


def _scores(z: ep.Tensor, outputs: Outputs) -> ep.Tensor:
    return z if outputs == "logits" else ep.softmax(z, axis=-1)


def class_scores(model: Model, x: ep.Tensor) -> ep.Tensor:
    """The model's outputs on ``x``, checked to be a batch of class scores ``(N, K)``.

    This is the attack's first call of the model: an error there (inputs of another dtype
    or shape than the model takes) is re-raised naming the inputs."""
    try:
        z = model(x)
    except (RuntimeError, TypeError, ValueError) as err:
        error = DtypeError if "type" in str(err).lower() else ValueError
        raise error(
            f"the model could not run on the inputs (shape {tuple(x.shape)}, dtype {x.dtype}): "
            f"{err}"
        ) from err
    if z.ndim != 2 or z.shape[0] != x.shape[0] or z.shape[1] < 2:
        raise ValueError(
            "the model must return a batch of class scores of shape (batch, num_classes) with "
            f"num_classes >= 2; for inputs of shape {tuple(x.shape)} it returned shape "
            f"{tuple(z.shape)} (for models returning an object with .logits, wrap them in "
            "paperports.adapters.foolbox_models.LogitsModel)"
        )
    return z


def target_gradients(
    model: Model, inputs: Any, targets: Any, *, outputs: Outputs = "logits"
) -> tuple[Any, Any]:
    r"""The two rows of the forward derivative that JSMA needs: :math:`a` and :math:`b`.

    Args:
        model: A foolbox model.
        inputs: A batch of inputs ``(N, ...)``.
        targets: The target class of each input ``(N,)``.
        outputs: Differentiate ``"logits"`` or softmax ``"probabilities"``.

    Returns:
        ``(a, b)``, each shaped like ``inputs``: :math:`\partial F_t / \partial x` and
        :math:`\sum_{j \neq t} \partial F_j / \partial x`.
    """
    _check_outputs(outputs)
    (x, t), restore_type = ep.astensors_(inputs, targets)
    check_inputs(x, model)
    check_classes("targets", t, len(x), class_scores(model, x[:1]).shape[-1])
    z, _, a, b = outputs_and_gradients(model, x, lambda z: t, outputs)
    if outputs == "probabilities":  # undo the per-row 1 / p_t of the log-probability
        p_t = (ep.softmax(z, axis=-1) * ep.onehot_like(z, t)).sum(axis=-1)
        scale = p_t.reshape((-1,) + (1,) * (a.ndim - 1))
        a, b = a * scale, b * scale
    return restore_type(a), restore_type(b)


def outputs_and_gradients(
    model: Model,
    x: ep.Tensor,
    choose_targets: Callable[[ep.Tensor], ep.Tensor],
    outputs: Outputs,
    *,
    weighted: bool = False,
) -> tuple[ep.Tensor, ep.Tensor, ep.Tensor, ep.Tensor]:
    r"""One forward and one backward pass: the model's outputs ``z`` at ``x``, the targets
    ``choose_targets(z)``, and :math:`a`, :math:`b` for those targets.

    The attack uses ``z`` to decide whether to stop, so a step costs a single pass.

    ``weighted`` (logits only): WJSMA's
    :math:`b = \sum_{j \neq t} \mathrm{softmax}(z)_j \, \partial z_j / \partial x`, the
    probabilities held constant in the backward pass.

    For ``"probabilities"`` the gradients are those of :math:`\log p_t`, that is
    :math:`a / p_t` and :math:`b / p_t`: a positive factor per input, which changes no
    decision of the saliency rules, while :math:`\partial p_t` itself underflows (and its
    pair products underflow to exact ties at 0) when the target is far from winning.
    """
    if weighted and outputs != "logits":
        raise ValueError(f"weighted=True weights the logits' derivatives; got outputs={outputs!r}")

    n = len(x)
    chosen: list[ep.Tensor] = []

    if outputs == "probabilities":

        def target_log_prob(xx: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
            z = model(xx)
            chosen.append(choose_targets(z))
            logp = ep.log_softmax(z, axis=-1)
            return (logp * ep.onehot_like(logp, chosen[0])).sum(), z

        _, z, a = ep.value_aux_and_grad(target_log_prob, x)
        return z, chosen[0], a, -a  # sum_j p_j = 1, so sum_{j != t} dp_j = -dp_t exactly

    # One backward pass on [x; x]: the first half gives dF_t, the second d(sum_j F_j), or
    # sum_{j != t} p_j dz_j with the probabilities p held constant (weighted).
    def stacked(xx: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
        z = model(xx)
        chosen.append(choose_targets(z[:n]))
        target = ep.onehot_like(z[:n], chosen[0])
        if weighted:
            others = stop_gradient(ep.softmax(z[n:], axis=-1)) * (1 - target)
        else:
            others = ep.ones_like(z[n:])
        return (z * ep.concatenate([target, others])).sum(), z[:n]

    _, z, g = ep.value_aux_and_grad(stacked, ep.concatenate([x, x]))
    a = g[:n]
    return z, chosen[0], a, g[n:] if weighted else g[n:] - a


def forward_derivative(model: Model, inputs: Any, *, outputs: Outputs = "logits") -> Any:
    r"""The Jacobian :math:`\partial F_j / \partial x_i` of the model at ``inputs``.

    Computed with one backward pass on the batch replicated once per class.

    Returns:
        A tensor of shape ``(N, K, *input_shape)``.
    """
    _check_outputs(outputs)
    x, restore_type = ep.astensor_(inputs)
    check_inputs(x, model)
    n = len(x)
    k = class_scores(model, x[:1]).shape[-1]
    tiled = ep.concatenate([x] * k)
    classes = ep.concatenate([ep.full(x, (n,), float(c)) for c in range(k)]).astype(int)

    def selected(xx: ep.Tensor) -> ep.Tensor:
        f = _scores(model(xx), outputs)
        return (f * ep.onehot_like(f, classes)).sum()

    _, g = ep.value_and_grad(selected, tiled)
    jac = g.reshape((k, n, *x.shape[1:]))
    return restore_type(ep.stack([jac[c] for c in range(k)], axis=1))


def saliency_map(
    model: Model,
    inputs: Any,
    targets: Any,
    *,
    increase: bool = True,
    outputs: Outputs = "logits",
) -> Any:
    r"""The adversarial saliency map :math:`S(X, t)` of the paper, shaped like ``inputs``.

    Args:
        increase: The map for increasing features (:math:`\theta > 0`); ``False`` gives the
            decreasing variant, with the inequalities reversed.
    """
    a, b = target_gradients(model, inputs, targets, outputs=outputs)
    (a_, b_), restore_type = ep.astensors_(a, b)
    if not increase:
        a_, b_ = -a_, -b_
    keep = ep.logical_and(a_ >= 0, b_ <= 0)
    return restore_type(ep.where(keep, a_ * b_.abs(), ep.zeros_like(a_)))


def best_features(a: ep.Tensor, b: ep.Tensor, domain: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
    r"""Single-feature rule: :math:`\arg\max_i S(X, t)_i` over the search domain.

    Args:
        a, b: :math:`a` and :math:`b` of shape ``(N, n)``, already multiplied by the sign of
            :math:`\theta`.
        domain: Boolean ``(N, n)``, the features that may still change.

    Returns:
        ``(p, found)``: the chosen feature ``(N,)`` and whether a feature with
        :math:`a_p > 0, b_p < 0` exists ``(N,)``.
    """
    _check_search_inputs(a, b, domain)
    valid = ep.logical_and(domain, ep.logical_and(a > 0, b < 0))
    score = ep.where(valid, a * (-b), ep.full_like(a, -ep.inf))
    return score.argmax(axis=-1), valid.any(axis=-1)


def best_pairs(
    a: ep.Tensor,
    b: ep.Tensor,
    domain: ep.Tensor,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    tie_candidates: int = 1024,
) -> tuple[ep.Tensor, ep.Tensor, ep.Tensor]:
    r"""The paper's pair rule, exactly, without building the ``n x n`` pair matrix.

    Among pairs :math:`p \neq q` in the domain with :math:`\alpha = a_p + a_q > 0` and
    :math:`\beta = b_p + b_q < 0`, returns the one maximising :math:`\alpha |\beta|`; ties go
    to the smallest ``(min(p, q), max(p, q))``, as a row-major argmax over the dense upper
    triangle would.

    How it avoids the ``n x n`` matrix. Write :math:`u = a`, :math:`v = -b`; a pair scores
    :math:`(u_p + u_q)(v_p + v_q)`, increasing in every coordinate where it is valid. So if
    two features other than ``q`` both *dominate* ``p`` (:math:`u_j \geq u_p`,
    :math:`v_j \geq v_p`, one strictly), one of them pairs with ``q`` strictly better than
    ``p`` does: a best pair consists of features dominated by at most one other, the first
    two layers of the points' Pareto front. For gradients these are a few dozen of the
    ``n`` features. One sort by ``u`` and two running maxima find them (a feature is
    dropped when two features ahead of it in the sort have a larger ``v``), and the search
    evaluates every pair among them, in blocks of at most ``chunk_size`` entries.

    Where ``b = -a`` exactly (softmax probabilities), the score is :math:`\alpha^2` and the
    pair is the two largest ``a``, found without a sort. Where many features are exact
    copies of each other (interchangeable features, as in a model that averages its
    inputs) the front is large; then the search evaluates the front's features in order of
    the bound :math:`(u_p + U)(v_p + V)` (with :math:`U, V` the maxima), growing fourfold
    from 64 until the best pair beats the next bound. More than ``tie_candidates`` features
    tied exactly at that bound are the one documented exception: the pair has the best
    score, but the tie is broken among the ``tie_candidates`` features ``topk`` returns,
    not by the smallest index.

    Args:
        a, b: :math:`a` and :math:`b` of shape ``(N, n)``, already multiplied by the sign of
            :math:`\theta`.
        domain: Boolean ``(N, n)``, the features that may still change.
        chunk_size: The most pair-matrix entries evaluated at once.
        tie_candidates: See above.

    Returns:
        ``(p, q, found)``, each ``(N,)``; where ``found`` is false no pair satisfies the rule.
    """
    check_int("chunk_size", chunk_size, minimum=1, who="best_pairs")
    check_int("tie_candidates", tie_candidates, minimum=1, who="best_pairs")
    _check_search_inputs(a, b, domain)
    n_rows, n = a.shape
    zero_key = ep.zeros(a, (n_rows,)).astype(int)
    score = ep.full(a, (n_rows,), -ep.inf)
    key = ep.full(zero_key, (n_rows,), n * n)
    if n < 2:
        return zero_key, zero_key, score > -ep.inf
    nb = -b
    # probabilities: v = u, the two largest (the first column rules out logits cheaply)
    if bool((a[:, :1] == nb[:, :1]).all().item()) and bool((a == nb).all().item()):
        return best_aligned_pairs(a, domain)
    neg_inf = ep.full_like(a, -ep.inf)
    # u = a, v = -b in the domain, -inf outside: every sum with a feature outside is -inf
    u, v = ep.where(domain, a, neg_inf), ep.where(domain, nb, neg_inf)
    lead_u, lead_v = _leads(u), _leads(v)  # (values, indices) of 64 leading features
    top_u, top_v = _row_max(u), _row_max(v)  # (N, 1)
    # even twice the largest u (or v) is not above 0: provably no valid pair in the row
    possible = ep.logical_and(top_u[:, 0] > 0, top_v[:, 0] > 0)
    bu, bv = u + top_u, v + top_v  # each feature with the best partner it could have
    can_pair = ep.logical_and(bu > 0, bv > 0)  # false outside the domain (-inf)
    rows = ep.arange(zero_key, n_rows)[possible]
    if len(rows):
        u, v, can_pair = take_rows(u, rows), take_rows(v, rows), take_rows(can_pair, rows)
        leads = [
            (m1, m2, take_rows(values, rows), take_rows(at, rows))
            for m1, m2, (values, at) in ((u, v, lead_u), (v, u, lead_v))
        ]
        idx, member = _front(u, v, can_pair, leads)
        if idx.shape[1] <= tie_candidates:  # every pair among the front, at once
            s, k = _best_among(u, v, member, idx, chunk_size, take_ok=False)
        else:  # many exact copies: the bound-ordered search
            bound = ep.where(can_pair, take_rows(bu * bv, rows), neg_inf[: len(rows)])
            s, k = _bound_search(u, v, can_pair, bound, chunk_size, tie_candidates)
        score, key = set_rows(score, rows, s), set_rows(key, rows, k)
    found = score > -ep.inf
    key = ep.where(found, key, zero_key)
    p = key // n
    return p, key - p * n, found


def _row_max(x: ep.Tensor) -> ep.Tensor:
    """Each row's largest value, ``(N, 1)`` (in torch without the indices eagerpy's ``max``
    also computes)."""
    if framework_of(x) == "torch":
        top: ep.Tensor = ep.astensor(x.raw.amax(dim=-1, keepdim=True))
        return top
    return x.max(axis=-1, keepdims=True)


LEAD_SAMPLE = 4096
"""About how many features :func:`_front`'s filter draws its leading set from."""


def _leads(x: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
    """The 64 largest values of ``x`` (``(N, n)``) among every ``stride``-th feature, with
    ``stride`` chosen to look at about :data:`LEAD_SAMPLE` features, and their indices in
    ``x``: the leading set of :func:`_front`'s filter, which any set of features makes
    valid (a larger sample filters more, at the cost of a larger ``topk``)."""
    n = x.shape[1]
    stride = max(1, n // LEAD_SAMPLE)
    values, at = topk(x[:, ::stride], min(64, -(-n // stride)))
    return values, at * stride


def _front(
    u: ep.Tensor,
    v: ep.Tensor,
    ok: ep.Tensor,
    leads: list[tuple[ep.Tensor, ep.Tensor, ep.Tensor, ep.Tensor]] | None = None,
) -> tuple[ep.Tensor, ep.Tensor]:
    """The features (among ``ok``) that at most one other dominates: ``(idx, member)``,
    each ``(N, m)``, the features' indices and whether each is one (``m`` is the largest
    count over the rows; the rest pads).

    A feature is dropped when two features with ``u`` at least as large have a strictly
    larger ``v``; ties in ``u`` may keep a few more than the exact front, never fewer.
    First a cheap filter: a feature whose ``u`` is below the 64 largest and whose ``v``
    is below the second largest ``v`` among those 64 is dominated twice (and the same
    with ``u`` and ``v`` swapped). Then the survivors are sorted by ``u``, and a feature is
    dropped when the second largest ``v`` ahead of it exceeds its own.

    ``leads``: for the filter, ``(lead, other, values, indices)`` for ``u`` and for ``v``:
    both masked to ``-inf`` outside a set of features containing ``ok`` (any feature of
    the domain may dominate), and the values and indices of a leading set of features.
    Any set makes the filter valid: a feature below all of the set's ``lead`` values and
    below the second largest ``other`` value among them is dominated by two of them. The
    64 largest values of ``lead`` filter the most; :func:`_leads` takes them among a
    sample of the features, which costs a fraction of a ``topk`` over all of them."""
    n = u.shape[1]
    keep = ok
    if n > 256:
        if leads is None:
            neg_inf = ep.full_like(u, -ep.inf)
            mu, mv = ep.where(ok, u, neg_inf), ep.where(ok, v, neg_inf)
            leads = [(m1, m2, *_leads(m1)) for m1, m2 in ((mu, mv), (mv, mu))]
        for lead, other, values, top in leads:
            second = topk(other.take_along_axis(top, axis=-1), 2)[0][:, 1:]
            twice = ep.logical_and(lead < values[:, -1:], other < second)
            keep = ep.logical_and(keep, ep.logical_not(twice))
    idx, keep = _true_positions(keep)  # (N, m), m the most survivors in a row: small
    su, sv = u.take_along_axis(idx, axis=-1), v.take_along_axis(idx, axis=-1)
    pad = ep.full_like(su[:, :1], -ep.inf)
    su, sv = ep.where(keep, su, pad), ep.where(keep, sv, pad)
    order = (-su).argsort(axis=-1)  # decreasing u; -(-inf): the padding goes last
    idx, sv = idx.take_along_axis(order, axis=-1), sv.take_along_axis(order, axis=-1)
    keep = keep.take_along_axis(order, axis=-1)
    first = _cummax(sv)  # running maximum, including the feature itself
    before = ep.concatenate([pad, first[:, :-1]], axis=-1)
    # running second largest: each feature raises it to min(the maximum before it, itself)
    second = _cummax(ep.minimum(before, sv))
    second_before = ep.concatenate([pad, second[:, :-1]], axis=-1)
    return _compact(idx, ep.logical_and(keep, ep.logical_not(second_before > sv)))


def _true_positions(keep: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
    """``_compact(arange(n), keep)``: the positions of each row's true entries, first first,
    and which of the ``(N, size)`` entries are one. One pass over ``keep`` in torch (its
    ``nonzero``), a ``topk`` elsewhere."""
    if framework_of(keep) != "torch":
        positions = ep.arange(keep, keep.shape[1])[None, :] + ep.zeros_like(keep).astype(int)
        return _compact(positions, keep)
    import torch

    raw = keep.raw
    rows, cols = raw.nonzero(as_tuple=True)  # row-major: each row's positions in order
    counts = torch.bincount(rows, minlength=raw.shape[0])
    size = max(1, int(counts.max().item())) if len(counts) else 1
    rank = torch.arange(len(rows), device=raw.device) - (counts.cumsum(0) - counts)[rows]
    idx = torch.zeros((raw.shape[0], size), dtype=torch.long, device=raw.device)
    taken = torch.zeros((raw.shape[0], size), dtype=torch.bool, device=raw.device)
    idx[rows, rank], taken[rows, rank] = cols, True
    return ep.astensor(idx), ep.astensor(taken)


def _compact(idx: ep.Tensor, keep: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor]:
    """The entries of ``idx`` (``(N, m)``) where ``keep``, first in each row, cut to the
    largest count over the rows: ``(idx, keep)``.

    In JAX the width is rounded up to a power of two (at most ``m``), the rest padding with
    ``keep`` false: JAX compiles every operation for each new shape, and the front's size
    changes at every step of the attack, so exact widths would compile the whole search
    again at each step; rounded, a few widths recur and their compilations are reused."""
    m = idx.shape[1]
    size = max(1, int(count_true(keep).max().item()))
    if framework_of(idx) == "jax":
        size = min(m, 1 << (size - 1).bit_length())
    if size == m:
        return idx, keep
    position = ep.arange(idx, m)[None, :]
    first = topk(ep.where(keep, -position, ep.full_like(position, -m)), size)[1]
    return idx.take_along_axis(first, axis=-1), keep.take_along_axis(first, axis=-1)


def best_aligned_pairs(a: ep.Tensor, domain: ep.Tensor) -> tuple[ep.Tensor, ep.Tensor, ep.Tensor]:
    r""":func:`best_pairs` where :math:`b = -a` (softmax probabilities): the score is
    :math:`(a_p + a_q)^2`, so the best pair is the two largest ``a`` in the domain, if they
    sum to more than 0; among ties, the smallest indices. Returns ``(p, q, found)``."""
    _check_search_inputs(a, a, domain)
    n = a.shape[1]
    if n < 2:
        none = ep.zeros(a, (a.shape[0],)).astype(int)
        return none, none, none > 0
    masked = ep.where(domain, a, ep.full_like(a, -ep.inf))
    top, top_idx = topk(masked, min(n, 3))
    if n == 2 or bool((top[:, 2] < top[:, 1]).all().item()):
        p, q = top_idx[:, 0], top_idx[:, 1]  # no ties: the two largest are the pair
    else:
        cols = ep.arange(a, n)[None, :].astype(int)
        none = ep.full_like(cols, n)
        p = ep.where(masked == top[:, :1], cols, none).min(axis=-1)
        later = ep.logical_and(masked == top[:, 1:2], cols != p[:, None])
        q = ep.where(later, cols, none).min(axis=-1)
    alpha = top[:, 0] + top[:, 1]
    valid = ep.logical_and(alpha > 0, top[:, 1] > -ep.inf)
    zero = ep.zeros_like(p)
    first, second = ep.minimum(p, q), ep.maximum(p, q)  # the dense search's order
    return ep.where(valid, first, zero), ep.where(valid, second, zero), valid


def _bound_search(
    u: ep.Tensor,
    v: ep.Tensor,
    ok: ep.Tensor,
    bound: ep.Tensor,
    chunk_size: int,
    tie_candidates: int,
) -> tuple[ep.Tensor, ep.Tensor]:
    """Pairs among the ``M`` features of largest ``bound``, ``M`` growing fourfold from 64
    until a row's best pair beats the next bound (see :func:`best_pairs`)."""
    n_rows, n = u.shape
    score = ep.full(u, (n_rows,), -ep.inf)
    key = ep.full(ep.zeros(u, (n_rows,)).astype(int), (n_rows,), n * n)
    rows = ep.arange(key, n_rows)
    m = min(n, 64)
    while len(rows):
        bounds, cand = topk(take_rows(bound, rows), min(n, m + 1))
        u_, v_, ok_ = take_rows(u, rows), take_rows(v, rows), take_rows(ok, rows)
        s, k = _best_among(u_, v_, ok_, cand[:, :m], chunk_size)
        score, key = set_rows(score, rows, s), set_rows(key, rows, k)
        if m >= n:
            break
        nxt = bounds[:, m]
        done = ep.logical_or(s > nxt, nxt == -ep.inf)
        if m >= tie_candidates:
            done = ep.logical_or(done, s == nxt)
        rows = rows[ep.logical_not(done)]
        m = min(n, 4 * m)
    return score, key


def in_layout_of(x: ep.Tensor, like: ep.Tensor) -> ep.Tensor:
    """``x``, inputs of ``like``'s shape built from flattened rows, in ``like``'s memory
    layout: a channels-last torch batch (as foolbox's ``samples`` and many image pipelines
    give) stays channels-last, so the model runs the convolutions it runs on the caller's
    own tensor, which can be much faster than those on the default layout. Values are
    unchanged; other frameworks have no such layout."""
    if framework_of(like) != "torch" or like.ndim not in (4, 5):
        return x
    import torch

    layout = torch.channels_last if like.ndim == 4 else torch.channels_last_3d
    raw = like.raw
    if raw.is_contiguous() or not raw.is_contiguous(memory_format=layout):
        return x
    laid_out: ep.Tensor = ep.astensor(x.raw.contiguous(memory_format=layout))
    return laid_out


def topk(x: ep.Tensor, k: int) -> tuple[ep.Tensor, ep.Tensor]:
    """``x.topk(k)``: the ``k`` largest values along the last axis, largest first, and their
    indices, right in every framework. eagerpy's NumPy ``topk`` takes the last ``k`` entries
    of an ``argpartition`` around the k-th smallest, which need not be the ``k`` largest (which
    ones it returns depends on NumPy's partition for the machine's CPU): NumPy sorts instead."""
    if framework_of(x) != "numpy":
        return x.topk(k)
    import numpy as np

    idx = np.argsort(-x.raw, axis=-1, kind="stable")[..., :k]
    return ep.astensor(np.take_along_axis(x.raw, idx, axis=-1)), ep.astensor(idx)


def framework_of(x: ep.Tensor) -> str:
    """``"torch"``, ``"numpy"``, ``"jax"``, ``"tensorflow"`` or ``"other"``: the framework of
    ``x``'s raw tensor, for the few operations eagerpy lacks (a running maximum, a scatter,
    a stop-gradient)."""
    module = type(x.raw).__module__
    if module.startswith("torch"):
        return "torch"
    if module.startswith("numpy"):
        return "numpy"
    if module.startswith(("jax", "jaxlib")):
        return "jax"
    if module.startswith("tensorflow"):
        return "tensorflow"
    return "other"


def count_true(mask: ep.Tensor) -> ep.Tensor:
    """How many entries of each row of a boolean ``(N, n)`` are true, ``(N,)``: summed as
    booleans where the framework can (no integer copy of the mask)."""
    framework = framework_of(mask)
    if framework == "torch":  # its sum of booleans casts them to int64 first
        import torch

        counted: ep.Tensor = ep.astensor(torch.count_nonzero(mask.raw, dim=-1))
        return counted
    if framework in ("numpy", "jax"):
        return mask.sum(axis=-1)
    return mask.astype(int).sum(axis=-1)


def stop_gradient(x: ep.Tensor) -> ep.Tensor:
    """``x`` as a constant for the backward pass, in its own framework (eagerpy has no
    stop-gradient)."""
    framework = framework_of(x)
    raw: Any
    if framework == "torch":
        raw = x.raw.detach()
    elif framework == "jax":
        raw = importlib.import_module("jax").lax.stop_gradient(x.raw)
    elif framework == "tensorflow":
        raw = importlib.import_module("tensorflow").stop_gradient(x.raw)
    elif framework == "numpy":  # eagerpy's NumPy tensors have no gradients at all
        return x
    else:
        raise NotImplementedError(f"no stop-gradient for tensors of type {type(x.raw).__name__}")
    constant: ep.Tensor = ep.astensor(raw)
    return constant


def _cummax(x: ep.Tensor) -> ep.Tensor:
    """The running maximum along the last axis, in the tensor's own framework."""
    raw = x.raw
    framework = framework_of(x)
    if framework == "torch":
        import torch

        return ep.astensor(torch.cummax(raw, dim=-1).values)
    if framework == "numpy":
        import numpy as np

        return ep.astensor(np.maximum.accumulate(raw, axis=-1))
    if framework == "jax":
        import jax

        return ep.astensor(jax.lax.cummax(raw, axis=raw.ndim - 1))
    shift, out = 1, x  # any other framework: a log-step scan
    while shift < x.shape[-1]:
        pad = ep.full_like(out[:, :shift], -ep.inf)
        out = ep.maximum(out, ep.concatenate([pad, out[:, :-shift]], axis=-1))
        shift *= 2
    return out


def _check_search_inputs(a: ep.Tensor, b: ep.Tensor, domain: ep.Tensor) -> None:
    if a.ndim != 2 or b.shape != a.shape or domain.shape != a.shape:
        raise ValueError(
            f"a, b and domain must be (N, n) of one shape, got {a.shape}, {b.shape} and "
            f"{domain.shape}"
        )
    if "bool" not in str(domain.dtype):
        raise DtypeError(f"domain must be boolean, got dtype {domain.dtype}")


def set_rows(full: ep.Tensor, rows: ep.Tensor, values: ep.Tensor) -> ep.Tensor:
    """``full`` with ``full[rows] = values``, in operations every eagerpy backend has.

    ``rows`` are distinct and increasing (a boolean selection of ``arange``), so all of
    them means every row, in order. (``ep.index_update`` calls ``jax.ops.index_update``,
    which current JAX no longer has.)
    """
    if len(rows) == 0:
        return full
    if len(rows) == len(full):
        return values
    hits = ep.arange(rows, len(full))[:, None] == rows[None, :]  # (N, R)
    has = hits.any(axis=-1)
    source = hits.astype(int).argmax(axis=-1)  # the entry of `rows` that names each row
    mask = has.reshape((-1,) + (1,) * (full.ndim - 1))
    return ep.where(mask, values[source], full)


def scatter_rows(full: ep.Tensor, idx: ep.Tensor, values: ep.Tensor) -> ep.Tensor:
    """``full`` (``(N, n)``) with ``values[r, k]`` at ``[r, idx[r, k]]``: each framework's own
    scatter (eagerpy has none); where an index repeats in a row, its values must agree."""
    raw, where, what = full.raw, idx.raw, values.raw
    framework = framework_of(full)
    out: Any = None
    if framework == "torch":
        out = raw.scatter(1, where, what)
    elif framework == "jax":
        rows = importlib.import_module("jax.numpy").arange(raw.shape[0])[:, None]
        out = raw.at[rows, where].set(what)
    elif framework == "numpy":
        import numpy as np

        out = np.array(raw, copy=True)
        np.put_along_axis(out, np.asarray(where), np.asarray(what), axis=1)
    if out is not None:
        scattered: ep.Tensor = ep.astensor(out)
        return scattered
    cols = ep.arange(idx, full.shape[1])[None, :]
    for k in range(idx.shape[1]):  # any other framework: one masked pass per column
        full = ep.where(cols == idx[:, k : k + 1], values[:, k : k + 1], full)
    return full


def take_rows(full: ep.Tensor, rows: ep.Tensor) -> ep.Tensor:
    """``full[rows]`` for distinct, increasing ``rows``, without a copy when they are all
    of them."""
    return full if len(rows) == len(full) else full[rows]


def _best_among(
    u: ep.Tensor,
    v: ep.Tensor,
    ok: ep.Tensor,
    idx: ep.Tensor,
    chunk_size: int,
    *,
    take_ok: bool = True,
) -> tuple[ep.Tensor, ep.Tensor]:
    """Best valid pair among the features ``idx`` ``(N, m)``: (score, key = p * n + q).
    ``ok`` masks the features, ``(N, n)``, or with ``take_ok=False`` the entries of ``idx``."""
    n_rows, n = u.shape
    m = idx.shape[-1]
    uu = u.take_along_axis(idx, axis=-1)
    vv = v.take_along_axis(idx, axis=-1)
    okk = ok.take_along_axis(idx, axis=-1) if take_ok else ok
    best = ep.full(u, (n_rows,), -ep.inf)
    best_key = ep.full(idx, (n_rows,), n * n)
    rows = max(1, chunk_size // max(1, n_rows * m))
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        alpha = uu[:, r0:r1, None] + uu[:, None, :]
        beta = vv[:, r0:r1, None] + vv[:, None, :]
        ip, iq = idx[:, r0:r1, None], idx[:, None, :]
        valid = ep.logical_and(okk[:, r0:r1, None], okk[:, None, :])
        valid = ep.logical_and(valid, ip != iq)
        valid = ep.logical_and(valid, ep.logical_and(alpha > 0, beta > 0))
        score = ep.where(valid, alpha * beta, ep.full_like(alpha, -ep.inf))
        key = ep.minimum(ip, iq) * n + ep.maximum(ip, iq)
        chunk_best = score.reshape((n_rows, -1)).max(axis=-1)
        at_best = ep.logical_and(valid, score == chunk_best[:, None, None])
        chunk_key = ep.where(at_best, key, ep.full_like(key, n * n)).reshape((n_rows, -1))
        chunk_key = chunk_key.min(axis=-1)
        better = ep.logical_or(
            chunk_best > best, ep.logical_and(chunk_best == best, chunk_key < best_key)
        )
        better = ep.logical_and(better, chunk_best > -ep.inf)
        best = ep.where(better, chunk_best, best)
        best_key = ep.where(better, chunk_key, best_key)
    return best, best_key
