r"""The "dream": an environment whose dynamics are a world model (Freeman, Metz, Ha 2019).

The paper's transfer experiment trains a fresh policy *only* inside the world model M that
an observational-dropout agent learned, then evaluates it in the real environment. Here
that is :class:`WorldModelEnv`: a gymnasium environment that starts from a real initial
observation, moves by :math:`o_{t+1} = M(o_t, a_t)`, and scores each step with the true
reward function applied to M's predicted observation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from paperports._checks import check_bool, check_int
from paperports.adapters.cartpole_swingup import X_THRESHOLD, draw_cartpole, swingup_reward
from paperports.integrations.sb3.world_models import WorldModel

__all__ = ["WorldModelEnv", "cartpole_reward", "cartpole_terminated"]


def cartpole_reward(obs: np.ndarray) -> float:
    """The swing-up reward read off an observation ``[x, x_dot, cos, sin, theta_dot]``."""
    _check_observation(obs)
    return swingup_reward(float(obs[0]), float(np.clip(obs[2], -1.0, 1.0)))


def cartpole_terminated(obs: np.ndarray) -> bool:
    """The swing-up's end: the cart off the track."""
    _check_observation(obs)
    return bool(abs(float(obs[0])) > X_THRESHOLD)


def _check_observation(obs: np.ndarray) -> None:
    if np.shape(obs) != (5,):
        raise ValueError(
            f"obs must be a swing-up observation [x, x_dot, cos, sin, theta_dot] of shape (5,), "
            f"got shape {np.shape(obs)}"
        )


class WorldModelEnv(gym.Env[np.ndarray, np.ndarray]):
    """A gymnasium environment whose dynamics are a (trained) world model.

    Args:
        world_model: M, mapping ``(obs, action)`` to the next observation.
        real_env: The real environment: its ``reset`` gives the dream's initial observation
            and, with ``track_truth``, it is stepped alongside with the same actions so that
            ``info["true_obs"]`` and ``render`` can show the truth beside the belief.
        reward_fn: Reward of a (predicted) observation; default: the swing-up's.
        terminated_fn: Whether a (predicted) observation ends the episode; default: the
            swing-up's.
        max_episode_steps: Truncation. (default: 1000, as the swing-up)
        track_truth: Step ``real_env`` alongside. (default: ``False``)
        render_mode: ``None`` or ``"rgb_array"`` (the belief drawn over the truth; needs
            ``track_truth`` and a swing-up ``real_env``).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}  # noqa: RUF012

    def __init__(
        self,
        world_model: WorldModel,
        real_env: gym.Env[Any, Any],
        reward_fn: Callable[[np.ndarray], float] = cartpole_reward,
        terminated_fn: Callable[[np.ndarray], bool] = cartpole_terminated,
        max_episode_steps: int = 1000,
        track_truth: bool = False,
        render_mode: str | None = None,
    ) -> None:
        who = "WorldModelEnv"
        if not isinstance(world_model, WorldModel):
            raise TypeError(
                f"{who}: world_model must be a WorldModel (e.g. the policy's .world_model), "
                f"got {type(world_model).__name__}"
            )
        if not isinstance(real_env, gym.Env):
            raise TypeError(
                f"{who}: real_env must be a gymnasium.Env, got {type(real_env).__name__}"
            )
        for name, fn in (("reward_fn", reward_fn), ("terminated_fn", terminated_fn)):
            if not callable(fn):
                raise TypeError(f"{who}: {name} must be callable, got {type(fn).__name__}")
        max_episode_steps = check_int("max_episode_steps", max_episode_steps, minimum=1, who=who)
        track_truth = check_bool("track_truth", track_truth, who=who)
        space = real_env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"WorldModelEnv needs a flat Box observation space, got {space}")
        if int(space.shape[0]) != world_model.obs_size:
            raise ValueError(
                f"the world model predicts {world_model.obs_size} values, the environment "
                f"observes {space.shape[0]}"
            )
        if not isinstance(real_env.action_space, spaces.Box):
            raise ValueError("WorldModelEnv supports Box action spaces")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.world_model = world_model.eval()
        self.real_env = real_env
        self.reward_fn = reward_fn
        self.terminated_fn = terminated_fn
        self.max_episode_steps = max_episode_steps
        self.track_truth = track_truth or render_mode is not None
        self.render_mode = render_mode
        self.observation_space = space
        self.action_space = real_env.action_space
        self._obs = np.zeros(space.shape, dtype=np.float32)
        self._true_obs: np.ndarray | None = None
        self._steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _ = self.real_env.reset(seed=seed, options=options)
        self._obs = np.asarray(obs, dtype=np.float32)
        self._true_obs = self._obs.copy() if self.track_truth else None
        self._steps = 0
        return self._obs.copy(), {"true_obs": self._true_obs}

    @torch.no_grad()
    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        assert isinstance(self.action_space, spaces.Box)
        try:
            raw = np.asarray(action, dtype=np.float32)
        except (TypeError, ValueError):
            raise TypeError(f"action must be numbers, got {type(action).__name__}") from None
        if raw.size != int(np.prod(self.action_space.shape)) or not np.all(np.isfinite(raw)):
            raise ValueError(
                f"action must be {self.action_space.shape} finite numbers, got {raw.tolist()}"
            )
        applied = np.clip(
            raw.reshape(self.action_space.shape), self.action_space.low, self.action_space.high
        )
        weight = next(self.world_model.parameters(), None)  # M may live on a GPU
        device = weight.device if weight is not None else None
        obs = torch.as_tensor(self._obs, device=device)[None]
        act = torch.as_tensor(applied.reshape(1, -1), device=device)
        self._obs = self.world_model(obs, act)[0].cpu().numpy().astype(np.float32)
        self._steps += 1
        if self._true_obs is not None:
            true_obs, *_ = self.real_env.step(applied)
            self._true_obs = np.asarray(true_obs, dtype=np.float32)
        terminated = self.terminated_fn(self._obs) or not np.all(np.isfinite(self._obs))
        truncated = self._steps >= self.max_episode_steps
        reward = float(self.reward_fn(self._obs)) if np.all(np.isfinite(self._obs)) else 0.0
        return self._obs.copy(), reward, terminated, truncated, {"true_obs": self._true_obs}

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode != "rgb_array" or self._true_obs is None:
            return None
        return draw_cartpole(_state(self._true_obs), ghost=_state(self._obs))


def _state(obs: np.ndarray) -> np.ndarray:
    """``[x, x_dot, theta, theta_dot]`` of a swing-up observation."""
    return np.array([obs[0], obs[1], math.atan2(float(obs[3]), float(obs[2])), obs[4]])
