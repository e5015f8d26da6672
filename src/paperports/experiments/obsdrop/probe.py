r"""What an agent's world model learned: its accelerations against the swing-up's own.

M's one-step error alone says little at the swing-up's 0.01 s step. A step is mostly the
integration of the velocities M is given, so even the constant-velocity model (zero
accelerations) predicts it closely, and how closely depends on how hard the agent drives
the cart: a calm, balancing agent gives any model a small error. :func:`probe_world_model`
therefore measures M on the real trajectory the agent drives (with its dropout, as
:func:`~paperports.experiments.obsdrop.agents.prediction_error` does) against two
references on the same steps:

- the *skill*: one minus the ratio of M's one-step error
  :math:`\overline{\|M(o_t, a_t) - o_{t+1}\|^2}` to the constant-velocity model's
  (1: the true dynamics; 0: no better than constant velocity; below 0: worse);
- the *action gains*: how M's accelerations respond to the action against how the true ones
  do. M's response at a state is :math:`\tfrac12\,(\ddot x_M(a{=}1) - \ddot x_M(a{=}{-1}))`,
  the truth's the same difference of the swing-up's dynamics; the gain is the least-squares
  slope of M's responses on the truth's over the visited states, for :math:`\ddot x` and
  :math:`\ddot\theta` (1: as the physics; 0: M ignores the action).

M's accelerations are read off its velocity outputs, :math:`(\dot x' - \dot x) / dt`, so any
:class:`~paperports.integrations.sb3.WorldModel` on the swing-up's observation can be
probed, not only the physics-structured one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import cast

import numpy as np
import torch
from sb3_contrib import RecurrentPPO

from paperports.adapters.cartpole_swingup import DT, cartpole_swingup_step, observation
from paperports.experiments.obsdrop.agents import _wrapped_for
from paperports.integrations.sb3 import CartPoleWorldModel, ObservationalDropoutPolicy

__all__ = ["ModelProbe", "probe_world_model"]

# the velocities' places in the observation [x, x_dot, cos, sin, theta_dot]
_VELOCITIES = [1, 4]
# The swing-up's step on a batch of states and actions, as its docstring allows (its
# annotation says one float action; it is widened once the obsdrop report's runs, whose
# fingerprint includes the environment's code, are done).
_step = cast(Callable[[np.ndarray, np.ndarray], np.ndarray], cartpole_swingup_step)


@dataclass(frozen=True)
class ModelProbe:
    """:func:`probe_world_model`'s measurements (see the module)."""

    error: float
    constant_velocity_error: float
    skill: float
    gain_x: float
    gain_theta: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@torch.no_grad()
def probe_world_model(agent: RecurrentPPO, p: float, steps: int, seed: int) -> ModelProbe:
    """Drive ``agent`` (deterministic, with dropout ``p``) for ``steps`` steps of the real
    swing-up, episodes from ``seed`` on, and measure its world model on them."""
    policy = agent.policy
    if not isinstance(policy, ObservationalDropoutPolicy):
        raise TypeError(
            f"probe_world_model needs an ObservationalDropoutPolicy agent, got "
            f"{type(policy).__name__}"
        )
    if steps < 2:
        raise ValueError(f"steps must be >= 2, got {steps}")
    states, actions = _trajectory(agent, p, steps, seed)
    current = observation(states)
    weight = next(policy.world_model.parameters(), None)  # M may live on a GPU
    device = weight.device if weight is not None else torch.device("cpu")

    obs = torch.as_tensor(current, dtype=torch.float32, device=device)

    def predict(model: torch.nn.Module, applied: np.ndarray) -> np.ndarray:
        act = torch.as_tensor(applied[:, None], dtype=torch.float32, device=device)
        return np.asarray(model(obs, act).double().cpu().numpy())

    def accelerations(next_obs: np.ndarray) -> np.ndarray:
        return np.asarray((next_obs[:, _VELOCITIES] - current[:, _VELOCITIES]) / DT)

    true_next = observation(_step(states, actions))

    def error_of(model: torch.nn.Module) -> float:
        return float(((predict(model, actions) - true_next) ** 2).sum(-1).mean())

    error = error_of(policy.world_model)
    baseline = error_of(CartPoleWorldModel(zero_init=True).to(device))
    ones = np.ones_like(actions)
    model_gain = (
        accelerations(predict(policy.world_model, ones))
        - accelerations(predict(policy.world_model, -ones))
    ) / 2
    true_gain = (
        accelerations(observation(_step(states, ones)))
        - accelerations(observation(_step(states, -ones)))
    ) / 2
    gains = (model_gain * true_gain).sum(0) / (true_gain**2).sum(0)
    return ModelProbe(
        error=error,
        constant_velocity_error=baseline,
        skill=1.0 - error / baseline,
        gain_x=float(gains[0]),
        gain_theta=float(gains[1]),
    )


def _trajectory(
    agent: RecurrentPPO, p: float, steps: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The true states ``[x, x_dot, theta, theta_dot]`` the agent visits and the actions it
    applies there (clipped, as the environment applies them), one row per step; a finished
    episode is followed by the next seed's."""
    env = _wrapped_for(agent, p)
    obs, _ = env.reset(seed=seed)
    state, start = None, np.array([True])
    states, actions = [], []
    for _ in range(steps):
        states.append(np.array(env.unwrapped.state, dtype=np.float64))  # type: ignore[attr-defined]
        action, state = agent.predict(obs, state=state, episode_start=start, deterministic=True)
        actions.append(float(np.clip(np.asarray(action).reshape(-1)[0], -1.0, 1.0)))
        obs, _, terminated, truncated, _ = env.step(action)
        start = np.array([False])
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + len(states))
            state, start = None, np.array([True])
    return np.stack(states), np.array(actions)
