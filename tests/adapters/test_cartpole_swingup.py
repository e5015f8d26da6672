"""The paper's cart-pole swing-up: dynamics by hand, resets, reward, limits, rendering,
and both environment checkers."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import paperports.adapters  # noqa: F401  (registers the environments)
from paperports.adapters.cartpole_swingup import CartPoleSwingUpEnv, cartpole_swingup_step


def hand_step(state: list[float], a: float) -> list[float]:
    """The paper's equations, written out once more with scalars."""
    x, xd, th, thd = state
    f = 10.0 * max(-1.0, min(1.0, a))
    mp, mc, pole, g, b, dt = 0.5, 0.5, 0.6, 9.82, 0.1, 0.01
    s, c = math.sin(th), math.cos(th)
    xacc = (-2 * mp * pole * thd * thd * s + 3 * mp * g * s * c + 4 * f - 4 * b * xd) / (
        4 * (mp + mc) - 3 * mp * c * c
    )
    thacc = (-3 * mp * pole * thd * thd * s * c + 6 * (mp + mc) * g * s + 6 * (f - b * xd) * c) / (
        4 * pole * (mp + mc) - 3 * mp * pole * c * c
    )
    return [x + xd * dt, xd + xacc * dt, th + thd * dt, thd + thacc * dt]


def test_a_step_from_rest_hanging_down() -> None:
    """Hanging still at the centre, full force right: x'' = 40 / 2.5 = 16 and
    theta'' = -60 / 1.5 = -40; positions move with the old (zero) velocities."""
    nxt = cartpole_swingup_step(np.array([0.0, 0.0, math.pi, 0.0]), 1.0)
    np.testing.assert_allclose(nxt, [0.0, 0.16, math.pi, -0.4], atol=1e-12)


@pytest.mark.parametrize(
    ("state", "action"),
    [([0.5, -1.0, 2.0, 3.0], 0.3), ([-1.2, 2.5, -0.4, -6.0], -0.8), ([2.0, 0.1, 3.5, 1.0], 7.0)],
)
def test_steps_match_the_equations(state: list[float], action: float) -> None:
    env = CartPoleSwingUpEnv()
    env.reset(seed=0)
    env.state = np.array(state)
    obs, _, _, _, _ = env.step(np.array([action], dtype=np.float32))
    want = hand_step(state, float(np.float32(action)))
    np.testing.assert_allclose(env.state, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(
        obs, [want[0], want[1], math.cos(want[2]), math.sin(want[2]), want[3]], rtol=1e-5
    )
    a32 = float(np.float32(action))
    batch = cartpole_swingup_step(np.array([state, state]), np.array([a32, a32]))
    np.testing.assert_allclose(batch[1], want, rtol=1e-9)


def test_reward_termination_and_time_limit() -> None:
    env = CartPoleSwingUpEnv()
    env.reset(seed=0)
    env.state = np.array([0.0, 0.0, -0.01, 0.0])  # upright, centred: about 1 after a step
    _, r, terminated, _, _ = env.step(np.zeros(1, dtype=np.float32))
    assert r == pytest.approx(1.0, abs=1e-3) and not terminated
    env.state = np.array([0.0, 0.0, math.pi, 0.0])
    _, r, _, _, _ = env.step(np.zeros(1, dtype=np.float32))
    assert r == pytest.approx(0.0, abs=1e-6)
    env.state = np.array([2.399, 5.0, 0.0, 0.0])
    _, _, terminated, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
    assert terminated and not truncated
    limited = gym.make("paperports/CartPoleSwingUp-v0")
    limited.reset(seed=1)
    steps, truncated = 0, False
    while not truncated:
        _, _, terminated, truncated, _ = limited.step(np.zeros(1, dtype=np.float32))
        steps += 1
        assert not terminated
    assert steps == 1000


def test_resets_follow_the_papers_distributions() -> None:
    hard = gym.make("paperports/CartPoleSwingUpHarder-v0")
    easy = gym.make("paperports/CartPoleSwingUp-v0")
    hard_states, easy_states = [], []
    for seed in range(300):
        hard.reset(seed=seed)
        easy.reset(seed=seed)
        hard_states.append(hard.unwrapped.state.copy())
        easy_states.append(easy.unwrapped.state.copy())
    h, e = np.array(hard_states), np.array(easy_states)
    assert np.all(np.abs(h[:, 0]) <= 2.4) and np.all(np.abs(h[:, 1]) <= 10)
    assert np.all(np.abs(h[:, 2] - math.pi) <= math.pi / 2) and np.all(np.abs(h[:, 3]) <= 10)
    assert h[:, 0].std() > 1.0 and h[:, 1].std() > 4.0  # uniform, wide
    np.testing.assert_allclose(e.mean(0), [0, 0, math.pi, 0], atol=0.05)
    np.testing.assert_allclose(e.std(0), [0.2] * 4, rtol=0.15)
    hard.reset(seed=5)
    again = gym.make("paperports/CartPoleSwingUpHarder-v0")
    again.reset(seed=5)
    np.testing.assert_array_equal(hard.unwrapped.state, again.unwrapped.state)


def test_rgb_array_draws_the_pole_where_it_is() -> None:
    env = CartPoleSwingUpEnv(render_mode="rgb_array")
    env.reset(seed=0)
    env.state = np.array([0.0, 0.0, 0.0, 0.0])
    up = env.render()
    env.state = np.array([0.0, 0.0, math.pi, 0.0])
    down = env.render()
    assert up is not None and down is not None and up.shape == (400, 600, 3)
    pole = np.array([200, 120, 40])
    up_rows = np.where((up == pole).all(-1))[0]
    down_rows = np.where((down == pole).all(-1))[0]
    assert up_rows.mean() < 240 < down_rows.mean()  # above the track, then below it
    assert CartPoleSwingUpEnv().render() is None
    with pytest.raises(ValueError, match="render_mode"):
        CartPoleSwingUpEnv(render_mode="human")


def test_environment_checkers_pass() -> None:
    check_env(gym.make("paperports/CartPoleSwingUpHarder-v0").unwrapped)
    sb3_check_env(CartPoleSwingUpEnv(), warn=True)


def test_bad_actions_are_refused() -> None:
    env = CartPoleSwingUpEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one force"):
        env.step(np.zeros(2, dtype=np.float32))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan], dtype=np.float32))
