"""The observational-dropout experiment's pieces on a tiny budget."""

from __future__ import annotations

import numpy as np

from paperports.experiments.obsdrop.reproduce import (
    dream_transfer,
    evaluate_recurrent,
    model_rollout,
    train_agent,
)
from paperports.integrations.sb3 import ObservationalDropoutPolicy


def test_agent_evaluation_dream_transfer_and_rollout_run() -> None:
    agent = train_agent(0.1, 1024, seed=0)
    assert isinstance(agent.policy, ObservationalDropoutPolicy)
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
