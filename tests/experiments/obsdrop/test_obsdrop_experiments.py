"""The observational-dropout experiment's pieces on a tiny budget."""

from __future__ import annotations

import numpy as np
import torch

from paperports.adapters.cartpole_swingup import cartpole_swingup_step, observation
from paperports.experiments.obsdrop.reproduce import (
    N_ENVS,
    dream_transfer,
    evaluate_recurrent,
    model_rollout,
    prediction_error,
    train_agent,
)
from paperports.integrations.sb3 import ObservationalDropoutPolicy, WorldModel


def test_agent_evaluation_dream_transfer_and_rollout_run() -> None:
    agent = train_agent(0.1, 1024, seed=0)
    assert isinstance(agent.policy, ObservationalDropoutPolicy)
    assert agent.n_envs == N_ENVS and agent.num_timesteps >= 1024  # side by side, as reproduced
    value = evaluate_recurrent(agent, 0.1, episodes=1, seed=0)
    assert 0.0 <= value <= 1000.0
    assert 0.0 <= dream_transfer(agent, 1024, seed=0, episodes=1) <= 1000.0
    rollout = model_rollout(agent, 0.1, steps=60, seed=0)
    truth, belief, peeks = rollout["truth"], rollout["belief"], rollout["peeks"]
    assert truth.shape == belief.shape == (60, 5) and peeks[0]
    np.testing.assert_allclose(belief[peeks], truth[peeks], atol=1e-6)  # a peek is the truth
    assert rollout["frames"].shape[1:] == (200, 300, 3)
    lstm = train_agent(0.1, 1024, seed=0, policy="MlpLstmPolicy")
    assert evaluate_recurrent(lstm, 0.1, episodes=1, seed=0) >= 0.0


class _Oracle(WorldModel):
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
    agent.policy.lstm_actor.world_model = _Oracle()
    assert prediction_error(agent, 0.1, 200, seed=0) < 1e-9
