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

import numpy as np
from sb3_contrib import RecurrentPPO

from paperports.adapters.cartpole_swingup import DT, cartpole_swingup_step, observation
from paperports.experiments.obsdrop.agents import (
    one_step_error,
    real_trajectory,
    world_model_step,
)
from paperports.integrations.sb3 import CartPoleWorldModel, ObservationalDropoutPolicy

__all__ = ["ModelProbe", "probe_world_model"]

# the velocities' places in the observation [x, x_dot, cos, sin, theta_dot]
_VELOCITIES = [1, 4]


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
    states, actions = real_trajectory(agent, p, steps, seed)
    current = observation(states)

    def accelerations(next_obs: np.ndarray) -> np.ndarray:
        return np.asarray((next_obs[:, _VELOCITIES] - current[:, _VELOCITIES]) / DT)

    def response(step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """Half the difference of the accelerations after a = 1 and after a = -1."""
        ones = np.ones_like(actions)
        return (
            np.asarray(accelerations(step(states, ones)) - accelerations(step(states, -ones))) / 2
        )

    error = one_step_error(policy.world_model, states, actions)
    baseline = one_step_error(CartPoleWorldModel(zero_init=True), states, actions)
    model_gain = response(lambda s, a: world_model_step(policy.world_model, s, a))
    true_gain = response(lambda s, a: observation(cartpole_swingup_step(s, a)))
    gains = (model_gain * true_gain).sum(0) / (true_gain**2).sum(0)
    return ModelProbe(
        error=error,
        constant_velocity_error=baseline,
        skill=1.0 - error / baseline,
        gain_x=float(gains[0]),
        gain_theta=float(gains[1]),
    )
