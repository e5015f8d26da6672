r"""World models M for observational dropout (Freeman, Metz, Ha 2019).

A world model maps the observation the agent used last step and its last action to a
prediction of the current observation, :math:`\hat o_t = M(\tilde o_{t-1}, a_{t-1})`. It is
never trained to predict: its parameters change only through the reinforcement-learning
loss of the policy that uses its predictions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from paperports._checks import check_bool, check_float, check_floating_tensor, check_int

__all__ = ["CartPoleWorldModel", "MlpWorldModel", "WorldModel"]


def _mlp(in_size: int, hidden_sizes: tuple[int, ...], out_size: int, who: str) -> nn.Sequential:
    if isinstance(hidden_sizes, (str, bytes)) or not isinstance(hidden_sizes, (tuple, list)):
        raise TypeError(
            f"{who}: hidden_sizes must be a tuple of layer widths, got "
            f"{type(hidden_sizes).__name__}"
        )
    for i, size in enumerate(hidden_sizes):
        check_int(f"hidden_sizes[{i}]", size, minimum=1, who=who)
    layers: list[nn.Module] = []
    width = in_size
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), nn.Tanh()]
        width = size
    layers.append(nn.Linear(width, out_size))
    return nn.Sequential(*layers)


class WorldModel(nn.Module):
    """Base class: ``forward(obs, action) -> predicted next obs``, sizes declared.

    A model whose prediction passes through hidden units may expose them:
    :meth:`forward_with_hidden` returns them beside the prediction and ``hidden_size`` says
    how many there are (``None``: not exposed). The paper's CarRacing controller reads
    them (``ObservationalDropoutPolicy(controller_input=...)``)."""

    hidden_size: int | None = None

    def __init__(self, obs_size: int, action_size: int) -> None:
        super().__init__()
        who = type(self).__name__
        self.obs_size = check_int("obs_size", obs_size, minimum=1, who=who)
        self.action_size = check_int("action_size", action_size, minimum=1, who=who)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward_with_hidden(self, obs: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        """``(prediction, hidden units)``: the prediction and the activations of the last
        hidden layer that produced it, ``(..., hidden_size)``."""
        raise NotImplementedError(
            f"{type(self).__name__} does not expose hidden units (its hidden_size is None)"
        )

    def check_inputs(self, obs: Tensor, action: Tensor) -> None:
        """``obs`` ``(..., obs_size)`` and ``action`` ``(..., action_size)`` in the model's
        dtype (shapes and dtypes only: this runs at every step of the recurrent core)."""
        who = type(self).__name__
        dtype = next(self.parameters()).dtype if any(True for _ in self.parameters()) else None
        check_floating_tensor("obs", obs, dtype=dtype, who=who)
        check_floating_tensor("action", action, dtype=dtype, who=who)
        if obs.shape[-1:] != (self.obs_size,) or action.shape[-1:] != (self.action_size,):
            raise ValueError(
                f"{who}: obs must be (..., {self.obs_size}) and action (..., "
                f"{self.action_size}); got {tuple(obs.shape)} and {tuple(action.shape)}"
            )


class MlpWorldModel(WorldModel):
    """A generic world model: an MLP on ``[obs, action]`` predicting the next observation.

    Args:
        obs_size: Size of the (true) observation.
        action_size: Size of the encoded action.
        hidden_sizes: Hidden layer widths. (default: ``(64, 64)``)
        residual: Predict ``obs + MLP(...)`` instead of ``MLP(...)``. (default: ``False``)
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden_sizes: tuple[int, ...] = (64, 64),
        residual: bool = False,
    ) -> None:
        super().__init__(obs_size, action_size)
        self.net = _mlp(obs_size + action_size, hidden_sizes, obs_size, type(self).__name__)
        self.residual = check_bool("residual", residual, who=type(self).__name__)
        self.hidden_size = int(hidden_sizes[-1]) if hidden_sizes else None

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        self.check_inputs(obs, action)
        out: Tensor = self.net(torch.cat([obs, action], dim=-1))
        return obs + out if self.residual else out

    def forward_with_hidden(self, obs: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        """The prediction and the last hidden layer's tanh units (see :class:`WorldModel`)."""
        if self.hidden_size is None:
            return super().forward_with_hidden(obs, action)
        self.check_inputs(obs, action)
        hidden: Tensor = self.net[:-1](torch.cat([obs, action], dim=-1))
        out: Tensor = self.net[-1](hidden)
        return (obs + out if self.residual else out), hidden


class CartPoleWorldModel(WorldModel):
    r"""The paper's physics-structured world model for the cart-pole swing-up.

    An MLP predicts the two accelerations :math:`(\ddot x, \ddot\theta)` from the observation
    :math:`[x, \dot x, \cos\theta, \sin\theta, \dot\theta]` and the action; an explicit Euler
    step of ``dt`` then integrates them as the environment does (positions with the old
    velocities), rotating :math:`(\cos\theta, \sin\theta)` by :math:`\dot\theta\, dt`:

    .. math::
        x' = x + \dot x\, dt, \quad \dot x' = \dot x + \ddot x\, dt, \quad
        \theta' = \theta + \dot\theta\, dt, \quad \dot\theta' = \dot\theta + \ddot\theta\, dt

    The MLP's outputs are multiplied by ``acceleration_scale``: the swing-up's accelerations
    reach tens of m/s² and rad/s², far from what a freshly initialised MLP outputs.

    Args:
        hidden_sizes: Hidden layer widths of the acceleration MLP. (default: ``(32, 32)``)
        dt: The integration step, the environment's 0.01 s.
        acceleration_scale: The factor on the MLP's outputs. (default: ``1.0``)
        zero_init: Start the MLP's last layer at zero, so that M starts as the
            constant-velocity model (zero accelerations). (default: ``False``)
    """

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (32, 32),
        dt: float = 0.01,
        acceleration_scale: float = 1.0,
        zero_init: bool = False,
    ) -> None:
        super().__init__(obs_size=5, action_size=1)
        who = type(self).__name__
        self.dt = check_float("dt", dt, minimum=0.0, open_low=True, who=who)
        self.acceleration_scale = check_float(
            "acceleration_scale", acceleration_scale, minimum=0.0, open_low=True, who=who
        )
        check_bool("zero_init", zero_init, who=who)
        self.accelerations = _mlp(5 + 1, hidden_sizes, 2, who)
        self.hidden_size = int(hidden_sizes[-1]) if hidden_sizes else None
        if zero_init:
            last = self.accelerations[-1]
            assert isinstance(last, nn.Linear)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        return self.forward_with_hidden(obs, action)[0]

    def forward_with_hidden(self, obs: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        """The prediction and the acceleration MLP's last hidden units (see
        :class:`WorldModel`)."""
        self.check_inputs(obs, action)
        x, x_dot, cos, sin, theta_dot = obs.unbind(-1)
        hidden: Tensor = self.accelerations[:-1](torch.cat([obs, action], -1))
        acc: Tensor = self.acceleration_scale * self.accelerations[-1](hidden)
        x_acc, theta_acc = acc.unbind(-1)
        turn = theta_dot * self.dt
        prediction = torch.stack(
            [
                x + x_dot * self.dt,
                x_dot + x_acc * self.dt,
                cos * torch.cos(turn) - sin * torch.sin(turn),
                sin * torch.cos(turn) + cos * torch.sin(turn),
                theta_dot + theta_acc * self.dt,
            ],
            dim=-1,
        )
        return prediction, hidden
