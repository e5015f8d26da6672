r"""Observational dropout (Freeman, Metz, Ha 2019) as a gymnasium wrapper.

At every step the agent sees the real observation only with probability :math:`p` (it
"peeks"); otherwise it must rely on its own world model. The wrapper draws the peek and
hands the policy

.. math::
    [\, o_t \cdot \mathrm{peek}_t,\ \mathrm{peek}_t,\ a_{t-1} \,]

where :math:`a_{t-1}` is the previous action as the environment applied it (clipped to the
action space; one-hot for discrete actions; zeros at the first step). The first step of an
episode always peeks. The true observation stays in ``info["true_obs"]``, the peek in
``info["peek"]``.

The mask is drawn here, from the environment's seeded generator, and never in the policy:
Stable-Baselines3 re-evaluates the policy on stored rollouts, so a peek drawn in
``forward`` would differ between the rollout and the update. (The paper's text has the two
cases of its peek equation swapped; its code peeks when a uniform draw is below :math:`p`,
as here.)

With ``expose_true_obs=True`` the true observation is appended,
:math:`[\, o_t \cdot \mathrm{peek}_t,\ \mathrm{peek}_t,\ a_{t-1},\ o_t \,]`, for a privileged
critic that sees it in training while the actor and the world model do not
(``ObservationalDropoutPolicy(privileged_critic=True)``).

A ``Dict`` observation space is flattened (``gymnasium.spaces.flatten``) before masking.
An image (a ``Box`` of more than one dimension, such as CarRacing's frames) is masked
whole, and the wrapper's observation becomes a ``Dict``, as SB3 expects of images beside
vectors: ``{"observation": image * peek, "peek": (1,), "previous_action": (A,)}`` (and
``"true_observation"`` with ``expose_true_obs``); the policy's features extractor (SB3's
``NatureCNN`` for images) reads the image. Any other space is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from paperports._checks import check_bool, check_float
from paperports._imports import require

require("sb3", "gymnasium", feature="paperports.adapters.observational_dropout")

import gymnasium as gym  # noqa: E402
from gymnasium import spaces  # noqa: E402

__all__ = ["ObservationalDropoutWrapper"]


class ObservationalDropoutWrapper(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Show the true observation with probability ``peek_prob``, zeros otherwise.

    Args:
        env: The environment; its observation space must be a ``Box``, flat or an image (or a
            ``Dict``, flattened); its action space a ``Box`` or ``Discrete``.
        peek_prob: :math:`p \\in (0, 1]`; 1 shows every observation.
        expose_true_obs: Append the true observation to every observation, for a
            privileged critic (``ObservationalDropoutPolicy(privileged_critic=True)``); a
            policy that acts on it would defeat the dropout.

    Attributes:
        obs_size: Size of the true (flattened) observation; for a flat one the policy's
            input is ``obs_size + 1 + action_size``.
        image: Whether the observation is an image (the wrapper's observation a ``Dict``).
        action_size: Size of the encoded previous action.
    """

    def __init__(
        self, env: gym.Env[Any, Any], peek_prob: float, expose_true_obs: bool = False
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, peek_prob=peek_prob, expose_true_obs=expose_true_obs
        )
        who = "ObservationalDropoutWrapper"
        if not isinstance(env, gym.Env):
            raise TypeError(f"{who}: env must be a gymnasium.Env, got {type(env).__name__}")
        gym.Wrapper.__init__(self, env)
        self.peek_prob = check_float(
            "peek_prob", peek_prob, minimum=0.0, maximum=1.0, open_low=True, who=who
        )
        self.expose_true_obs = check_bool("expose_true_obs", expose_true_obs, who=who)
        space = env.observation_space
        self._flatten_dict = isinstance(space, spaces.Dict)
        if self._flatten_dict:
            space = spaces.flatten_space(space)
        if not isinstance(space, spaces.Box) or len(space.shape) == 0:
            raise ValueError(
                "ObservationalDropoutWrapper needs a Box observation space, flat or an image "
                f"(a Dict is flattened), got {env.observation_space}"
            )
        self.image = len(space.shape) > 1
        self._true_space = space
        action = env.action_space
        if isinstance(action, spaces.Box):
            self.action_size = int(np.prod(action.shape))
            act_low = np.broadcast_to(action.low, action.shape).reshape(-1)
            act_high = np.broadcast_to(action.high, action.shape).reshape(-1)
        elif isinstance(action, spaces.Discrete):
            self.action_size = int(action.n)
            act_low, act_high = np.zeros(self.action_size), np.ones(self.action_size)
        else:
            raise ValueError(
                f"ObservationalDropoutWrapper needs a Box or Discrete action space, got {action}"
            )
        self.obs_size = int(np.prod(space.shape))
        self._previous_action = np.zeros(self.action_size, dtype=np.float32)
        if self.image:
            shown = spaces.Box(
                np.minimum(space.low, 0).astype(space.dtype),
                np.maximum(space.high, 0).astype(space.dtype),
                dtype=space.dtype,  # type: ignore[arg-type]
            )
            parts: dict[str, spaces.Space[Any]] = {
                "observation": shown,
                "peek": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
                "previous_action": spaces.Box(
                    act_low.astype(np.float32), act_high.astype(np.float32), dtype=np.float32
                ),
            }
            if self.expose_true_obs:
                parts["true_observation"] = space
            self.observation_space = spaces.Dict(parts)  # type: ignore[assignment]
            return
        low = np.concatenate([np.minimum(space.low, 0.0), [0.0], act_low])
        high = np.concatenate([np.maximum(space.high, 0.0), [1.0], act_high])
        if self.expose_true_obs:
            low, high = np.concatenate([low, space.low]), np.concatenate([high, space.high])
        low, high = low.astype(np.float32), high.astype(np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)

    def _encode_action(self, action: Any) -> np.ndarray:
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            one_hot = np.zeros(self.action_size, dtype=np.float32)
            one_hot[int(action) - int(space.start)] = 1.0
            return one_hot
        assert isinstance(space, spaces.Box)
        applied = np.clip(
            np.asarray(action, dtype=np.float32).reshape(space.shape), space.low, space.high
        )
        return applied.reshape(-1).astype(np.float32)

    def _true(self, obs: Any) -> np.ndarray:
        if self._flatten_dict:
            obs = spaces.flatten(self.env.observation_space, obs)
        if self.image:
            return np.asarray(obs, dtype=self._true_space.dtype)
        return np.asarray(obs, dtype=np.float32).reshape(-1)

    def _masked(self, true_obs: np.ndarray, peek: bool) -> Any:
        shown = true_obs if peek else np.zeros_like(true_obs)
        if self.image:
            masked = {
                "observation": shown,
                "peek": np.array([float(peek)], dtype=np.float32),
                "previous_action": self._previous_action.copy(),
            }
            if self.expose_true_obs:
                masked["true_observation"] = true_obs
            return masked
        parts: list[np.ndarray] = [shown, np.array([float(peek)]), self._previous_action]
        if self.expose_true_obs:
            parts.append(true_obs)
        return np.concatenate(parts).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._previous_action = np.zeros(self.action_size, dtype=np.float32)
        true_obs = self._true(obs)
        info = dict(info, true_obs=true_obs, peek=True)  # the first step always peeks
        return self._masked(true_obs, True), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            chosen = np.asarray(action).reshape(-1)
            if (
                chosen.size != 1
                or not np.issubdtype(chosen.dtype, np.integer)
                or not space.contains(int(chosen[0]))
            ):
                raise ValueError(f"action must be one of the actions of {space}, got {action!r}")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._previous_action = self._encode_action(action)
        peek = bool(self.env.np_random.random() < self.peek_prob)
        true_obs = self._true(obs)
        info = dict(info, true_obs=true_obs, peek=peek)
        return self._masked(true_obs, peek), float(reward), terminated, truncated, info
