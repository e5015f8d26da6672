r"""The cart-pole swing-up of Freeman, Metz and Ha (2019), as gymnasium environments.

The pole hangs down and must be swung up and balanced while the cart stays on its track.
The dynamics are the paper's (its own code's constants and equations), integrated with an
explicit Euler step of 0.01 s that moves the positions with the old velocities first:

.. math::
    \ddot{x} &= \frac{-2 m_p l \dot\theta^2 \sin\theta + 3 m_p g \sin\theta\cos\theta
        + 4F - 4b\dot{x}}{4(m_c + m_p) - 3 m_p \cos^2\theta} \\
    \ddot\theta &= \frac{-3 m_p l \dot\theta^2 \sin\theta\cos\theta + 6(m_c + m_p) g \sin\theta
        + 6(F - b\dot{x})\cos\theta}{4 l (m_c + m_p) - 3 m_p l \cos^2\theta}

with :math:`g = 9.82`, :math:`m_c = m_p = 0.5`, :math:`l = 0.6`, :math:`b = 0.1` and
:math:`F = 10a`, :math:`a \in [-1, 1]`. Observation :math:`[x, \dot x, \cos\theta,
\sin\theta, \dot\theta]`; reward :math:`\frac{\cos\theta + 1}{2}\cos\big(\frac{x}{2.4}
\frac{\pi}{2}\big)`, in :math:`[0, 1]` on the track (the step that leaves it can score
below 0), highest upright at the centre; the episode
terminates when :math:`|x| > 2.4` and is truncated after 1000 steps (by the ``TimeLimit``
that ``gymnasium.make`` adds).

Registered as ``paperports/CartPoleSwingUp-v0`` (easy reset: near hanging still at the
centre) and ``paperports/CartPoleSwingUpHarder-v0`` (the paper's: anywhere on the track,
fast, the pole anywhere in the lower half), each with a natively vectorised version in
torch as its ``vector_entry_point``
(:class:`~paperports.adapters.cartpole_swingup_vector.CartPoleSwingUpVectorEnv`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paperports._checks import check_bool
from paperports._imports import require

require("sb3", "gymnasium", feature="paperports.adapters.cartpole_swingup")

import gymnasium as gym  # noqa: E402
from gymnasium import spaces  # noqa: E402

__all__ = ["CartPoleSwingUpEnv", "cartpole_swingup_step", "register_envs", "swingup_reward"]

GRAVITY = 9.82
CART_MASS = 0.5
POLE_MASS = 0.5
POLE_LENGTH = 0.6
FORCE_MAG = 10.0
FRICTION = 0.1
DT = 0.01
X_THRESHOLD = 2.4
MAX_STEPS = 1000


def swingup_accelerations(
    x_dot: Any, theta_dot: Any, s: Any, c: Any, force: Any
) -> tuple[Any, Any]:
    """The paper's equations of motion: ``(x_acc, theta_acc)`` from the velocities, the
    sine and cosine of the angle and the force. Arithmetic alone, so the same code serves a
    Python float, a numpy array and a torch tensor (the single, batched and vectorised
    environments)."""
    total = CART_MASS + POLE_MASS
    x_acc = (
        -2 * POLE_MASS * POLE_LENGTH * theta_dot * theta_dot * s
        + 3 * POLE_MASS * GRAVITY * s * c
        + 4 * force
        - 4 * FRICTION * x_dot
    ) / (4 * total - 3 * POLE_MASS * c * c)
    theta_acc = (
        -3 * POLE_MASS * POLE_LENGTH * theta_dot * theta_dot * s * c
        + 6 * total * GRAVITY * s
        + 6 * (force - FRICTION * x_dot) * c
    ) / (4 * POLE_LENGTH * total - 3 * POLE_MASS * POLE_LENGTH * c * c)
    return x_acc, theta_acc


def cartpole_swingup_step(state: np.ndarray, action: float | np.ndarray) -> np.ndarray:
    """One explicit Euler step of the paper's dynamics: ``[x, x_dot, theta, theta_dot]``
    after applying ``action`` (clipped to ``[-1, 1]``) for ``DT`` seconds. Works on a
    single state ``(4,)`` or a batch ``(N, 4)`` with actions ``(N,)``."""
    state = np.asarray(state, dtype=np.float64)
    if state.ndim not in (1, 2) or state.shape[-1] != 4:
        raise ValueError(
            f"state must be [x, x_dot, theta, theta_dot], shape (4,) or (N, 4); got {state.shape}"
        )
    if not np.all(np.isfinite(action)):
        raise ValueError("action must be finite (a force in [-1, 1]); got NaN or infinity")
    x, x_dot, theta, theta_dot = np.moveaxis(state, -1, 0)
    force = FORCE_MAG * np.clip(action, -1.0, 1.0)
    x_acc, theta_acc = swingup_accelerations(x_dot, theta_dot, np.sin(theta), np.cos(theta), force)
    return np.stack(
        [
            x + x_dot * DT,
            x_dot + x_acc * DT,
            theta + theta_dot * DT,
            theta_dot + theta_acc * DT,
        ],
        axis=-1,
    )


def observation(state: np.ndarray) -> np.ndarray:
    """``[x, x_dot, cos(theta), sin(theta), theta_dot]`` of ``[x, x_dot, theta, theta_dot]``."""
    x, x_dot, theta, theta_dot = np.moveaxis(np.asarray(state, dtype=np.float64), -1, 0)
    return np.stack([x, x_dot, np.cos(theta), np.sin(theta), theta_dot], axis=-1).astype(np.float32)


def swingup_reward(x: float, cos_theta: float) -> float:
    """``(cos(theta) + 1) / 2 * cos(x / 2.4 * pi / 2)``: 1 upright at the centre."""
    return (cos_theta + 1.0) / 2.0 * math.cos(x / X_THRESHOLD * math.pi / 2.0)


class CartPoleSwingUpEnv(gym.Env[np.ndarray, np.ndarray]):
    """The paper's cart-pole swing-up.

    Args:
        harder: The paper's reset (``True``): ``x ~ U(-2.4, 2.4)``, ``x_dot ~ U(-10, 10)``,
            ``theta = pi + U(-pi/2, pi/2)``, ``theta_dot ~ U(-10, 10)``; otherwise the easy
            one, ``N([0, 0, pi, 0], 0.2^2)``.
        render_mode: ``None`` or ``"rgb_array"`` (a 400 x 600 image of the track, cart and
            pole, drawn with numpy).

    ``env.unwrapped.state`` is the numpy array ``[x, x_dot, theta, theta_dot]``; assigning
    one sets the state (for tests and for replaying a trajectory).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}  # noqa: RUF012

    def __init__(self, harder: bool = True, render_mode: str | None = None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.harder = check_bool("harder", harder, who="CartPoleSwingUpEnv")
        self.render_mode = render_mode
        high = np.array([np.inf] * 5, dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.state = np.zeros(4)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        if self.harder:
            self.state = np.array(
                [
                    rng.uniform(-X_THRESHOLD, X_THRESHOLD),
                    rng.uniform(-10.0, 10.0),
                    math.pi + rng.uniform(-math.pi / 2, math.pi / 2),
                    rng.uniform(-10.0, 10.0),
                ]
            )
        else:
            self.state = rng.normal([0.0, 0.0, math.pi, 0.0], 0.2)
        return observation(self.state), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.size != 1:
            raise ValueError(f"the action is one force in [-1, 1], got shape {np.shape(action)}")
        force = float(a[0])
        if not math.isfinite(force):
            raise ValueError(f"the action must be finite, got {force}")
        # The scalar form of cartpole_swingup_step, for speed on a single state.
        x, x_dot, theta, theta_dot = (float(v) for v in self.state)
        force = FORCE_MAG * min(max(force, -1.0), 1.0)
        x_acc, theta_acc = swingup_accelerations(
            x_dot, theta_dot, math.sin(theta), math.cos(theta), force
        )
        x, theta = x + x_dot * DT, theta + theta_dot * DT
        x_dot, theta_dot = x_dot + x_acc * DT, theta_dot + theta_acc * DT
        self.state = np.array([x, x_dot, theta, theta_dot])
        cos, sin = math.cos(theta), math.sin(theta)
        obs = np.array([x, x_dot, cos, sin, theta_dot], dtype=np.float32)
        # As the paper's code: the reward of the new state, also on the terminal step.
        return obs, swingup_reward(x, cos), abs(x) > X_THRESHOLD, False, {}

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode != "rgb_array":
            return None
        return draw_cartpole(self.state)


def draw_cartpole(
    state: np.ndarray,
    ghost: np.ndarray | None = None,
    height: int = 400,
    width: int = 600,
) -> np.ndarray:
    """An RGB image of the cart and pole at ``state``; ``ghost`` draws a second, lighter
    cart-pole (a world model's belief) over it."""
    image = np.full((height, width, 3), 255, dtype=np.uint8)
    scale = width / (2 * X_THRESHOLD + 1.0)
    ground = int(height * 0.6)
    image[ground : ground + 2, :] = 60

    def to_pixel(x: float, y: float) -> tuple[float, float]:
        return width / 2 + x * scale, ground - y * scale

    def line(
        p: tuple[float, float], q: tuple[float, float], color: tuple[int, ...], w: int
    ) -> None:
        steps = int(max(abs(q[0] - p[0]), abs(q[1] - p[1]))) + 1
        for t in np.linspace(0.0, 1.0, steps):
            cx, cy = p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])
            r0, r1 = int(max(cy - w, 0)), int(min(cy + w + 1, height))
            c0, c1 = int(max(cx - w, 0)), int(min(cx + w + 1, width))
            image[r0:r1, c0:c1] = color

    for s, cart, pole in (
        (state, (40, 40, 40), (200, 120, 40)),
        *(() if ghost is None else ((ghost, (150, 150, 220), (120, 160, 240)),)),
    ):
        x, _, theta, _ = np.asarray(s, dtype=np.float64)
        cx, cy = to_pixel(x, 0.0)
        half_w, half_h = 0.25 * scale, 0.08 * scale
        r0, r1 = int(max(cy - half_h, 0)), int(min(cy + half_h, height))
        c0, c1 = int(max(cx - half_w, 0)), int(min(cx + half_w, width))
        image[r0:r1, c0:c1] = cart
        tip = (x + POLE_LENGTH * math.sin(theta), POLE_LENGTH * math.cos(theta))
        line((cx, cy), to_pixel(*tip), pole, 3)
    return image


def register_envs() -> None:
    """Register the two environments with gymnasium (idempotent)."""
    for name, harder in (
        ("paperports/CartPoleSwingUp-v0", False),
        ("paperports/CartPoleSwingUpHarder-v0", True),
    ):
        if name not in gym.registry:
            gym.register(
                id=name,
                entry_point="paperports.adapters.cartpole_swingup:CartPoleSwingUpEnv",
                vector_entry_point=(
                    "paperports.adapters.cartpole_swingup_vector:CartPoleSwingUpVectorEnv"
                ),
                max_episode_steps=MAX_STEPS,
                kwargs={"harder": harder},
            )


register_envs()
