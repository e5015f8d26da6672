r"""The paper's cart-pole swing-up as one natively vectorised environment, in torch.

The dynamics, reward and termination of :mod:`paperports.adapters.cartpole_swingup` as
array operations over a whole batch of environments (a population's candidates times their
episodes, for the evolution strategy), in torch so that the same code runs on a GPU. It is
the ``vector_entry_point`` of both registered environments, gymnasium's convention for
natively vectorised environments::

    envs = gymnasium.make_vec("paperports/CartPoleSwingUpHarder-v0", num_envs=384 * 16,
                              vectorization_mode="vector_entry_point")

Step for step it computes what ``num_envs`` copies of the gymnasium environment compute
(tested); finished environments reset on the next call to :meth:`step`, gymnasium's
``NEXT_STEP`` autoreset mode, as its own ``CartPoleVectorEnv``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from paperports._checks import check_bool, check_int
from paperports._imports import require

require("sb3", "gymnasium", feature="paperports.adapters.cartpole_swingup_vector")

from gymnasium import spaces  # noqa: E402
from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

from paperports.adapters.cartpole_swingup import (  # noqa: E402
    DT,
    FORCE_MAG,
    MAX_STEPS,
    X_THRESHOLD,
    swingup_accelerations,
)

__all__ = ["CartPoleSwingUpVectorEnv", "swingup_observation", "swingup_rewards", "swingup_step"]


def swingup_step(state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """One explicit Euler step of the paper's dynamics for a batch: ``state`` ``(..., 4)``
    ``[x, x_dot, theta, theta_dot]``, ``action`` ``(...)`` forces, clipped to ``[-1, 1]``."""
    x, x_dot, theta, theta_dot = state.unbind(-1)
    force = FORCE_MAG * action.clamp(-1.0, 1.0)
    x_acc, theta_acc = swingup_accelerations(
        x_dot, theta_dot, torch.sin(theta), torch.cos(theta), force
    )
    return torch.stack(
        [x + x_dot * DT, x_dot + x_acc * DT, theta + theta_dot * DT, theta_dot + theta_acc * DT],
        dim=-1,
    )


def swingup_observation(state: torch.Tensor) -> torch.Tensor:
    """``[x, x_dot, cos(theta), sin(theta), theta_dot]`` of a batch of states."""
    x, x_dot, theta, theta_dot = state.unbind(-1)
    return torch.stack([x, x_dot, torch.cos(theta), torch.sin(theta), theta_dot], dim=-1)


def swingup_rewards(state: torch.Tensor) -> torch.Tensor:
    """``(cos(theta) + 1) / 2 * cos(x / 2.4 * pi / 2)`` of a batch of states."""
    x, theta = state[..., 0], state[..., 2]
    return (torch.cos(theta) + 1.0) / 2.0 * torch.cos(x / X_THRESHOLD * math.pi / 2.0)


class CartPoleSwingUpVectorEnv(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """``num_envs`` cart-pole swing-ups stepped together (see the module).

    Args:
        num_envs: How many environments.
        harder: The paper's reset (``True``) or the easy one, as
            :class:`~paperports.adapters.cartpole_swingup.CartPoleSwingUpEnv`.
        max_episode_steps: Truncation (1000, the registered environments' limit).
        device: Where the states live and the dynamics run.
        dtype: Their floating type (``torch.float64``, the single environment's).

    ``state`` is the ``(num_envs, 4)`` tensor ``[x, x_dot, theta, theta_dot]``; assigning one
    sets the states. Observations ``(num_envs, 5)`` float32 and rewards ``(num_envs,)``
    float64 come back as numpy arrays, the spaces' types; the torch functions
    :func:`swingup_step`, :func:`swingup_observation` and :func:`swingup_rewards` serve code
    that keeps everything on the device.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # noqa: RUF012

    def __init__(
        self,
        num_envs: int = 1,
        harder: bool = True,
        max_episode_steps: int = MAX_STEPS,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        who = "CartPoleSwingUpVectorEnv"
        self.num_envs = check_int("num_envs", num_envs, minimum=1, who=who)
        self.harder = check_bool("harder", harder, who=who)
        self.max_episode_steps = check_int(
            "max_episode_steps", max_episode_steps, minimum=1, who=who
        )
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{who}: dtype must be torch.float32 or torch.float64, got {dtype}")
        self.device = torch.device(device)
        self.dtype = dtype
        high = np.array([np.inf] * 5, dtype=np.float32)
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.state = torch.zeros(self.num_envs, 4, device=self.device, dtype=dtype)
        self.steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.prev_done = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _initial_states(self, count: int) -> torch.Tensor:
        rng = self.np_random
        if self.harder:
            low = [-X_THRESHOLD, -10.0, math.pi / 2, -10.0]
            high = [X_THRESHOLD, 10.0, 3 * math.pi / 2, 10.0]
            values = rng.uniform(low, high, size=(count, 4))
        else:
            values = rng.normal([0.0, 0.0, math.pi, 0.0], 0.2, size=(count, 4))
        return torch.as_tensor(values, device=self.device, dtype=self.dtype)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.state = self._initial_states(self.num_envs)
        self.steps.zero_()
        self.prev_done.zero_()
        return self._numpy(swingup_observation(self.state), np.float32), {}

    def step(
        self, actions: np.ndarray | torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        force = torch.as_tensor(actions, device=self.device, dtype=self.dtype)
        if force.numel() != self.num_envs or force.dim() not in (1, 2):
            raise ValueError(
                f"actions must be one force per environment, shape ({self.num_envs}, 1) or "
                f"({self.num_envs},); got {tuple(force.shape)}"
            )
        force = force.reshape(self.num_envs)
        if not bool(torch.isfinite(force).all()):
            raise ValueError("actions must be finite (forces in [-1, 1]); got NaN or infinity")
        self.state = swingup_step(self.state, force)
        self.steps += 1
        rewards = swingup_rewards(self.state)
        terminated = self.state[:, 0].abs() > X_THRESHOLD
        truncated = self.steps >= self.max_episode_steps
        # the environments that finished at the previous step start again now
        done = self.prev_done
        if bool(done.any()):
            self.state[done] = self._initial_states(int(done.sum()))
            self.steps[done] = 0
            rewards[done] = 0.0
            terminated[done] = False
            truncated[done] = False
        self.prev_done = terminated | truncated
        return (
            self._numpy(swingup_observation(self.state), np.float32),
            self._numpy(rewards, np.float64),
            self._numpy(terminated, np.bool_),
            self._numpy(truncated, np.bool_),
            {},
        )

    @staticmethod
    def _numpy(values: torch.Tensor, dtype: type) -> np.ndarray:
        return np.asarray(values.detach().cpu().numpy(), dtype=dtype)
