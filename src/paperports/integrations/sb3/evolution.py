r"""The evolution-strategy route: train an observational-dropout policy without gradients.

The paper trained its agents with an evolution strategy (PEPG, population 384) on the
episode return. :func:`train_with_cma` does the same with CMA-ES from the well-kept ``cma``
package, on the *same* :class:`ObservationalDropoutPolicy` and wrapped environment that
``RecurrentPPO`` uses: the searched vector holds the acting path's parameters (the world
model M, the controller and the action head), the fitness is the mean return of
deterministic episodes, and the best parameters found are written back into the policy, so
``model.save`` and ``predict`` work as after gradient training.

A generation's candidates are evaluated side by side (:func:`population_returns`): one
batched forward pass of the acting path per time step, with each candidate's parameters
(``torch.func.vmap`` over ``functional_call``), rather than one ``predict`` call per
candidate and step. On the cart-pole swing-up the environments step together too, as
torch operations over all candidates' episodes (the vectorised swing-up's functions, on the
policy's device); any other environment is copied once per candidate and episode.
"""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from paperports._checks import check_bool, check_choice, check_float, check_int
from paperports._imports import require
from paperports.adapters.cartpole_swingup import X_THRESHOLD, CartPoleSwingUpEnv
from paperports.adapters.cartpole_swingup_vector import (
    swingup_observation,
    swingup_rewards,
    swingup_step,
)
from paperports.adapters.observational_dropout import ObservationalDropoutWrapper
from paperports.integrations.sb3.policies import ObservationalDropoutPolicy

__all__ = [
    "ALGORITHMS",
    "EvolutionResult",
    "acting_parameters",
    "episode_return",
    "population_returns",
    "train_with_cma",
    "train_with_es",
]


@dataclass
class EvolutionResult:
    """What :func:`train_with_es` found: the best mean return, the generation whose episodes
    gave it (their seeds are ``seed + 1000 * best_generation + e``), and per generation the
    best and mean returns of the population's candidates."""

    best_return: float
    best_per_generation: list[float] = field(default_factory=list)
    mean_per_generation: list[float] = field(default_factory=list)
    evaluations: int = 0
    best_generation: int = 0


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
    if policy.image_observations:
        raise ValueError(
            f"{who}: the evolution-strategy route searches policies of flat observations; "
            "this one reads images through a features extractor (train it with RecurrentPPO)"
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
    order). ``forward(obs (E, F), used (E, H)) -> (action output (E, A), used')``, the
    controller reading what the core hands it (``controller_input``); the true
    observation that a wrapper with ``expose_true_obs=True`` appends for a privileged critic
    is cut off, as the policy does."""

    def __init__(self, policy: ObservationalDropoutPolicy) -> None:
        super().__init__()
        self.core = policy.lstm_actor
        self.controller = policy.mlp_extractor.policy_net
        self.head = policy.action_net
        self.core_size = policy.obs_size + 1 + policy.action_size

    def forward(self, obs: Tensor, used: Tensor) -> tuple[Tensor, Tensor]:
        inputs = obs[..., : self.core_size]
        read, (belief, _) = self.core(inputs[None], (used[None], torch.zeros_like(used)[None]))
        return self.head(self.controller(read[0])), belief[0]


_PASS_THROUGH = (TimeLimit, OrderEnforcing, PassiveEnvChecker)
"""Wrappers that ``gymnasium.make`` adds and that change neither observations, rewards nor
actions (``TimeLimit`` only ends the episode, which the vectorised evaluation reproduces)."""


def _swingup_time_limit(env: gym.Env[Any, Any]) -> tuple[bool, int | None]:
    """Whether ``env`` is the wrapped swing-up that :func:`_swingup_returns` computes
    exactly (:class:`ObservationalDropoutWrapper` over the registered environment, with only
    ``gymnasium.make``'s own wrappers between), and its ``TimeLimit``'s step limit."""
    if type(env) is not ObservationalDropoutWrapper:
        return False, None
    limit: int | None = None
    inner: Any = env.env
    while isinstance(inner, gym.Wrapper):
        if type(inner) not in _PASS_THROUGH:
            return False, None
        if isinstance(inner, TimeLimit):
            steps = int(inner._max_episode_steps)
            limit = steps if limit is None else min(limit, steps)
        inner = inner.env
    return type(inner) is CartPoleSwingUpEnv, limit


def _candidate_weights(
    policy: ObservationalDropoutPolicy, candidates: np.ndarray, acting: _ActingPath
) -> dict[str, Tensor]:
    """Each acting parameter of every candidate, stacked: ``{name: (P, *shape)}``."""
    params = acting_parameters(policy)
    sizes = [p.numel() for p in params]
    if candidates.ndim != 2 or candidates.shape[1] != sum(sizes) or candidates.shape[0] < 1:
        raise ValueError(
            f"candidates must be (population >= 1, {sum(sizes)}) parameter vectors, got shape "
            f"{candidates.shape}"
        )
    if candidates.dtype.kind not in "fiu" or not np.all(np.isfinite(candidates)):
        raise ValueError("candidates must hold finite numbers (a NaN weight acts as NaN)")
    names = [name for name, _ in acting.named_parameters()]
    population = candidates.shape[0]
    flat = torch.as_tensor(candidates, dtype=params[0].dtype, device=params[0].device)
    return {
        name: chunk.reshape(population, *p.shape)
        for name, chunk, p in zip(names, torch.split(flat, sizes, dim=1), params, strict=True)
    }


@torch.no_grad()
def population_returns(
    policy: ObservationalDropoutPolicy,
    candidates: np.ndarray,
    make_env: Callable[[], gym.Env[Any, Any]],
    seeds: list[int],
    max_steps: int,
    *,
    vectorized: bool | None = None,
) -> np.ndarray:
    """Mean return over ``seeds`` of each candidate's deterministic episodes, all at once.

    ``candidates`` ``(P, D)`` are vectors of :func:`acting_parameters`. Candidate ``i``'s
    return is the one :func:`episode_return` gives with its parameters loaded (the same
    episodes, the same actions up to floating-point rounding); the policy is left as it was.
    The acting path runs once per time step for the whole population, each candidate with
    its own parameters (``torch.func.vmap`` over ``functional_call``: batched per-candidate
    matrix products).

    Args:
        policy: The policy whose acting path the candidates parametrise.
        candidates: ``(P, D)`` parameter vectors.
        make_env: Builds the wrapped environment.
        seeds: One episode per seed, the same for every candidate.
        max_steps: Step limit per episode.
        vectorized: How the environments are stepped. ``None`` (the default): when
            ``make_env`` builds the wrapped swing-up (``ObservationalDropoutWrapper`` over
            ``gymnasium.make("paperports/CartPoleSwingUp…")``, nothing else between), all
            ``P x len(seeds)`` episodes step together as torch operations on the policy's
            device (the vectorised swing-up's functions), each episode's start and peeks
            drawn from its seed as the single environment draws them; any other
            environment is copied once per candidate and episode and stepped one by one.
            ``True`` requires the swing-up, ``False`` always copies.

    In the vectorised evaluation a candidate whose actions are not finite gets a NaN return
    (the environment copies refuse such an action with a ``ValueError``).
    """
    _check_policy(policy, "population_returns")
    candidates = np.asarray(candidates)
    acting = _ActingPath(policy)
    stacked = _candidate_weights(policy, candidates, acting)
    if not callable(make_env):
        raise TypeError(f"make_env must build an environment, got {type(make_env).__name__}")
    seeds = [
        check_int(f"seeds[{i}]", s, minimum=0, who="population_returns")
        for i, s in enumerate(seeds)
    ]
    if not seeds:
        raise ValueError("population_returns: seeds must name at least one episode, got []")
    max_steps = check_int("max_steps", max_steps, minimum=1, who="population_returns")
    if vectorized is not None:
        vectorized = check_bool("vectorized", vectorized, who="population_returns")
    step = vmap(lambda w, o, u: functional_call(acting, w, (o, u)))
    if vectorized is not False:
        probe = make_env()
        swingup, limit = _swingup_time_limit(probe)
        probe.close()
        if swingup:
            steps = max_steps if limit is None else min(max_steps, limit)
            return _swingup_returns(policy, step, stacked, make_env, seeds, steps)
        if vectorized:
            raise ValueError(
                "population_returns(vectorized=True) steps the cart-pole swing-up only: "
                "make_env must build ObservationalDropoutWrapper(gymnasium.make("
                "'paperports/CartPoleSwingUp-v0' or '…Harder-v0'), p) with no other wrapper; "
                f"it built {probe}. Pass vectorized=None or False for other environments"
            )
    return _looped_returns(policy, step, stacked, make_env, seeds, max_steps)


def _looped_returns(
    policy: ObservationalDropoutPolicy,
    step: Callable[..., tuple[Tensor, Tensor]],
    stacked: dict[str, Tensor],
    make_env: Callable[[], gym.Env[Any, Any]],
    seeds: list[int],
    max_steps: int,
) -> np.ndarray:
    """:func:`population_returns` on copies of the environment, stepped one by one."""
    first = next(iter(stacked.values()))
    population, n_eps = first.shape[0], len(seeds)
    envs = [make_env() for _ in range(population * n_eps)]
    obs = np.stack([env.reset(seed=seeds[k % n_eps])[0] for k, env in enumerate(envs)])
    used = torch.zeros(population, n_eps, policy.obs_size, device=first.device)
    totals = np.zeros(len(envs))
    running = np.ones(len(envs), dtype=bool)
    space = policy.action_space
    for _ in range(max_steps):
        obs_t = torch.as_tensor(obs, dtype=first.dtype, device=first.device)
        output, used = step(stacked, obs_t.view(population, n_eps, -1), used)
        out = output.reshape(len(envs), -1).cpu().numpy()
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


def _swingup_returns(
    policy: ObservationalDropoutPolicy,
    step: Callable[..., tuple[Tensor, Tensor]],
    stacked: dict[str, Tensor],
    make_env: Callable[[], gym.Env[Any, Any]],
    seeds: list[int],
    max_steps: int,
) -> np.ndarray:
    """:func:`population_returns` on the swing-up, all ``P x E`` episodes as tensors.

    Each episode's start and peeks come from a copy of the wrapped environment reset with
    its seed: the start is the copy's state, and the peeks its generator's next draws,
    which the wrapper would take one per step whatever the actions (so every candidate sees
    the same peeks, as with copies). The observation shown is the wrapper's
    ``[o * peek, peek, a_{t-1}]``, the action the policy's output clipped to ``[-1, 1]``,
    and an episode stops adding rewards after the step that leaves the track."""
    first = next(iter(stacked.values()))
    device, dtype = first.device, first.dtype
    population, n_eps = first.shape[0], len(seeds)
    starts, draws = [], []
    for seed in seeds:
        env = make_env()
        env.reset(seed=seed)
        assert isinstance(env, ObservationalDropoutWrapper)
        starts.append(np.array(env.unwrapped.state, dtype=np.float64))  # type: ignore[attr-defined]
        draws.append(env.np_random.random(max_steps - 1) < env.peek_prob)
        env.close()
    # the first observation of an episode is always shown; step t's comes from draw t - 1
    peeks = torch.ones(max_steps, n_eps, 1, dtype=torch.bool, device=device)
    peeks[1:] = torch.as_tensor(np.stack(draws, axis=1), device=device)[..., None]
    state = torch.as_tensor(np.stack(starts), device=device).expand(population, -1, -1)
    space = policy.action_space
    assert isinstance(space, spaces.Box)
    low = torch.as_tensor(space.low, dtype=dtype, device=device)
    high = torch.as_tensor(space.high, dtype=dtype, device=device)
    used = torch.zeros(population, n_eps, policy.obs_size, dtype=dtype, device=device)
    previous = torch.zeros(population, n_eps, policy.action_size, dtype=dtype, device=device)
    totals = torch.zeros(population, n_eps, dtype=torch.float64, device=device)
    running = torch.ones(population, n_eps, dtype=torch.bool, device=device)
    for t in range(max_steps):
        obs = swingup_observation(state).to(dtype)
        peek = peeks[t].expand(population, n_eps, 1)
        shown = torch.where(peek, obs, torch.zeros((), dtype=dtype, device=device))
        inputs = torch.cat([shown, peek.to(dtype), previous], dim=-1)
        out, belief = step(stacked, inputs, used)
        # finished episodes keep their belief too: left to run on, a world model's
        # beliefs can grow without bound, and the sines of huge angles are slow
        used = torch.where(running[..., None], belief, used)
        previous = torch.clamp(out, low, high)
        moved = swingup_step(state, previous[..., 0].to(torch.float64))
        state = torch.where(running[..., None], moved, state)  # finished episodes stay put
        totals += torch.where(running, swingup_rewards(state), 0.0)
        running = running & (state[..., 0].abs() <= X_THRESHOLD)
        if t % 50 == 49 and not bool(running.any()):
            break
    means: np.ndarray = totals.mean(dim=1).cpu().numpy()
    return means


ALGORITHMS = ("pgpe", "cma")
"""The searches :func:`train_with_es` offers: PGPE (evotorch's, the paper's PEPG) and CMA-ES
(the ``cma`` package's)."""


class _Search:
    """An ask-and-tell search over parameter vectors (maximising the return)."""

    def ask(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> None:  # pragma: no cover
        raise NotImplementedError

    def center(self) -> np.ndarray | None:
        """The search distribution's mean, scored beside the candidates (``None``: not)."""
        return None


class _CmaSearch(_Search):
    def __init__(self, start: np.ndarray, sigma: float, population: int, seed: int) -> None:
        require("sb3", "cma", feature="train_with_es(algorithm='cma')")
        import cma

        self.strategy = cma.CMAEvolutionStrategy(
            start, sigma, {"popsize": population, "seed": seed + 1, "verbose": -9}
        )

    def ask(self) -> np.ndarray:
        return np.stack(self.strategy.ask())

    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> None:
        self.strategy.tell(list(candidates), [-r if np.isfinite(r) else 1e300 for r in returns])


class _PgpeSearch(_Search):
    """evotorch's functional PGPE: symmetric sampling, centred ranks, Adam on the center."""

    def __init__(
        self,
        start: np.ndarray,
        sigma: float,
        population: int,
        seed: int,
        learning_rate: float,
        sigma_learning_rate: float,
    ) -> None:
        require("es", "evotorch", feature="train_with_es(algorithm='pgpe')")
        from evotorch.algorithms.functional import pgpe, pgpe_ask, pgpe_tell

        self._ask, self._tell = pgpe_ask, pgpe_tell
        self.population, self.seed, self.generation = population, seed, 0
        self.state = pgpe(
            center_init=torch.as_tensor(start, dtype=torch.float64),
            center_learning_rate=learning_rate,
            stdev_learning_rate=sigma_learning_rate,
            stdev_init=sigma,
            objective_sense="max",
            ranking_method="centered",
            optimizer="adam",
            symmetric=True,
        )

    def ask(self) -> np.ndarray:
        # the samples come from torch's global generator: seed a fork of it per generation
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 100_003 + self.generation)
            values = self._ask(self.state, popsize=self.population)
        self.generation += 1
        self._values = values
        return np.asarray(values.numpy())

    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> None:
        finite = returns[np.isfinite(returns)]
        floor = float(finite.min()) - 1.0 if finite.size else 0.0
        evals = torch.as_tensor(np.where(np.isfinite(returns), returns, floor))
        self.state = self._tell(self.state, self._values, evals)

    def center(self) -> np.ndarray:
        return np.asarray(self.state.optimizer_state.center.numpy())


def train_with_es(
    policy: ObservationalDropoutPolicy,
    make_env: Callable[[], gym.Env[Any, Any]],
    generations: int,
    *,
    algorithm: str = "pgpe",
    population: int = 384,
    episodes: int = 16,
    sigma: float = 0.1,
    learning_rate: float = 0.01,
    sigma_learning_rate: float = 0.2,
    max_steps: int = 1000,
    seed: int = 0,
    workers: int = 1,
    ray_address: str | None = None,
    checkpoint: str | Path | None = None,
    keep: str = "best",
) -> EvolutionResult:
    r"""Train the policy's acting parameters (M, the controller, the action head) by an
    evolution strategy on the mean return of deterministic episodes, as the paper did.

    Each generation's candidates are scored on the same ``episodes`` seeds
    (``seed + 1000 * generation + e``) by :func:`population_returns` (on the swing-up, all
    of them together as tensors), or by :class:`~paperports.integrations.sb3.workers.RayEvaluator`
    with ``workers > 1``. The parameters ``keep`` names are written back into ``policy``,
    so ``model.predict``, ``model.save`` and ``RecurrentPPO.load`` work as after gradient
    training.

    Args:
        policy: The policy to train, for example ``RecurrentPPO(...).policy``.
        make_env: Builds the wrapped environment (an :class:`ObservationalDropoutWrapper`).
        generations: Updates of the search distribution.
        algorithm: ``"pgpe"`` (the paper's PEPG: evotorch's PGPE with symmetric samples,
            centred ranks and Adam, the search's mean scored beside its samples each
            generation) or ``"cma"`` (CMA-ES from ``cma``, the start scored in the first
            generation).
        population: Candidates per generation (the paper's 384; even for PGPE, whose samples
            come in mirrored pairs).
        episodes: Episodes per evaluation (the paper's 16).
        sigma: Initial standard deviation of the search around the current parameters.
        learning_rate: PGPE's learning rate for the mean (Adam).
        sigma_learning_rate: PGPE's learning rate for the standard deviations.
        max_steps: Step limit per episode.
        seed: Seed of the search and of the episodes.
        workers: Ray workers that share each generation (1: this process).
        ray_address: With ``workers > 1``: ``None`` starts a local Ray; a running cluster's
            address (``"auto"``, ``"host:port"``, ``"ray://host:port"``) uses it.
        checkpoint: A file where the search is saved after every generation (its
            distribution, the best candidate, the result so far). If it exists, the search
            resumes from it, so a long run that stops can go on; ``generations`` counts from
            the start. Saved with other settings, it is refused; damaged, it is reported by
            a ``RuntimeWarning`` and the search starts over.
        keep: What is written back: ``"best"``, the candidate with the highest return
            scored (the starting parameters included, so a search that finds nothing
            better keeps them), or ``"center"``, PGPE's mean after the last generation (the
            estimate the search improves; with few episodes per evaluation the best score
            is partly luck, so the mean often does as well on new episodes after many
            generations).

    Raises:
        ValueError: non-positive budgets or step sizes, an odd PGPE population, a Ray
            address where no cluster answers.
        TypeError: a policy other than :class:`ObservationalDropoutPolicy`, counts that are
            not integers.
    """
    who = "train_with_es"
    _check_policy(policy, who)
    if not callable(make_env):
        raise TypeError(f"{who}: make_env must build an environment, got {type(make_env).__name__}")
    generations = check_int("generations", generations, minimum=1, who=who)
    algorithm = check_choice("algorithm", algorithm, ALGORITHMS, who=who)
    population = check_int("population", population, minimum=2, who=who)
    if algorithm == "pgpe" and population % 2:
        raise ValueError(
            f"{who}: PGPE samples mirrored pairs, so population must be even, got {population}"
        )
    episodes = check_int("episodes", episodes, minimum=1, who=who)
    max_steps = check_int("max_steps", max_steps, minimum=1, who=who)
    seed = check_int("seed", seed, minimum=0, who=who)
    workers = check_int("workers", workers, minimum=1, who=who)
    sigma = check_float("sigma", sigma, minimum=0.0, open_low=True, who=who)
    learning_rate = check_float("learning_rate", learning_rate, minimum=0.0, open_low=True, who=who)
    sigma_learning_rate = check_float(
        "sigma_learning_rate", sigma_learning_rate, minimum=0.0, who=who
    )
    keep = check_choice("keep", keep, ("best", "center"), who=who)
    if keep == "center" and algorithm != "pgpe":
        raise ValueError(f"{who}: keep='center' is PGPE's mean; with {algorithm!r} keep 'best'")
    if workers > 1:
        from paperports.integrations.sb3.workers import check_ray_address

        ray_address = check_ray_address(ray_address, who)
    if checkpoint is not None:
        if not isinstance(checkpoint, (str, Path)):
            raise TypeError(
                f"{who}: checkpoint must be a file path or None, got {type(checkpoint).__name__}"
            )
        checkpoint = Path(checkpoint)
        if checkpoint.is_dir():
            raise ValueError(f"{who}: checkpoint must be a file, {checkpoint} is a folder")
    params = acting_parameters(policy)
    start = parameters_to_vector(params).detach().cpu().double().numpy()
    settings = {
        "algorithm": algorithm,
        "population": population,
        "episodes": episodes,
        "sigma": sigma,
        "learning_rate": learning_rate,
        "sigma_learning_rate": sigma_learning_rate,
        "max_steps": max_steps,
        "seed": seed,
        "parameters": int(start.size),
    }  # what a checkpoint must match (keep only chooses what is written back)
    # the checkpoint first: a refused one must not leave a started Ray behind
    saved = _load_checkpoint(checkpoint, settings) if checkpoint is not None else None
    search: _Search
    result: EvolutionResult
    if saved is not None:
        search, result, best, first = saved["search"], saved["result"], saved["best"], saved["next"]
    else:
        search = (
            _PgpeSearch(start, sigma, population, seed, learning_rate, sigma_learning_rate)
            if algorithm == "pgpe"
            else _CmaSearch(start, sigma, population, seed)
        )
        result, best, first = EvolutionResult(best_return=-np.inf), start, 0
    evaluate: Callable[[np.ndarray, list[int]], np.ndarray]
    if workers > 1:
        from paperports.integrations.sb3.workers import RayEvaluator

        evaluator = RayEvaluator(policy, make_env, workers, ray_address)
        evaluate = lambda candidates, seeds: evaluator(candidates, seeds, max_steps)  # noqa: E731
    else:
        evaluator = None
        evaluate = lambda candidates, seeds: population_returns(  # noqa: E731
            policy, candidates, make_env, seeds, max_steps
        )
    try:
        for generation in range(first, generations):
            seeds = [seed + 1000 * generation + e for e in range(episodes)]
            candidates = search.ask()
            # scored beside the candidates: the start (the return to beat) in the first
            # generation, and the search's mean where it has one
            extra = [c for c in (search.center(),) if c is not None]
            if generation == 0:
                extra.insert(0, start)
            scored = evaluate(np.stack([*extra, *candidates]), seeds)
            for vector, value in zip(extra, scored[: len(extra)], strict=True):
                if np.isfinite(value) and value > result.best_return:
                    result.best_return, best = float(value), vector
                    result.best_generation = generation
            returns = np.where(np.isfinite(scored), scored, -np.inf)[len(extra) :]
            search.tell(candidates, returns)
            result.evaluations += len(scored) * episodes
            result.best_per_generation.append(float(returns.max()))
            result.mean_per_generation.append(float(np.mean(returns)))
            if returns.max() > result.best_return:
                result.best_return = float(returns.max())
                best = candidates[int(np.argmax(returns))]
                result.best_generation = generation
            if checkpoint is not None:
                state = {"search": search, "result": result, "best": best, "next": generation + 1}
                _save_checkpoint(checkpoint, settings | state)
    finally:
        if evaluator is not None:
            evaluator.close()
    if keep == "center":
        center = search.center()
        assert center is not None  # PGPE's
        best = center
    vector_to_parameters(
        torch.as_tensor(best, dtype=params[0].dtype, device=params[0].device), params
    )
    return result


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as file:
        pickle.dump(state, file)
    os.replace(partial, path)


def _load_checkpoint(path: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The search saved at ``path`` to resume, ``None`` where there is none; a damaged file
    is reported and started over, one saved with other settings is refused (resuming it
    would mix two searches)."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as file:
            state = pickle.load(file)
        if not isinstance(state, dict) or not {"search", "result", "best", "next"} <= set(state):
            raise ValueError("not a train_with_es checkpoint")
    except Exception as err:
        warnings.warn(
            f"train_with_es: the checkpoint {path} cannot be read ({err!r}); starting over "
            "(it is overwritten after the first generation)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    different = {k: (state.get(k), v) for k, v in settings.items() if state.get(k) != v}
    if different:
        shown = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in different.items())
        raise ValueError(
            f"train_with_es: the checkpoint {path} was saved by a search with other settings "
            f"({shown}); resume it with its own settings, or pass another checkpoint path"
        )
    return state


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
    """Search the policy's acting parameters with CMA-ES for the highest mean return:
    :func:`train_with_es` with ``algorithm="cma"`` and this function's smaller defaults.

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
    return train_with_es(
        policy,
        make_env,
        generations,
        algorithm="cma",
        population=population,
        sigma=sigma,
        episodes=episodes,
        max_steps=max_steps,
        seed=seed,
    )
