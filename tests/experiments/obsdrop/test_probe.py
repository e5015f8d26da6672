"""The world-model probe against models whose answers are known."""

from __future__ import annotations

import pytest
from stable_baselines3 import PPO

from experiments.obsdrop.test_obsdrop_experiments import TrueDynamics
from paperports.experiments.obsdrop.agents import prediction_error, train_agent
from paperports.experiments.obsdrop.probe import probe_world_model
from paperports.integrations.sb3 import CartPoleWorldModel


def test_the_true_dynamics_score_one_and_constant_velocity_zero() -> None:
    agent = train_agent(0.1, 256, seed=0)
    learned = probe_world_model(agent, 0.1, 300, seed=5)
    # the probe's error is the reproduction's one-step error on the same steps
    assert learned.error == pytest.approx(prediction_error(agent, 0.1, 300, seed=5), rel=1e-4)
    assert learned.skill == pytest.approx(1 - learned.error / learned.constant_velocity_error)

    agent.policy.lstm_actor.world_model = TrueDynamics()
    true = probe_world_model(agent, 0.1, 300, seed=5)
    assert true.error < 1e-9 and true.skill == pytest.approx(1.0)
    assert true.gain_x == pytest.approx(1.0) and true.gain_theta == pytest.approx(1.0)
    assert true.constant_velocity_error > 1e-4  # the swing-up does accelerate

    agent.policy.lstm_actor.world_model = CartPoleWorldModel(zero_init=True)
    still = probe_world_model(agent, 0.1, 300, seed=5)
    assert still.skill == pytest.approx(0.0, abs=1e-6)
    assert still.gain_x == 0.0 and still.gain_theta == 0.0
    assert set(still.as_dict()) == {
        "error",
        "constant_velocity_error",
        "skill",
        "gain_x",
        "gain_theta",
    }


def test_the_probe_refuses_what_it_cannot_measure() -> None:
    ppo = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32)
    with pytest.raises(TypeError, match="needs an ObservationalDropoutPolicy agent, got"):
        probe_world_model(ppo, 0.1, 100, seed=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs an ObservationalDropoutPolicy agent, got"):
        prediction_error(ppo, 0.1, 100, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="steps must be >= 2"):
        probe_world_model(train_agent(0.1, 256, seed=0), 0.1, 1, seed=0)
