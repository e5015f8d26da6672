"""The vectorised swing-up: step for step the gymnasium environment, gymnasium's
``vector_entry_point`` and ``NEXT_STEP`` autoreset, the paper's reset distributions."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import paperports.adapters  # noqa: F401  (registers the environments)
from paperports.adapters.cartpole_swingup import MAX_STEPS, CartPoleSwingUpEnv
from paperports.adapters.cartpole_swingup_vector import CartPoleSwingUpVectorEnv, swingup_step


@pytest.mark.parametrize("harder", [True, False])
def test_each_environment_steps_as_the_gymnasium_environment(harder: bool) -> None:
    """From the same states and actions, the same trajectories, each up to its end."""
    n, steps = 32, 300
    rng = np.random.default_rng(0)
    vector = CartPoleSwingUpVectorEnv(n, harder=harder)
    vector.reset(seed=1)
    singles = [CartPoleSwingUpEnv(harder=harder) for _ in range(n)]
    for k, single in enumerate(singles):
        single.reset(seed=k)
        vector.state[k] = torch.as_tensor(single.state)
    running = np.ones(n, dtype=bool)
    compared = 0
    for _ in range(steps):
        actions = rng.uniform(-1.5, 1.5, size=(n, 1))  # beyond [-1, 1] too: both clip
        obs, rewards, terminated, truncated, _ = vector.step(actions)
        assert not truncated.any()
        for k in np.flatnonzero(running):
            s_obs, s_reward, s_terminated, _, _ = singles[k].step(actions[k])
            np.testing.assert_allclose(obs[k], s_obs, rtol=1e-6, atol=1e-6)
            assert rewards[k] == pytest.approx(s_reward, rel=1e-12, abs=1e-12)
            assert terminated[k] == s_terminated
            compared += 1
        running &= ~terminated  # a finished one resets at the next step: stop following it
    assert compared > n * 20 and (~running).any()  # long trajectories, and some ends


def test_make_vec_uses_the_vector_entry_point_and_autoresets_next_step() -> None:
    envs = gym.make_vec(
        "paperports/CartPoleSwingUpHarder-v0",
        num_envs=4,
        vectorization_mode="vector_entry_point",
    )
    assert isinstance(envs.unwrapped, CartPoleSwingUpVectorEnv)
    assert envs.unwrapped.max_episode_steps == MAX_STEPS and envs.unwrapped.harder
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 5) and obs.dtype == np.float32
    env = envs.unwrapped
    env.state[0, 0] = 2.39  # about to leave the track, moving right
    env.state[0, 1] = 5.0
    obs, rewards, terminated, truncated, _ = envs.step(np.zeros((4, 1), dtype=np.float32))
    assert terminated[0] and not terminated[1:].any()
    obs, rewards, terminated, truncated, _ = envs.step(np.zeros((4, 1), dtype=np.float32))
    assert rewards[0] == 0.0 and not terminated[0] and abs(obs[0, 0]) <= 2.4  # reset
    env.steps[1] = MAX_STEPS - 1
    _, _, terminated, truncated, _ = envs.step(np.zeros((4, 1), dtype=np.float32))
    assert truncated[1] and not truncated[[0, 2, 3]].any()


def test_resets_follow_the_papers_distributions() -> None:
    env = CartPoleSwingUpVectorEnv(20_000, harder=True)
    env.reset(seed=3)
    x, x_dot, theta, theta_dot = env.state.unbind(-1)
    assert x.abs().max() <= 2.4 and x_dot.abs().max() <= 10 and theta_dot.abs().max() <= 10
    assert theta.min() >= math.pi / 2 and theta.max() <= 3 * math.pi / 2
    assert abs(float(x.mean())) < 0.05 and abs(float(theta.mean()) - math.pi) < 0.05
    easy = CartPoleSwingUpVectorEnv(20_000, harder=False)
    easy.reset(seed=3)
    assert abs(float(easy.state[:, 2].std()) - 0.2) < 0.01
    env.reset(seed=3)
    again = env.state.clone()
    env.reset(seed=3)
    assert torch.equal(env.state, again)


def test_the_dynamics_batch_over_any_leading_shape() -> None:
    """A population's candidates times their episodes: (P, E, 4) states in one call."""
    states = torch.randn(3, 5, 4, dtype=torch.float64)
    actions = torch.rand(3, 5, dtype=torch.float64) * 2 - 1
    batched = swingup_step(states, actions)
    flat = swingup_step(states.reshape(15, 4), actions.reshape(15))
    torch.testing.assert_close(batched.reshape(15, 4), flat)


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.zeros((3, 1)), "one force per environment"),
        (np.full((4, 1), np.nan), "finite"),
    ],
)
def test_bad_actions_are_refused(actions: np.ndarray, match: str) -> None:
    env = CartPoleSwingUpVectorEnv(4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(actions)
