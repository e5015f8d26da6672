"""The world models: shapes and the cart-pole model's Euler structure."""

from __future__ import annotations

import math

import pytest
import torch

from paperports.integrations.sb3 import CartPoleWorldModel, MlpWorldModel


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_cartpole_model_integrates_its_accelerations_like_the_environment(scale: float) -> None:
    model = CartPoleWorldModel(acceleration_scale=scale)
    last = model.accelerations[-1]
    torch.nn.init.zeros_(last.weight)
    with torch.no_grad():  # x'' = 3, theta'' = -2 everywhere
        last.bias.copy_(torch.tensor([3.0, -2.0]) / scale)
    theta, theta_dot = 2.0, 4.0
    obs = torch.tensor([[0.5, 1.5, math.cos(theta), math.sin(theta), theta_dot]])
    out = model(obs, torch.zeros(1, 1))[0]
    dt = 0.01
    expected = [
        0.5 + 1.5 * dt,
        1.5 + 3.0 * dt,
        math.cos(theta + theta_dot * dt),
        math.sin(theta + theta_dot * dt),
        theta_dot - 2.0 * dt,
    ]
    torch.testing.assert_close(out, torch.tensor(expected))


def test_mlp_model_shapes_and_residual() -> None:
    model = MlpWorldModel(4, 2, hidden_sizes=(8,), residual=True)
    torch.nn.init.zeros_(model.net[-1].weight)
    torch.nn.init.zeros_(model.net[-1].bias)
    obs = torch.randn(3, 4)
    torch.testing.assert_close(model(obs, torch.randn(3, 2)), obs)
    with pytest.raises(ValueError, match=">= 1"):
        MlpWorldModel(0, 1)


def test_cartpole_model_can_start_as_the_constant_velocity_model() -> None:
    model = CartPoleWorldModel(acceleration_scale=10.0, zero_init=True)
    obs = torch.tensor([[0.5, 1.5, 0.0, 1.0, 4.0], [-1.0, -2.0, 1.0, 0.0, 0.0]])
    out = model(obs, torch.ones(2, 1))
    torch.testing.assert_close(out[:, 0], obs[:, 0] + 0.01 * obs[:, 1])
    torch.testing.assert_close(out[:, [1, 4]], obs[:, [1, 4]])  # no acceleration
    assert CartPoleWorldModel().accelerations[-1].weight.abs().max() > 0  # default: random
    with pytest.raises(ValueError, match="acceleration_scale must be a finite number > 0"):
        CartPoleWorldModel(acceleration_scale=0.0)
