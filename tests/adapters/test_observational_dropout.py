"""The observational-dropout wrapper: what the policy sees, the peek statistics, seeding."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.envs import FakeImageEnv

import paperports.adapters  # noqa: F401
from paperports.adapters.observational_dropout import ObservationalDropoutWrapper


def wrapped(p: float, seed: int = 0) -> ObservationalDropoutWrapper:
    env = ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), p)
    env.reset(seed=seed)
    return env


def peeks(env: ObservationalDropoutWrapper, steps: int) -> list[bool]:
    out, action = [], np.zeros(1, dtype=np.float32)
    for _ in range(steps):
        _, _, terminated, truncated, info = env.step(action)
        out.append(info["peek"])
        if terminated or truncated:
            _, info = env.reset()
            out.append(info["peek"])
    return out


@pytest.mark.parametrize("p", [0.03, 0.1, 0.5])
def test_peek_rate_is_p_within_sampling_error(p: float) -> None:
    env = wrapped(p)
    mask = peeks(env, 20_000)
    rate = np.mean(mask)
    assert abs(rate - p) < 4 * np.sqrt(p * (1 - p) / len(mask)) + 0.01  # resets always peek


def test_first_step_of_every_episode_peeks() -> None:
    env = wrapped(0.01)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        assert info["peek"] and obs[5] == 1.0
        np.testing.assert_array_equal(obs[:5], info["true_obs"])


def test_same_seed_same_mask_and_other_seed_other_mask() -> None:
    a, b, c = wrapped(0.2, seed=7), wrapped(0.2, seed=7), wrapped(0.2, seed=8)
    first, second, third = peeks(a, 300), peeks(b, 300), peeks(c, 300)
    assert first == second and first != third


def test_policy_input_is_masked_observation_flag_and_previous_action() -> None:
    env = wrapped(0.5, seed=1)
    assert env.observation_space.shape == (5 + 1 + 1,)
    seen_hidden = seen_shown = False
    for action in np.linspace(-3, 3, 40):
        obs, _, _, _, info = env.step(np.array([action], dtype=np.float32))
        assert obs[6] == pytest.approx(np.clip(action, -1, 1))  # the action as applied
        if info["peek"]:
            np.testing.assert_array_equal(obs[:5], info["true_obs"])
            assert obs[5] == 1.0
            seen_shown = True
        else:
            assert np.all(obs[:5] == 0) and obs[5] == 0.0 and np.any(info["true_obs"] != 0)
            seen_hidden = True
    assert seen_hidden and seen_shown
    obs, _ = env.reset()
    assert obs[6] == 0.0  # no previous action at the start of an episode


def test_discrete_actions_are_one_hot_and_dicts_are_flattened() -> None:
    env = ObservationalDropoutWrapper(gym.make("CartPole-v1"), 0.5)
    env.reset(seed=0)
    obs, *_ = env.step(1)
    assert env.observation_space.shape == (4 + 1 + 2,)
    np.testing.assert_array_equal(obs[5:], [0.0, 1.0])
    dict_env = gym.wrappers.TransformObservation(
        gym.make("CartPole-v1"),
        lambda o: {"position": o[:2], "angle": o[2:]},
        gym.spaces.Dict(
            {
                "position": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                "angle": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
            }
        ),
    )
    flat = ObservationalDropoutWrapper(dict_env, 1.0)
    obs, info = flat.reset(seed=0)
    assert obs.shape == (4 + 1 + 2,) and info["true_obs"].shape == (4,)


def test_the_true_observation_is_appended_only_when_exposed() -> None:
    base = gym.make("paperports/CartPoleSwingUpHarder-v0")
    env = ObservationalDropoutWrapper(base, 0.3, expose_true_obs=True)
    assert env.observation_space.shape == (5 + 1 + 1 + 5,)
    np.testing.assert_array_equal(env.observation_space.high[7:], base.observation_space.high)
    obs, info = env.reset(seed=2)
    np.testing.assert_array_equal(obs[7:], info["true_obs"])
    plain = wrapped(0.3, seed=2)
    for _ in range(30):  # same seed, same mask and masked part as the plain wrapper
        obs, _, _, _, info = env.step(np.array([0.5], dtype=np.float32))
        plain_obs, *_ = plain.step(np.array([0.5], dtype=np.float32))
        np.testing.assert_array_equal(obs[:7], plain_obs)
        np.testing.assert_array_equal(obs[7:], info["true_obs"])  # also where not peeked


def test_checkers_pass_on_the_wrapped_env() -> None:
    check_env(wrapped(0.3))
    sb3_check_env(wrapped(0.3), warn=True)
    exposed = gym.make("paperports/CartPoleSwingUpHarder-v0")
    check_env(ObservationalDropoutWrapper(exposed, 0.3, expose_true_obs=True))


def test_bad_arguments_are_refused() -> None:
    base = gym.make("paperports/CartPoleSwingUpHarder-v0")
    for p in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"peek_prob must be a finite number in \(0.0, 1.0\]"):
            ObservationalDropoutWrapper(base, p)
    discrete = gym.make("FrozenLake-v1")
    with pytest.raises(ValueError, match="needs a Box observation space, flat or an image"):
        ObservationalDropoutWrapper(discrete, 0.5)


def test_images_are_masked_whole_in_a_dict_beside_the_peek_and_previous_action() -> None:
    """An image observation (SB3's FakeImageEnv) cannot be concatenated with the flag and
    the action: the wrapper gives SB3's layout for images beside vectors, a Dict."""
    env = ObservationalDropoutWrapper(
        FakeImageEnv(screen_height=36, screen_width=36, n_channels=3, discrete=False), 0.5
    )
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict) and env.image
    assert set(space.spaces) == {"observation", "peek", "previous_action"}
    assert space["observation"].shape == (36, 36, 3) and space["observation"].dtype == np.uint8
    obs, info = env.reset(seed=0)
    assert obs["peek"][0] == 1.0 and np.array_equal(obs["observation"], info["true_obs"])
    np.testing.assert_array_equal(obs["previous_action"], np.zeros(5, np.float32))
    seen = set()
    for _ in range(30):
        action = np.full(5, 2.0, np.float32)  # clipped to the action space's 1
        obs, _, _, _, info = env.step(action)
        assert space.contains(obs)
        np.testing.assert_array_equal(obs["previous_action"], np.ones(5, np.float32))
        shown = info["true_obs"] if info["peek"] else np.zeros_like(info["true_obs"])
        np.testing.assert_array_equal(obs["observation"], shown)
        assert obs["peek"][0] == float(info["peek"])
        seen.add(info["peek"])
    assert seen == {True, False}
    exposed = ObservationalDropoutWrapper(FakeImageEnv(discrete=True), 0.5, expose_true_obs=True)
    obs, info = exposed.reset(seed=0)
    np.testing.assert_array_equal(obs["true_observation"], info["true_obs"])
    sb3_check_env(exposed, warn=True)  # (gymnasium's checker: FakeImageEnv ignores seeds)
