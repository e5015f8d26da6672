"""The observational-dropout experiment's pieces on a tiny budget."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy

from paperports.adapters.cartpole_swingup import cartpole_swingup_step, observation
from paperports.experiments.obsdrop.agents import (
    DREAM_OFFSET,
    N_ENVS,
    PREDICTION_OFFSET,
    AgentRun,
    _wrapped_for,
    agent_env,
    dream_transfer,
    episode_returns,
    eval_seed,
    evaluate_recurrent,
    make_agent,
    model_rollout,
    prediction_error,
    run_agent,
    train_agent,
)
from paperports.experiments.obsdrop.reproduce import _pooled, _verdict, run_agents
from paperports.experiments.obsdrop.run_cache import RunCache
from paperports.integrations.sb3 import ObservationalDropoutPolicy, WorldModel
from paperports.registry import RunContext


def test_agent_evaluation_dream_transfer_and_rollout_run() -> None:
    agent = train_agent(0.1, 1024, seed=0)
    assert isinstance(agent.policy, ObservationalDropoutPolicy)
    assert agent.n_envs == N_ENVS and agent.num_timesteps >= 1024  # side by side, as reproduced
    returns = evaluate_recurrent(agent, 0.1, episodes=3, seed=0)
    # each is the return of that seed's episode, stepped one action at a time
    by_hand = [_one_episode(agent, 0.1, seed) for seed in range(3)]
    np.testing.assert_allclose(returns, by_hand, rtol=1e-4)
    assert len(set(np.round(returns, 3))) == 3
    dream = dream_transfer(agent, 256, seed=0, episodes=1)
    assert dream == dream_transfer(agent, 256, seed=0, episodes=1)  # seeded end to end
    rollout = model_rollout(agent, 0.1, steps=60, seed=0)
    truth, belief, peeks = rollout["truth"], rollout["belief"], rollout["peeks"]
    assert truth.shape == belief.shape == (60, 5) and peeks[0]
    np.testing.assert_allclose(belief[peeks], truth[peeks], atol=1e-6)  # a peek is the truth
    assert rollout["frames"].shape[1:] == (200, 300, 3)
    lstm = train_agent(0.1, 1024, seed=0, policy="MlpLstmPolicy")
    lstm_return = evaluate_recurrent(lstm, 0.1, episodes=1, seed=0)[0]
    assert lstm_return == pytest.approx(_one_episode(lstm, 0.1, 0), rel=1e-4)


def _one_episode(agent: Any, p: float, seed: int) -> float:
    """One deterministic episode of ``agent`` in its wrapped env, a step at a time."""
    env = _wrapped_for(agent, p)
    obs, _ = env.reset(seed=seed)
    state, start, total = None, np.array([True]), 0.0
    while True:
        action, state = agent.predict(obs, state=state, episode_start=start, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, start = total + float(reward), np.array([False])
        if terminated or truncated:
            return total


def test_batched_episodes_are_the_episodes_one_at_a_time() -> None:
    """``episode_returns`` runs many episodes per policy call; each is still its own seeded
    episode with its own recurrent state, whatever the batch it lands in."""
    agent = train_agent(0.1, 1024, seed=0)

    def act(obs: np.ndarray, state: Any, starts: np.ndarray) -> tuple[np.ndarray, Any]:
        return agent.predict(obs, state=state, episode_start=starts, deterministic=True)

    def make() -> Any:
        return agent_env(0.1, 0, {"privileged_critic": True}).envs[0]

    alone = episode_returns(make, act, 5, seed=7, batch=1)
    together = episode_returns(make, act, 5, seed=7, batch=3)  # a batch of 3, then of 2
    np.testing.assert_allclose(together, alone, rtol=1e-4)
    assert len(set(np.round(alone, 3))) == 5  # five different episodes
    np.testing.assert_allclose(episode_returns(make, act, 3, seed=9), alone[2:], rtol=1e-4)
    with pytest.raises(ValueError, match="episodes must be >= 1"):
        episode_returns(make, act, 0, seed=0)
    assert eval_seed(1) - eval_seed(0) == 1_000  # each agent its own episodes
    # the return's, the dream's and M's error's episodes: disjoint blocks for ten seeds
    starts = [eval_seed(s, o) for s in range(10) for o in (0, DREAM_OFFSET, PREDICTION_OFFSET)]
    gaps = np.diff(sorted(starts))
    assert len(starts) == 30 and (gaps >= 1_000).all()


class TrueDynamics(WorldModel):
    """The true dynamics as a world model: what a perfect M would predict."""

    def __init__(self) -> None:
        super().__init__(obs_size=5, action_size=1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        o = obs.detach().double().numpy()
        state = np.stack([o[:, 0], o[:, 1], np.arctan2(o[:, 3], o[:, 2]), o[:, 4]], axis=-1)
        nxt = cartpole_swingup_step(state, action.detach().double().numpy()[:, 0])
        return torch.as_tensor(observation(nxt))


def test_prediction_error_is_zero_for_the_true_dynamics_and_not_otherwise() -> None:
    agent = train_agent(0.1, 256, seed=0)
    assert prediction_error(agent, 0.1, 200, seed=0) > 1e-3  # an untrained model
    agent.policy.lstm_actor.world_model = TrueDynamics()
    assert prediction_error(agent, 0.1, 200, seed=0) < 1e-9


def test_worker_processes_give_the_same_results_as_one_process(tmp_path: Path) -> None:
    runs = [AgentRun("obsdrop", 0.1, 3), AgentRun("ceiling", 1.0, 4)]
    threads = torch.get_num_threads()
    # Two rollouts: with the decaying learning rate a single one would train at lr 0.
    here = run_agents(runs, 4096, 1024, 1, RunContext(tmp_path, quiet=True))
    assert torch.get_num_threads() == threads  # one thread during the runs, then restored
    cache = RunCache(tmp_path / "runs", {"steps": 4096}, "test")
    there = run_agents(runs, 4096, 1024, 1, RunContext(tmp_path, quiet=True, jobs=2), cache)
    assert [cache.load(run) for run in runs] == there  # each saved as it finished
    for a, b in zip(here, there, strict=True):
        assert {k: v for k, v in a.items() if k != "agent"} == {
            k: v for k, v in b.items() if k != "agent"
        }
    obsdrop, ceiling = there
    assert len(obsdrop["returns"]) == 1 and obsdrop["return"] == obsdrop["returns"][0]
    assert obsdrop["dream"] is not None and obsdrop["error"] > 0 and obsdrop["agent"]
    assert ceiling["dream"] is None and ceiling["error"] is None
    assert isinstance(PPO.load(io.BytesIO(ceiling["agent"])).policy, ActorCriticPolicy)


def test_an_unknown_run_kind_is_refused_here_and_in_a_worker(tmp_path: Path) -> None:
    bad = AgentRun("ppo", 0.1, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'obsdrop', 'lstm' or 'ceiling', got 'ppo'"):
        run_agent(bad, 1024, 1024, 1)
    with pytest.raises(ValueError, match="got 'ppo'"):  # raised again in this process
        run_agents([bad, bad], 1024, 1024, 1, RunContext(tmp_path, quiet=True, jobs=2))


def test_the_critics_route_the_losses_as_named() -> None:
    """The reproduction's agent has the privileged critic (and the wrapper that feeds it);
    the value route lets the critic train a scaled M; the belief critic is detached."""
    agent = train_agent(0.1, 256, seed=0)
    policy = agent.policy
    assert isinstance(policy, ObservationalDropoutPolicy) and policy.privileged_critic
    assert agent.observation_space.shape == (5 + 1 + 1 + 5,)  # the true observation appended
    assert not policy.critic_trains_world_model and policy.prediction_loss_coef == 0.0
    routed = train_agent(0.1, 256, seed=0, critic="value_route").policy
    assert isinstance(routed, ObservationalDropoutPolicy)
    assert routed.critic_trains_world_model and not routed.privileged_critic
    assert routed.world_model.acceleration_scale == 10.0
    belief = train_agent(0.1, 256, seed=0, critic="belief")
    assert isinstance(belief.policy, ObservationalDropoutPolicy)
    assert not belief.policy.critic_trains_world_model and not belief.policy.privileged_critic
    assert belief.observation_space.shape == (5 + 1 + 1,)
    # scored in its own layout (no true observation appended)
    assert evaluate_recurrent(belief, 0.1, episodes=1, seed=0)[0] == pytest.approx(
        _one_episode(belief, 0.1, 0), rel=1e-4
    )
    with pytest.raises(ValueError, match="need ObservationalDropoutPolicy"):
        train_agent(0.1, 256, seed=0, policy="MlpLstmPolicy", critic="value_route")
    with pytest.raises(ValueError, match="critic must be one of"):
        train_agent(0.1, 256, seed=0, critic="oracle")  # type: ignore[arg-type]


def test_agent_env_has_the_layout_its_policy_reads() -> None:
    """``agent_env`` (the long-run example's env, before its ``VecNormalize``) appends the
    true observation exactly when the policy has a privileged critic."""
    plain = agent_env(0.1, 0)
    assert plain.num_envs == N_ENVS and plain.observation_space.shape == (5 + 1 + 1,)
    privileged = {"privileged_critic": True}
    exposed = agent_env(0.1, 0, privileged)
    assert exposed.observation_space.shape == (5 + 1 + 1 + 5,)
    policy = make_agent(0.1, 0, env=exposed, policy_kwargs=privileged).policy
    assert isinstance(policy, ObservationalDropoutPolicy) and policy.privileged_critic
    with pytest.raises(ValueError, match="expose_true_obs=True"):
        make_agent(0.1, 0, env=plain, policy_kwargs=privileged)


def test_the_goal_verdict_says_when_the_mean_is_within_its_noise() -> None:
    """550.7 with a standard error of 10.5 clears 550 by the mean only: the report says so,
    and calls neither a clear pass nor a clear miss one that is within two errors."""
    assert _verdict(600.0, 10.0, 550).startswith("reached (580-620")
    assert "not beyond its noise" in _verdict(550.7, 10.5, 550)
    assert _verdict(545.0, 10.0, 550).startswith("**not reached**, though within the noise")
    assert _verdict(487.0, 10.0, 550).startswith("**not reached** (467-507")
    assert _verdict(551.0, float("nan"), 550) == "reached"


def test_pooled_returns_weigh_every_episode_alike() -> None:
    mean, error, count = _pooled([[0.0, 2.0], [4.0, 6.0, 8.0]])
    assert (mean, count) == (4.0, 5)
    assert error == pytest.approx(np.std([0, 2, 4, 6, 8], ddof=1) / np.sqrt(5))
    assert _pooled([])[2] == 0 and np.isnan(_pooled([[1.0]])[1])
