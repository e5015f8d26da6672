r"""The evolution-strategy route: train an observational-dropout policy without gradients.

The paper trained its agents with an evolution strategy (PEPG, population 384) on the
episode return. :func:`train_with_cma` does the same with CMA-ES from the well-kept ``cma``
package, on the *same* :class:`ObservationalDropoutPolicy` and wrapped environment that
``RecurrentPPO`` uses: the searched vector holds the acting path's parameters (the world
model M, the controller and the action head), the fitness is the mean return of
deterministic episodes, and the best parameters found are written back into the policy, so
``model.save`` and ``predict`` work as after gradient training.

A generation's candidates are evaluated side by side (:func:`population_returns`): one copy
of the wrapped environment per candidate and episode, and one batched forward pass of the
acting path per time step, with each candidate's parameters (``torch.func.vmap`` over
``functional_call``), rather than one ``predict`` call per candidate and step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from paperports._checks import check_float, check_int
from paperports._imports import require
from paperports.integrations.sb3.policies import ObservationalDropoutPolicy

__all__ = [
    "EvolutionResult",
    "acting_parameters",
    "episode_return",
    "population_returns",
    "train_with_cma",
]


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


def _check_policy(policy: Any, who: str) -> None:
    if not isinstance(policy, ObservationalDropoutPolicy):
        raise TypeError(
            f"{who}: policy must be an ObservationalDropoutPolicy (e.g. model.policy), got "
            f"{type(policy).__name__}"
        )


@torch.no_grad()
def episode_return(
    policy: ObservationalDropoutPolicy, env: gym.Env[Any, Any], seed: int, max_steps: int
) -> float:
    """Return of one deterministic episode of ``policy`` in the wrapped ``env``."""
    _check_policy(policy, "episode_return")
    seed = check_int("seed", seed, who="episode_return")
    max_steps = check_int("max_steps", max_steps, minimum=1, who="episode_return")
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


class _ActingPath(nn.Module):
    """The policy's deterministic acting path for one step: the world-model core, the
    controller and the action head (the modules :func:`acting_parameters` lists, in its
    order). ``forward(obs (E, F), used (E, H)) -> (action output (E, A), used')``."""

    def __init__(self, policy: ObservationalDropoutPolicy) -> None:
        super().__init__()
        self.core = policy.lstm_actor
        self.controller = policy.mlp_extractor.policy_net
        self.head = policy.action_net

    def forward(self, obs: Tensor, used: Tensor) -> tuple[Tensor, Tensor]:
        belief, _ = self.core(obs[None], (used[None], torch.zeros_like(used)[None]))
        return self.head(self.controller(belief[0])), belief[0]


@torch.no_grad()
def population_returns(
    policy: ObservationalDropoutPolicy,
    candidates: np.ndarray,
    make_env: Callable[[], gym.Env[Any, Any]],
    seeds: list[int],
    max_steps: int,
) -> np.ndarray:
    """Mean return over ``seeds`` of each candidate's deterministic episodes, all at once.

    ``candidates`` ``(P, D)`` are vectors of :func:`acting_parameters`. Candidate ``i``'s
    return is the one :func:`episode_return` gives with its parameters loaded (the same
    episodes, the same actions up to floating-point rounding); the policy is left as it was.
    """
    _check_policy(policy, "population_returns")
    params = acting_parameters(policy)
    candidates = np.asarray(candidates)
    sizes = [p.numel() for p in params]
    if candidates.ndim != 2 or candidates.shape[1] != sum(sizes) or candidates.shape[0] < 1:
        raise ValueError(
            f"candidates must be (population >= 1, {sum(sizes)}) parameter vectors, got shape "
            f"{candidates.shape}"
        )
    if candidates.dtype.kind not in "fiu" or not np.all(np.isfinite(candidates)):
        raise ValueError("candidates must hold finite numbers (a NaN weight acts as NaN)")
    if not callable(make_env):
        raise TypeError(f"make_env must build an environment, got {type(make_env).__name__}")
    seeds = [check_int(f"seeds[{i}]", s, who="population_returns") for i, s in enumerate(seeds)]
    if not seeds:
        raise ValueError("population_returns: seeds must name at least one episode, got []")
    max_steps = check_int("max_steps", max_steps, minimum=1, who="population_returns")
    acting = _ActingPath(policy)
    names = [name for name, _ in acting.named_parameters()]
    population, n_eps = candidates.shape[0], len(seeds)
    flat = torch.as_tensor(candidates, dtype=params[0].dtype, device=params[0].device)
    stacked = {
        name: chunk.reshape(population, *p.shape)
        for name, chunk, p in zip(names, torch.split(flat, sizes, dim=1), params, strict=True)
    }
    step = vmap(lambda w, o, u: functional_call(acting, w, (o, u)))

    envs = [make_env() for _ in range(population * n_eps)]
    obs = np.stack([env.reset(seed=seeds[k % n_eps])[0] for k, env in enumerate(envs)])
    used = torch.zeros(population, n_eps, policy.obs_size, device=flat.device)
    totals = np.zeros(len(envs))
    running = np.ones(len(envs), dtype=bool)
    space = policy.action_space
    for _ in range(max_steps):
        obs_t = torch.as_tensor(obs, dtype=flat.dtype, device=flat.device)
        out, used = step(stacked, obs_t.view(population, n_eps, -1), used)
        out = out.reshape(len(envs), -1).cpu().numpy()
        if isinstance(space, spaces.Box):
            actions: np.ndarray = np.clip(out, space.low, space.high).reshape(-1, *space.shape)
        else:  # Discrete: the most likely action
            actions = out.argmax(axis=1)
        for k in np.flatnonzero(running):
            obs[k], reward, terminated, truncated, _ = envs[k].step(actions[k])
            totals[k] += float(reward)
            running[k] = not (terminated or truncated)
        if not running.any():
            break
    for env in envs:
        env.close()
    means: np.ndarray = totals.reshape(population, n_eps).mean(axis=1)
    return means


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

    The starting parameters are scored on the first generation's episodes too, and they are
    kept unless a candidate scores higher: a search that finds nothing better never replaces
    a trained policy with a random candidate.

    Raises:
        ValueError: non-positive budgets or step size.
        TypeError: a policy other than :class:`ObservationalDropoutPolicy`, or counts that
            are not integers.
    """
    require("sb3", "cma", feature="train_with_cma")
    import cma

    who = "train_with_cma"
    _check_policy(policy, who)
    if not callable(make_env):
        raise TypeError(f"{who}: make_env must build an environment, got {type(make_env).__name__}")
    generations = check_int("generations", generations, minimum=1, who=who)
    population = check_int("population", population, minimum=2, who=who)
    episodes = check_int("episodes", episodes, minimum=1, who=who)
    max_steps = check_int("max_steps", max_steps, minimum=1, who=who)
    seed = check_int("seed", seed, minimum=0, who=who)
    sigma = check_float("sigma", sigma, minimum=0.0, open_low=True, who=who)
    params = acting_parameters(policy)
    start = parameters_to_vector(params).detach().cpu().double().numpy()
    strategy = cma.CMAEvolutionStrategy(
        start, sigma, {"popsize": population, "seed": seed + 1, "verbose": -9}
    )
    result = EvolutionResult(best_return=-np.inf)
    best = start
    for generation in range(generations):
        seeds = [seed + 1000 * generation + e for e in range(episodes)]
        candidates = strategy.ask()
        scored = np.stack([start, *candidates]) if generation == 0 else np.stack(candidates)
        batch = population_returns(policy, scored, make_env, seeds, max_steps)
        if generation == 0:  # the starting point: the return to beat
            result.best_return, batch = float(batch[0]), batch[1:]
        returns = [float(r) if np.isfinite(r) else -np.inf for r in batch]
        strategy.tell(candidates, [-r if np.isfinite(r) else 1e300 for r in returns])
        result.evaluations += len(scored) * episodes
        result.best_per_generation.append(max(returns))
        result.mean_per_generation.append(float(np.mean(returns)))
        if max(returns) > result.best_return:
            result.best_return = max(returns)
            best = candidates[int(np.argmax(returns))]
    vector_to_parameters(
        torch.as_tensor(best, dtype=params[0].dtype, device=params[0].device), params
    )
    return result
