"""What the JSMA experiments share: the attacked set, one timed attack run, ART's anchor."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import foolbox as fb
import numpy as np
import torch
from torch import nn

from paperports.integrations.foolbox import SaliencyMapAttack

__all__ = ["AttackRun", "all_other_targets", "run_art", "run_ours"]


@dataclass
class AttackRun:
    """The outcome of attacking ``N`` (image, target) pairs."""

    name: str
    adversarial: torch.Tensor
    success: np.ndarray
    l0_fraction: np.ndarray
    seconds: float
    steps: np.ndarray | None = None
    """Our attack's steps per sample (``None`` for ART)."""
    fallback_steps: np.ndarray | None = None
    """How many of them the largest-alpha fallback chose (no pair met the paper's rule)."""
    epsilons: list[int] | None = None
    """L0 budgets (features) that the same calls judged, foolbox's way (``None``: none)."""
    curve: np.ndarray | None = None
    """``(K, N)``: the success at each of ``epsilons``, from the attack's own results."""

    @property
    def fallback_share(self) -> float:
        """The fraction of all steps that the fallback chose (NaN for ART)."""
        if self.steps is None or self.fallback_steps is None or not self.steps.sum():
            return float("nan")
        return float(self.fallback_steps.sum() / self.steps.sum())

    @property
    def fallback_samples(self) -> float:
        """The fraction of samples where the fallback chose at least one step."""
        if self.fallback_steps is None:
            return float("nan")
        return float((self.fallback_steps > 0).mean())

    @property
    def success_rate(self) -> float:
        return float(self.success.mean())

    @property
    def mean_l0(self) -> float:
        """Mean fraction of features changed over the successful samples (the paper's)."""
        return float(self.l0_fraction[self.success].mean()) if self.success.any() else float("nan")

    def against(self, other: AttackRun) -> dict[str, float]:
        """Success and mean L0 beside ``other``'s on the same inputs: each run's own, and
        the mean L0 of both over the inputs both fooled (a run that fools more inputs fools
        harder ones, which raise its own mean; the shared inputs compare like with like)."""
        both = self.success & other.success

        def shared(run: AttackRun) -> float:
            return float(run.l0_fraction[both].mean()) if both.any() else float("nan")

        return {
            "success": self.success_rate,
            "mean_l0": self.mean_l0,
            f"{other.short_name}_success": other.success_rate,
            f"{other.short_name}_mean_l0": other.mean_l0,
            "both_succeeded": int(both.sum()),
            "mean_l0_both_succeeded": shared(self),
            f"{other.short_name}_mean_l0_both_succeeded": shared(other),
        }

    @property
    def short_name(self) -> str:
        """``"art"`` for ART's attack, the name's first word otherwise, for result keys."""
        return "art" if self.name.startswith("ART") else self.name.split()[0].lower()

    @property
    def images_per_second(self) -> float:
        return len(self.success) / self.seconds

    def success_within(self, budgets: np.ndarray) -> np.ndarray:
        """Success rate had the budget been each fraction in ``budgets`` (one greedy run
        decides every smaller budget: a success needing ``d`` succeeds for budgets >= d)."""
        return np.array([(self.success & (self.l0_fraction <= b + 1e-12)).mean() for b in budgets])

    def summary(self) -> dict[str, Any]:
        curve = {}
        if self.epsilons is not None and self.curve is not None:
            curve = {"curve": {"epsilons": self.epsilons, "success": self.curve.mean(1).tolist()}}
        return curve | {
            "success_rate": self.success_rate,
            "mean_l0_fraction_successful": self.mean_l0,
            "mean_l0_fraction_all": float(self.l0_fraction.mean()),
            "images_per_second": self.images_per_second,
            "seconds": self.seconds,
            "attacks": len(self.success),
            "fallback_step_share": self.fallback_share,
            "fallback_sample_share": self.fallback_samples,
        }


def all_other_targets(
    x: torch.Tensor, y: torch.Tensor, num_classes: int = 10
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every image paired with each class other than its label: ``(x, source, target)``."""
    xs, src, dst = [], [], []
    for t in range(num_classes):
        keep = y != t
        xs.append(x[keep])
        src.append(y[keep])
        dst.append(torch.full_like(y[keep], t))
    return torch.cat(xs), torch.cat(src), torch.cat(dst)


def _outcome(
    name: str, model: nn.Module, x: torch.Tensor, adv: torch.Tensor, t: torch.Tensor, sec: float
) -> AttackRun:
    with torch.no_grad():
        success = (model(adv).argmax(-1) == t).numpy()
    # float64: 113 / 784 must compare equal to the budget floor(784 * 0.145) / 784
    l0 = ((adv != x).flatten(1).sum(1).double() / x[0].numel()).numpy()
    return AttackRun(name, adv, success, l0, sec)


def run_ours(
    name: str,
    model: nn.Module,
    x: torch.Tensor,
    t: torch.Tensor,
    attack: SaliencyMapAttack,
    *,
    batch_size: int = 128,
    progress: Any = None,
    epsilons: list[int] | None = None,
) -> AttackRun:
    """Run ``attack`` targeted on ``(x, t)`` in batches; time it. With ``epsilons`` (L0
    budgets in features), the same calls also judge each of them, foolbox's way: the
    run's ``curve`` is the success at each, a robustness curve from one call per batch."""
    # on the CPU, with the inputs: foolbox would otherwise move the model to a GPU if any
    fmodel = fb.PyTorchModel(model, bounds=(0.0, 1.0), device="cpu")
    starts = range(0, len(x), batch_size)
    it = progress(starts, desc=name, total=len(starts)) if progress else starts
    advs, steps, fallbacks, curves = [], [], [], []
    start = time.perf_counter()
    for i in it:
        crit = fb.criteria.TargetedMisclassification(t[i : i + batch_size])
        if epsilons is None:
            adv, _, _ = attack(fmodel, x[i : i + batch_size], crit, epsilons=None)
        else:
            _, clipped, success = attack(
                fmodel, x[i : i + batch_size], crit, epsilons=[*epsilons, None]
            )
            adv = clipped[-1]
            curves.append(success[:-1].numpy())
        advs.append(adv)
        assert attack.last_statistics is not None
        steps.append(attack.last_statistics.steps)
        fallbacks.append(attack.last_statistics.fallback_steps)
    sec = time.perf_counter() - start
    run = _outcome(name, model, x, torch.cat(advs), t, sec)
    run.steps, run.fallback_steps = np.concatenate(steps), np.concatenate(fallbacks)
    if epsilons is not None:
        run.epsilons, run.curve = list(epsilons), np.concatenate(curves, axis=1)
    return run


def run_art(
    model: nn.Module,
    x: torch.Tensor,
    t: torch.Tensor,
    *,
    theta: float = 1.0,
    gamma: float = 0.145,
    batch_size: int = 512,
) -> AttackRun:
    """The adversarial-robustness-toolbox's ``SaliencyMapMethod`` on the same inputs."""
    from art.attacks.evasion import SaliencyMapMethod
    from art.estimators.classification import PyTorchClassifier

    clf = PyTorchClassifier(
        model,
        loss=nn.CrossEntropyLoss(),
        input_shape=tuple(x.shape[1:]),
        nb_classes=10,
        clip_values=(0.0, 1.0),
    )
    art = SaliencyMapMethod(clf, theta=theta, gamma=gamma, batch_size=batch_size, verbose=False)
    start = time.perf_counter()
    adv = art.generate(x.numpy(), y=np.eye(10, dtype=np.float32)[t.numpy()])
    sec = time.perf_counter() - start
    return _outcome("ART SaliencyMapMethod", model, x, torch.as_tensor(adv), t, sec)
