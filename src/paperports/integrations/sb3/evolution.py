r"""The evolution-strategy route: train an observational-dropout policy without gradients.

The paper trained its agents with an evolution strategy (PEPG, population 384) on the
episode return. :func:`train_with_cma` does the same with CMA-ES from the well-kept ``cma``
package, on the *same* :class:`ObservationalDropoutPolicy` and wrapped environment that
``RecurrentPPO`` uses: the searched vector holds the acting path's parameters (the world
model M, the controller and the action head), the fitness is the mean return of
deterministic episodes, and the best parameters found are written back into the policy, so
``model.save`` and ``predict`` work as after gradient training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from paperports._imports import require
from paperports.integrations.sb3.policies import ObservationalDropoutPolicy

__all__ = ["EvolutionResult", "acting_parameters", "episode_return", "train_with_cma"]


@dataclass
class EvolutionResult:
    """What :func:`train_with_cma` found: the best mean return, and per generation the best
    and mean returns of the population."""

    best_return: float
    best_per_generation: list[float] = field(default_factory=list)
    mean_per_generation: list[float] = field(default_factory=list)
    evaluations: int = 0


def acting_parameters(policy: ObservationalDropoutPolicy) -> list[torch.nn.Parameter]:
    """The parameters that decide actions: M, the controller's hidden layers, the action head."""
    modules = [policy.lstm_actor, policy.mlp_extractor.policy_net, policy.action_net]
    return [p for module in modules for p in module.parameters()]


@torch.no_grad()
def episode_return(
    policy: ObservationalDropoutPolicy, env: gym.Env[Any, Any], seed: int, max_steps: int
) -> float:
    """Return of one deterministic episode of ``policy`` in the wrapped ``env``."""
    obs, _ = env.reset(seed=seed)
    state, start, total = None, np.array([True]), 0.0
    for _ in range(max_steps):
        action, state = policy.predict(obs, state=state, episode_start=start, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        start = np.array([False])
        if terminated or truncated:
            break
    return total


def train_with_cma(
    policy: ObservationalDropoutPolicy,
    make_env: Callable[[], gym.Env[Any, Any]],
    generations: int,
    population: int = 16,
    sigma: float = 0.1,
    episodes: int = 1,
    max_steps: int = 1000,
    seed: int = 0,
) -> EvolutionResult:
    """Search the policy's acting parameters with CMA-ES for the highest mean return.

    Args:
        policy: The policy to train, for example ``RecurrentPPO(...).policy``.
        make_env: Builds the wrapped environment (an :class:`ObservationalDropoutWrapper`).
        generations: CMA-ES iterations.
        population: Candidates per generation (the paper's PEPG used 384).
        sigma: Initial step size around the current parameters.
        episodes: Episodes per fitness evaluation (seeds shared by all candidates of a
            generation, changing between generations).
        max_steps: Step limit per episode.
        seed: Seed of CMA-ES and of the episodes.

    Raises:
        ValueError: non-positive budgets or step size.
    """
    require("sb3", "cma", feature="train_with_cma")
    import cma

    for name, value in [
        ("generations", generations),
        ("population", population),
        ("episodes", episodes),
    ]:
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    params = acting_parameters(policy)
    start = parameters_to_vector(params).detach().cpu().double().numpy()
    strategy = cma.CMAEvolutionStrategy(
        start, sigma, {"popsize": population, "seed": seed + 1, "verbose": -9}
    )
    env = make_env()
    result = EvolutionResult(best_return=-np.inf)
    best = start
    for generation in range(generations):
        seeds = [seed + 1000 * generation + e for e in range(episodes)]
        candidates = strategy.ask()
        returns = []
        for candidate in candidates:
            vector_to_parameters(torch.as_tensor(candidate, dtype=torch.float32), params)
            returns.append(
                float(np.mean([episode_return(policy, env, s, max_steps) for s in seeds]))
            )
        strategy.tell(candidates, [-r for r in returns])
        result.evaluations += len(candidates) * episodes
        result.best_per_generation.append(max(returns))
        result.mean_per_generation.append(float(np.mean(returns)))
        if max(returns) > result.best_return:
            result.best_return = max(returns)
            best = candidates[int(np.argmax(returns))]
    vector_to_parameters(torch.as_tensor(best, dtype=torch.float32), params)
    return result
