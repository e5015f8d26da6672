"""``paperports bench obsdrop``: training throughput and the environment's step rate.

1. Environment steps per second while ``RecurrentPPO`` trains ``ObservationalDropoutPolicy``
   (the physics-structured world model, controller ``[10]``) against ``RecurrentPPO`` with
   sb3-contrib's ``MlpLstmPolicy`` of similar size (an LSTM of 16 units, ``[10]``), on the same
   wrapped swing-up (p = 10%), same settings and seed, one process, same thread count; and
   the same comparison with the reproduction's settings (16 environments side by side, whole
   rollouts in two minibatches, ``[64, 64]`` controllers).
2. One evolution-strategy generation of the paper's size (384 candidates x 16 episodes x up
   to 1,000 steps; M with 120 tanh units, controller ``[10]``): :func:`population_returns`
   on the natively vectorised swing-up against the same function on copies of the wrapped
   environment (``vectorized=False``), the same candidates and episodes, in environment
   steps per second (the steps of the episodes, which end when the cart leaves the track);
   candidates around a fresh policy (short episodes) and around a braking controller
   (longer ones).
3. Steps per second of ``CartPoleSwingUpHarder`` (``gymnasium.make``, with its ``TimeLimit``)
   against a plain numpy implementation of the same dynamics (the loop of the paper's own
   environment code: numpy scalars, an observation array per step).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import RecurrentPPO
from torch import nn

from paperports.benchmarking import BenchResult, BenchRow
from paperports.experiments.obsdrop.agents import (
    CRITICS,
    ENV_ID,
    N_ENVS,
    PPO_SETTINGS,
    _wrapped,
    make_agent,
)
from paperports.integrations.sb3 import ObservationalDropoutPolicy, ObservationalDropoutWrapper
from paperports.integrations.sb3.evolution import acting_parameters, population_returns
from paperports.registry import RunContext

TRAIN_STEPS = 4096
ENV_STEPS = 20_000
POPULATION, EPISODES, EPISODE_STEPS = 384, 16, 1000  # the paper's PEPG generation


class _StepCounter(gym.Wrapper[Any, Any, Any, Any]):
    """Counts the steps taken through it (``steps``, shared by all copies)."""

    steps = 0
    longest = 0

    def reset(self, **kwargs: Any) -> Any:
        self._length = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        type(self).steps += 1
        self._length += 1
        type(self).longest = max(type(self).longest, self._length)
        return self.env.step(action)


def _generation_rows(seed: int, braking: bool, log: Callable[[str], None]) -> list[BenchRow]:
    """One ES generation, vectorised against copies of the environment (see the module).

    The candidates are the policy's parameters plus noise of scale 0.1, as an ES samples
    them. Around a freshly initialised policy most episodes leave the track within a
    hundred steps; with ``braking`` the controller starts as a hand-set one that pushes
    against the cart's position and velocity, :math:`a = -3\tanh(x + \\dot x)`, so that
    episodes run longer, as they do once an ES has learnt to keep the cart on the track.
    The copies' time grows with the steps the episodes take; the vectorised evaluation
    computes every episode until the longest ends.
    """

    def make() -> gym.Env[Any, Any]:
        return ObservationalDropoutWrapper(gym.make(ENV_ID), 0.1)

    def counted() -> gym.Env[Any, Any]:
        return _StepCounter(make())

    policy = RecurrentPPO(
        ObservationalDropoutPolicy,
        make(),
        seed=seed,
        device="cpu",
        policy_kwargs={"world_model": "cartpole", "world_model_kwargs": {"hidden_sizes": (120,)}},
    ).policy
    assert isinstance(policy, ObservationalDropoutPolicy)
    if braking:
        with torch.no_grad():
            hidden, head = policy.mlp_extractor.policy_net[0], policy.action_net
            assert isinstance(hidden, nn.Linear) and isinstance(head, nn.Linear)
            for weight in (hidden.weight, hidden.bias, head.weight, head.bias):
                weight.zero_()
            hidden.weight[0, :2] = 1.0  # unit 0: tanh(x + x_dot)
            head.weight[0, 0] = -3.0
    start = np.concatenate([p.detach().numpy().ravel() for p in acting_parameters(policy)])
    noise = np.random.default_rng(seed).standard_normal((POPULATION, start.size))
    candidates = (start + 0.1 * noise).astype(np.float32)
    seeds = [seed + e for e in range(EPISODES)]

    def vectorised() -> np.ndarray:
        return population_returns(policy, candidates, make, seeds, EPISODE_STEPS)

    vectorised()  # warm-up
    times = []
    for _ in range(3):
        began = time.perf_counter()
        ours_returns = vectorised()
        times.append(time.perf_counter() - began)
    ours = sorted(times)[1]
    began = time.perf_counter()
    copies = population_returns(policy, candidates, counted, seeds, EPISODE_STEPS, vectorized=False)
    anchor = time.perf_counter() - began
    steps, longest = _StepCounter.steps, _StepCounter.longest
    _StepCounter.steps = _StepCounter.longest = 0
    difference = float(np.max(np.abs(ours_returns - copies)))
    kind = "braking controller" if braking else "fresh policy"
    log(
        f"  ES generation ({kind}): vectorised {ours:.2f} s, copies {anchor:.1f} s, "
        f"{steps:,} env steps (longest episode {longest}), largest return difference "
        f"{difference:.2g}"
    )
    extra = {
        "population": POPULATION,
        "episodes": EPISODES,
        "max_steps": EPISODE_STEPS,
        "env_steps": steps,
        "longest_episode": longest,
        "peek_prob": 0.1,
        "world_model_hidden": 120,
        "largest_return_difference": difference,
        "mean_return": float(np.mean(ours_returns)),
        "candidates_around": kind,
    }
    return [
        BenchRow(
            f"ES generation (384 x 16 x 1,000, {kind}), vectorised vs environment copies, s",
            ours,
            anchor,
            "s",
            "ours <= 10 s",
            extra=extra,
        ),
        BenchRow(
            f"ES generation ({kind}), env steps/s, vectorised vs environment copies",
            steps / ours,
            steps / anchor,
            "steps/s",
            "ratio >= 1",
            higher_is_better=True,
            extra=extra,
        ),
    ]


def _training_rate(make_model: Callable[[], RecurrentPPO]) -> float:
    model = make_model()
    model.learn(512)  # warm-up
    start = time.perf_counter()
    model.learn(TRAIN_STEPS, reset_num_timesteps=False)
    return TRAIN_STEPS / (time.perf_counter() - start)


def _plain_numpy_rate(actions: np.ndarray) -> float:
    """The dynamics written as the paper's environment code writes them."""
    g, mc, mp, length, b, dt = 9.82, 0.5, 0.5, 0.6, 0.1, 0.01
    x, x_dot, theta, theta_dot = 0.0, 0.0, np.pi, 0.0
    start = time.perf_counter()
    for a in actions:
        force = 10.0 * np.clip(a, -1.0, 1.0)
        s, c = np.sin(theta), np.cos(theta)
        xdot_update = (
            -2 * mp * length * theta_dot**2 * s + 3 * mp * g * s * c + 4 * force - 4 * b * x_dot
        ) / (4 * (mc + mp) - 3 * mp * c**2)
        thetadot_update = (
            -3 * mp * length * theta_dot**2 * s * c
            + 6 * (mc + mp) * g * s
            + 6 * (force - b * x_dot) * c
        ) / (4 * length * (mc + mp) - 3 * mp * length * c**2)
        x, theta = x + x_dot * dt, theta + theta_dot * dt
        x_dot, theta_dot = x_dot + xdot_update * dt, theta_dot + thetadot_update * dt
        obs = np.array([x, x_dot, np.cos(theta), np.sin(theta), theta_dot])
        reward = (np.cos(theta) + 1.0) / 2.0 * np.cos(x / 2.4 * math.pi / 2.0)
        done = x < -2.4 or x > 2.4
        if done:
            x, x_dot = 0.0, 0.0
        del obs, reward
    return len(actions) / (time.perf_counter() - start)


def _env_rate(actions: np.ndarray) -> float:
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a.reshape(1))
        if terminated or truncated:
            env.reset()
    return len(actions) / (time.perf_counter() - start)


def bench(ctx: RunContext) -> BenchResult:
    settings: dict[str, Any] = {
        "n_steps": 256,
        "batch_size": 64,
        "n_epochs": 4,
        "seed": ctx.seed,
        "device": "cpu",  # both on the CPU, where there is a GPU too
    }
    ours = _training_rate(
        lambda: RecurrentPPO(
            ObservationalDropoutPolicy,
            _wrapped(0.1),
            policy_kwargs={"world_model": "cartpole"},
            **settings,
        )
    )
    anchor = _training_rate(
        lambda: RecurrentPPO(
            "MlpLstmPolicy",
            _wrapped(0.1),
            policy_kwargs={"lstm_hidden_size": 16, "net_arch": [10]},
            **settings,
        )
    )
    ctx.log(f"  training: ours {ours:.0f} steps/s, MlpLstmPolicy {anchor:.0f} steps/s")
    rows = [
        BenchRow(
            "RecurrentPPO training, env steps/s",
            ours,
            anchor,
            "steps/s",
            "ratio >= 0.7",
            higher_is_better=True,
            extra={"train_steps": TRAIN_STEPS, "peek_prob": 0.1},
        )
    ]
    # the reproduction's agent: its privileged critic reads the true observation too
    privileged = CRITICS["privileged"]
    ours_vec = _training_rate(lambda: make_agent(0.1, ctx.seed, policy_kwargs=privileged))
    anchor_vec = _training_rate(lambda: make_agent(0.1, ctx.seed, "MlpLstmPolicy"))
    ctx.log(f"  {N_ENVS} envs: ours {ours_vec:.0f}, MlpLstmPolicy {anchor_vec:.0f} steps/s")
    rows.append(
        BenchRow(
            f"RecurrentPPO training, the reproduction's settings ({N_ENVS} envs), env steps/s",
            ours_vec,
            anchor_vec,
            "steps/s",
            "ratio >= 0.7",
            higher_is_better=True,
            extra={"train_steps": TRAIN_STEPS, "peek_prob": 0.1, "n_envs": N_ENVS}
            | {k: v for k, v in PPO_SETTINGS.items() if k != "learning_rate"},
        )
    )
    rows += _generation_rows(ctx.seed, False, ctx.log)
    rows += _generation_rows(ctx.seed, True, ctx.log)
    actions = np.random.default_rng(ctx.seed).uniform(-1, 1, ENV_STEPS).astype(np.float32)
    env_rate = max(_env_rate(actions) for _ in range(3))
    plain = max(_plain_numpy_rate(actions) for _ in range(3))
    ctx.log(f"  env: ours {env_rate:.0f} steps/s, plain numpy {plain:.0f} steps/s")
    # Times per step, so that the ratio reads like the goal: ours / plain <= 1.5.
    rows.append(
        BenchRow(
            "env step time / plain numpy dynamics",
            1.0 / env_rate,
            1.0 / plain,
            "s/step",
            "ratio <= 1.5",
            extra={"steps": ENV_STEPS},
        )
    )
    return BenchResult("obsdrop", "sb3-contrib MlpLstmPolicy; plain numpy dynamics", rows)
