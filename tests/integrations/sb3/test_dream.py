"""WorldModelEnv: a world model as an environment, the true reward on its states."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from sb3_contrib import RecurrentPPO
from stable_baselines3 import PPO

from paperports.adapters.cartpole_swingup import cartpole_swingup_step, observation
from paperports.integrations.sb3 import (
    CartPoleWorldModel,
    MlpWorldModel,
    ObservationalDropoutPolicy,
    ObservationalDropoutWrapper,
    WorldModel,
    WorldModelEnv,
    cartpole_reward,
)


class ExactModel(WorldModel):
    """The true dynamics as a world model: the dream must then match the real env."""

    def __init__(self) -> None:
        super().__init__(5, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        o = obs.double().numpy()
        state = np.stack([o[:, 0], o[:, 1], np.arctan2(o[:, 3], o[:, 2]), o[:, 4]], axis=-1)
        nxt = cartpole_swingup_step(state, action[:, 0].double().numpy())
        return torch.as_tensor(observation(nxt))


def test_with_the_true_dynamics_the_dream_is_the_real_env() -> None:
    dream = WorldModelEnv(
        ExactModel(), gym.make("paperports/CartPoleSwingUpHarder-v0"), track_truth=True
    )
    obs, info = dream.reset(seed=3)
    np.testing.assert_array_equal(obs, info["true_obs"])
    rng = np.random.default_rng(0)
    for _ in range(50):
        obs, reward, terminated, _, info = dream.step(rng.uniform(-1, 1, 1).astype(np.float32))
        np.testing.assert_allclose(obs, info["true_obs"], atol=1e-4)
        assert reward == pytest.approx(cartpole_reward(info["true_obs"]), abs=1e-4)
        if terminated:
            break


def test_a_dream_runs_on_a_learned_model_and_renders_belief_over_truth() -> None:
    model = CartPoleWorldModel()
    dream = WorldModelEnv(
        model,
        gym.make("paperports/CartPoleSwingUpHarder-v0"),
        render_mode="rgb_array",
        max_episode_steps=30,
    )
    check_env(WorldModelEnv(model, gym.make("paperports/CartPoleSwingUpHarder-v0")))
    dream.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        _, reward, terminated, truncated, _ = dream.step(np.zeros(1, dtype=np.float32))
        assert math.isfinite(reward)
        steps += 1
        if terminated:
            break
    frame = dream.render()
    assert frame is not None and frame.shape == (400, 600, 3)
    assert (frame == np.array([120, 160, 240])).all(-1).any()  # the belief's pole


def test_a_policy_trained_in_the_dream_of_an_agents_model_runs_in_the_real_env() -> None:
    """The paper's transfer experiment, end to end on a tiny budget: take the world model of
    an observational-dropout agent, train a fresh PPO policy inside it, evaluate for real."""
    real = ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)
    agent = RecurrentPPO(
        ObservationalDropoutPolicy,
        real,
        n_steps=64,
        batch_size=32,
        n_epochs=1,
        seed=0,
        policy_kwargs={"world_model": "cartpole"},
    )
    agent.learn(64)
    dream = WorldModelEnv(
        agent.policy.world_model,
        gym.make("paperports/CartPoleSwingUpHarder-v0"),
        max_episode_steps=64,
    )
    fresh = PPO("MlpPolicy", dream, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    untrained = [p.detach().clone() for p in fresh.policy.parameters()]
    fresh.learn(128)
    assert fresh.num_timesteps == 128 and isinstance(
        fresh.get_env().envs[0].unwrapped, WorldModelEnv
    )
    assert any(
        not torch.equal(p, q) for p, q in zip(fresh.policy.parameters(), untrained, strict=True)
    )
    # deployed for real: one deterministic episode, scored by the real env's reward
    env = gym.make("paperports/CartPoleSwingUpHarder-v0")
    obs, _ = env.reset(seed=0)
    rewards = []
    for _ in range(100):
        action, _ = fresh.predict(obs, deterministic=True)
        assert env.action_space.contains(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        assert reward == pytest.approx(cartpole_reward(obs), abs=1e-5)
        if terminated or truncated:
            break
    assert rewards and all(r <= 1.0 for r in rewards)


def test_a_policy_trained_in_the_exact_dream_learns_what_the_real_env_teaches() -> None:
    """With the true dynamics as M, training in the dream is training in the real env: the
    same seed gives the same policy, to float rounding (the dream's observations are the
    model's float32 predictions)."""

    def trained(env: gym.Env) -> list[torch.Tensor]:  # type: ignore[type-arg]
        ppo = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
        ppo.learn(128)
        return [p.detach() for p in ppo.policy.parameters()]

    real = gym.wrappers.TimeLimit(gym.make("paperports/CartPoleSwingUpHarder-v0").unwrapped, 64)
    dream = WorldModelEnv(
        ExactModel(), gym.make("paperports/CartPoleSwingUpHarder-v0"), max_episode_steps=64
    )
    for a, b in zip(trained(dream), trained(real), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_bad_arguments() -> None:
    real = gym.make("paperports/CartPoleSwingUpHarder-v0")
    with pytest.raises(ValueError, match="predicts 4 values"):
        WorldModelEnv(MlpWorldModel(4, 1), real)
    with pytest.raises(ValueError, match="render_mode"):
        WorldModelEnv(CartPoleWorldModel(), real, render_mode="human")
    with pytest.raises(ValueError, match="Box action"):
        WorldModelEnv(MlpWorldModel(4, 1), gym.make("CartPole-v1"))
