r"""The paper's measures of how hard inputs and classes are to attack (Section V).

*Adversarial distance* (a predictive measure, computed without running the attack):

.. math::

    A(X, t) = 1 - \frac{1}{M} \sum_{i=1}^{M} 1[S(X, t)_i > 0],

the fraction of the :math:`M` features whose saliency for target :math:`t` is zero. Larger
means fewer useful features, i.e. harder to push towards :math:`t`.

*Hardness* of a source/target class pair, from the attack's results:

.. math::

    H(s, t) = \frac{1}{\Upsilon_K - \Upsilon_1}
              \int_{\Upsilon_1}^{\Upsilon_K} \epsilon(s, t, \Upsilon) \, d\Upsilon,

with :math:`\epsilon(s, t, \Upsilon)` the average distortion (fraction of features changed)
of the samples of class :math:`s` attacked towards :math:`t` when the maximum distortion is
:math:`\Upsilon`, integrated with the trapezoidal rule over a grid :math:`\Upsilon_k`. This
is how we read the paper's definition (an area under the distortion curve, normalised here
by the grid's width). The attack is deterministic and greedy, so one run at the largest
:math:`\Upsilon` gives every smaller one: a sample that needed a fraction :math:`d` of its
features is at distortion :math:`\min(d, \Upsilon)` for the budget :math:`\Upsilon`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import eagerpy as ep
import numpy as np
from foolbox.models import Model

from paperports._checks import check_int
from paperports.integrations.foolbox.saliency import Outputs, class_scores, saliency_map

__all__ = ["adversarial_distance", "adversarial_distance_matrix", "hardness_matrix"]


def adversarial_distance(
    model: Model,
    inputs: Any,
    targets: Any,
    *,
    increase: bool = True,
    outputs: Outputs = "probabilities",
) -> Any:
    r"""The paper's adversarial distance :math:`A(X, t)` of each input, shape ``(N,)``.

    Args:
        model: A foolbox model.
        inputs: A batch ``(N, ...)`` within the model's bounds.
        targets: The target class of each input ``(N,)``.
        increase: Use the saliency map for increasing features (as the attack with
            ``theta > 0`` does).
        outputs: Which outputs the saliency map differentiates (as in the attack).
    """
    s = ep.astensor(saliency_map(model, inputs, targets, increase=increase, outputs=outputs))
    x, restore_type = ep.astensor_(inputs)
    positive = (s.flatten(start=1) > 0).astype(x.dtype).mean(axis=-1)
    return restore_type(1 - positive)


def adversarial_distance_matrix(
    model: Model,
    inputs: Any,
    labels: Any,
    *,
    increase: bool = True,
    outputs: Outputs = "probabilities",
) -> np.ndarray:
    r"""Mean :math:`A(X, t)` over the inputs of each source class, for each target class.

    Returns:
        A ``(K, K)`` array, rows the source (true) class, columns the target; the diagonal is
        NaN.
    """
    x = ep.astensor(inputs)
    y = ep.astensor(labels).numpy()
    k = class_scores(model, x[:1]).shape[-1]
    _check_labels(y, len(x), k, "labels")
    out = np.full((k, k), np.nan)
    for t in range(k):
        targets = ep.full(ep.astensor(labels), (len(x),), t)
        a = ep.astensor(adversarial_distance(model, x, targets, increase=increase, outputs=outputs))
        a_np = a.numpy()
        for s in range(k):
            rows = y == s
            if s != t and rows.any():
                out[s, t] = float(a_np[rows].mean())
    return out


def hardness_matrix(
    l0_fraction: Any,
    source: Any,
    target: Any,
    *,
    num_classes: int,
    max_perturbations: Sequence[float] = (0.01, 0.03, 0.05, 0.075, 0.1, 0.125, 0.145),
) -> np.ndarray:
    r"""The paper's hardness :math:`H(s, t)` from one run of the attack at the largest budget.

    Args:
        l0_fraction: The fraction of features each attacked sample changed ``(N,)`` (for
            failures, what the attack had used when it stopped).
        source: The true class of each sample ``(N,)``.
        target: The class it was attacked towards ``(N,)``; must differ from ``source``.
        num_classes: ``K``.
        max_perturbations: The grid :math:`\Upsilon_1 < \dots < \Upsilon_K` (at least two
            values, the last one the budget the attack ran with).

    Returns:
        A ``(K, K)`` array, rows the source class, columns the target; NaN on the diagonal
        and where no sample was attacked.
    """
    num_classes = check_int("num_classes", num_classes, minimum=2, who="hardness_matrix")
    d, s, t = _numpy(l0_fraction), _numpy(source), _numpy(target)
    grid = np.asarray(max_perturbations, dtype=float)
    if not (d.shape == s.shape == t.shape) or d.ndim != 1:
        raise ValueError(
            "l0_fraction, source and target must be 1-D of the same length; got shapes "
            f"{d.shape}, {s.shape}, {t.shape}"
        )
    if d.dtype.kind not in "fiu":
        raise TypeError(f"l0_fraction must hold numbers, got dtype {d.dtype}")
    if not np.all(np.isfinite(d)) or np.any((d < 0) | (d > 1)):
        raise ValueError(
            "l0_fraction must hold the fraction of features each sample changed, finite "
            f"numbers in [0, 1]; got values in [{np.nanmin(d) if d.size else 0}, "
            f"{np.nanmax(d) if d.size else 0}]"
            + (" and NaN" if d.dtype.kind == "f" and np.isnan(d).any() else "")
        )
    _check_labels(s, len(s), num_classes, "source")
    _check_labels(t, len(t), num_classes, "target")
    if (s == t).any():
        i = int(np.flatnonzero(s == t)[0])
        raise ValueError(
            f"target equals the true class for sample {i} (class {s[i]}): a targeted attack "
            "needs a target other than the sample's own class"
        )
    if (
        grid.ndim != 1
        or len(grid) < 2
        or not np.all(np.isfinite(grid))
        or np.any(np.diff(grid) <= 0)
        or grid[0] <= 0
        or grid[-1] > 1
    ):
        raise ValueError(
            f"max_perturbations must be at least two increasing values in (0, 1], got {grid}"
        )
    # distortion of each sample for each budget on the grid: (N, G)
    eps = np.minimum(d[:, None], grid[None, :])
    out = np.full((num_classes, num_classes), np.nan)
    for src in range(num_classes):
        for dst in range(num_classes):
            rows = (s == src) & (t == dst)
            if rows.any():
                curve = eps[rows].mean(axis=0)
                area = float(np.sum((curve[1:] + curve[:-1]) / 2 * np.diff(grid)))
                out[src, dst] = area / (grid[-1] - grid[0])
    return out


def _numpy(x: Any) -> np.ndarray:
    """A numpy array from a numpy array, a list or tuple, or any tensor eagerpy knows."""
    if isinstance(x, (np.ndarray, list, tuple)):
        return np.asarray(x)
    return np.asarray(ep.astensor(x).numpy())


def _check_labels(y: np.ndarray, n: int, k: int, what: str) -> None:
    if y.shape != (n,):
        raise ValueError(f"{what} must have shape ({n},), got {y.shape}")
    if y.dtype.kind not in "iuf":
        raise TypeError(f"{what} must hold integer classes, got dtype {y.dtype}")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y) & (y == np.round(y))):
        raise ValueError(f"{what} must hold whole class numbers, got {y[y != np.round(y)][:5]}")
    if n and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"{what} must lie in [0, {k}), got values in [{y.min()}, {y.max()}]")
