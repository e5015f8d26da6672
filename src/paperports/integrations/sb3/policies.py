r"""The observational-dropout policy for sb3-contrib's ``RecurrentPPO``.

The agent (Freeman, Metz, Ha 2019) carries a world model M. At step :math:`t` it receives,
from :class:`~paperports.adapters.observational_dropout.ObservationalDropoutWrapper`,
:math:`[o_t \cdot \mathrm{peek}_t, \mathrm{peek}_t, a_{t-1}]`, and acts on

.. math::
    \tilde o_t = \mathrm{peek}_t \, o_t + (1 - \mathrm{peek}_t)\, M(\tilde o_{t-1}, a_{t-1})

so its recurrent state is the observation it used last step, :math:`\tilde o_{t-1}`. M is
trained only through the policy's reinforcement-learning loss; nothing asks it to predict.
The controller (``net_arch``, by default one hidden layer of 10 tanh units, like the paper's
5-10-1 controller) and the critic act on :math:`\tilde o_t`. By default the critic's input is
detached, as sb3-contrib does for a shared LSTM, so M's gradients come from the
policy-gradient loss only; with ``critic_trains_world_model=True`` the value loss (a
regression on the returns, so still the reward alone) trains M as well. With
``privileged_critic=True`` the critic reads the true observation :math:`o_t` instead, which
the wrapper appends for it (``expose_true_obs=True``): an asymmetric actor-critic, M still
trained by the policy gradient alone; with ``critic_reads_belief=True`` as well it reads both,
:math:`V(o_t, \tilde o_t)` (the belief detached), so the value can also depend on what the
agent believes, as the true state alone cannot say. The auxiliary prediction loss of the ablation
(``prediction_loss_coef > 0``) is the only term that asks M to predict.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.preprocessing import is_image_space, preprocess_obs
from stable_baselines3.common.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    MlpExtractor,
    NatureCNN,
)
from stable_baselines3.common.type_aliases import Schedule
from torch import Tensor, nn

from paperports._checks import check_bool, check_choice, check_float, check_int
from paperports.integrations.sb3.world_models import CartPoleWorldModel, MlpWorldModel, WorldModel

__all__ = ["CONTROLLER_INPUTS", "ObservationalDropoutPolicy", "WorldModelCore"]

CONTROLLER_INPUTS = ("belief", "belief_and_model_hidden", "model_hidden")
"""What the controller reads (``ObservationalDropoutPolicy(controller_input=...)``)."""


def _action_size(action_space: spaces.Space[Any]) -> int:
    if isinstance(action_space, spaces.Box):
        return int(torch.tensor(action_space.shape).prod())
    if isinstance(action_space, spaces.Discrete):
        return int(action_space.n)
    raise ValueError(
        f"ObservationalDropoutPolicy needs a Box or Discrete action space, got {action_space}"
    )


def _is_dropout_layout(space: spaces.Box, obs_size: int, exposed: bool) -> bool:
    """Whether ``space`` is the wrapper's: a peek flag in [0, 1] after ``obs_size`` values
    and, if ``exposed``, the true observation's bounds at the end matching the masked ones
    (the wrapper widens the masked bounds to include the zeros it shows)."""
    if obs_size < 1:
        return False
    flag = (float(space.low[obs_size]), float(space.high[obs_size]))
    if not exposed:
        return flag == (0.0, 1.0)
    low, high = space.low[-obs_size:], space.high[-obs_size:]
    return (
        flag == (0.0, 1.0)
        and bool(np.array_equal(np.minimum(low, 0.0), space.low[:obs_size]))
        and bool(np.array_equal(np.maximum(high, 0.0), space.high[:obs_size]))
    )


def _check_net_arch(net_arch: Any, who: str) -> None:
    """``None``, a list of layer widths, or ``dict(pi=[...], vf=[...])``, as SB3 takes it."""
    if net_arch is None:
        return
    lists = net_arch.items() if isinstance(net_arch, dict) else [("net_arch", net_arch)]
    for name, widths in lists:
        where = name if name == "net_arch" else f"net_arch[{name!r}]"
        if not isinstance(widths, (list, tuple)):
            raise TypeError(
                f"{who}: {where} must be a list of layer widths, got {type(widths).__name__}"
            )
        for i, width in enumerate(widths):
            check_int(f"{where}[{i}]", width, minimum=1, who=who)


class WorldModelCore(nn.Module):
    """The recurrent core: stands where ``RecurrentPPO``'s LSTM stands, with its call
    convention (``(T, B, F)`` inputs, ``(h, c)`` states of shape ``(1, B, obs_size)``).

    ``h`` holds :math:`\\tilde o_{t-1}`; ``c`` is unused (kept at zero). ``episode_starts``
    ``(T, B)``, if given, zeroes the state before the steps that start an episode (where the
    wrapper always peeks), so a whole rollout sequence runs in one call.

    While :meth:`recording_prediction_error` is active, each step also records M's squared
    prediction error on the steps where the true observation is known (peeks that do not
    start an episode): the auxiliary prediction loss of the ablation.

    ``output`` is what each step hands the controller: ``"belief"`` (:math:`\tilde o_t`),
    ``"belief_and_model_hidden"`` (:math:`\tilde o_t` and M's hidden units of the step's
    prediction, the paper's CarRacing controller) or ``"model_hidden"`` (M's hidden units
    alone, the paper's linear probe). The state stays :math:`\tilde o_t` either way.
    """

    def __init__(
        self,
        world_model: WorldModel,
        obs_size: int,
        action_size: int,
        output: str = "belief",
    ) -> None:
        super().__init__()
        self.world_model = world_model
        self.obs_size = obs_size
        self.action_size = action_size
        self.input_size = obs_size + 1 + action_size  # what RecurrentPPO reshapes with
        self.hidden_size = obs_size
        self.num_layers = 1
        self.output = check_choice("output", output, CONTROLLER_INPUTS, who="WorldModelCore")
        model_hidden = world_model.hidden_size if output != "belief" else 0
        if model_hidden is None:
            raise ValueError(
                f"controller_input={output!r} reads the world model's hidden units, but "
                f"{type(world_model).__name__} does not expose any (hidden_size is None)"
            )
        self.output_size = (0 if output == "model_hidden" else obs_size) + model_hidden
        self._errors: list[tuple[Tensor, Tensor]] | None = None

    def forward(
        self,
        inputs: Tensor,
        states: tuple[Tensor, Tensor],
        episode_starts: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        previous, cell = states
        used = previous[0]
        outputs = []
        for t, step in enumerate(inputs):
            masked = step[:, : self.obs_size]
            peek = step[:, self.obs_size : self.obs_size + 1]
            last_action = step[:, self.obs_size + 1 :]
            known = peek
            if episode_starts is not None:
                kept = (1.0 - episode_starts[t]).unsqueeze(-1)
                used, known = kept * used, kept * peek
            if self.output == "belief":
                predicted = self.world_model(used, last_action)
            else:
                predicted, hidden = self.world_model.forward_with_hidden(used, last_action)
            if self._errors is not None:
                error = ((predicted - masked) ** 2).sum(-1, keepdim=True)
                self._errors.append(((known * error).sum(), known.sum()))
            used = peek * masked + (1.0 - peek) * predicted
            if self.output == "belief":
                outputs.append(used)
            elif self.output == "model_hidden":
                outputs.append(hidden)
            else:
                outputs.append(torch.cat([used, hidden], dim=-1))
        return torch.stack(outputs), (used.unsqueeze(0), torch.zeros_like(cell))

    @contextmanager
    def recording_prediction_error(self) -> Iterator[list[tuple[Tensor, Tensor]]]:
        """Record ``(summed squared error, number of known steps)`` per step into the list
        this yields; only steps whose state did not start from a reset are counted."""
        self._errors = []
        try:
            yield self._errors
        finally:
            self._errors = None


class _JoinLoss(torch.autograd.Function):
    """``values`` unchanged; its backward also sends ``coef`` into ``loss``'s graph.

    ``RecurrentPPO.train`` backpropagates a loss built from the values that
    ``evaluate_actions`` returns; passing them through here adds ``coef * loss`` to it
    without overriding the algorithm's training loop."""

    @staticmethod
    def forward(ctx: Any, values: Tensor, loss: Tensor, coef: float) -> Tensor:
        ctx.coef = coef
        return values.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        return grad, grad.new_tensor(ctx.coef), None


class ObservationalDropoutPolicy(RecurrentActorCriticPolicy):
    """A recurrent actor-critic whose memory is a world model's belief of the observation.

    Use it as ``RecurrentPPO(ObservationalDropoutPolicy, env)`` with ``env`` wrapped in
    :class:`~paperports.adapters.observational_dropout.ObservationalDropoutWrapper`.

    :param observation_space: The wrapper's space, ``obs_size + 1 + action_size`` wide.
    :param action_space: ``Box`` or ``Discrete``.
    :param lr_schedule: Learning-rate schedule.
    :param world_model: ``"mlp"`` (:class:`MlpWorldModel`), ``"cartpole"``
        (:class:`CartPoleWorldModel`, the paper's physics-structured model) or a
        :class:`WorldModel` instance.
    :param world_model_kwargs: Keyword arguments of the named world model.
    :param net_arch: Controller and critic layers on the believed observation.
    :param activation_fn: Their activation.
    :param prediction_loss_coef: Weight of the auxiliary prediction loss, the ablation: M's
        mean squared error on the steps where the true observation is known (peeks past an
        episode's first step), added to ``RecurrentPPO``'s loss. 0 (the default, the
        paper's method): M learns from the reinforcement-learning loss alone. The last
        minibatch's error is kept in ``last_prediction_error``.
    :param critic_trains_world_model: Let the value loss's gradient reach M through
        :math:`\tilde o_t` (sb3-contrib detaches a shared LSTM's output from the critic;
        ``False``, the default, keeps that).
    :param privileged_critic: The critic sees the true observation :math:`o_t` instead of
        the belief :math:`\tilde o_t` (an asymmetric actor-critic: lower-variance advantages
        for the policy gradient, the only loss that then trains M). Needs
        ``ObservationalDropoutWrapper(..., expose_true_obs=True)``; the controller and M
        never see the appended observation.
    :param critic_reads_belief: With ``privileged_critic``, the critic reads the detached
        belief :math:`\tilde o_t` beside :math:`o_t`: :math:`V(o_t, \tilde o_t)`. The value
        of a partially observed state depends on what the agent knows of it, which
        :math:`o_t` alone cannot tell (Baisero & Amato 2022: a critic of the state alone
        is biased; one of the history and the state is not). M is still trained by the
        policy gradient alone.
    :param controller_input: What the controller (and a critic on the belief) reads:
        ``"belief"`` (:math:`\tilde o_t`, the default), ``"belief_and_model_hidden"``
        (:math:`\tilde o_t` and M's hidden units of the step's prediction, as the paper's
        CarRacing controller reads :math:`z` and M's 10 units) or ``"model_hidden"`` (M's
        hidden units alone; with ``net_arch=[]`` the paper's linear probe). The world model
        must expose hidden units (``"mlp"`` and ``"cartpole"`` do).
    :param kwargs: Other arguments of ``RecurrentActorCriticPolicy`` (the LSTM settings are
        fixed: the world model is the recurrent core).
    """

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        lr_schedule: Schedule,
        world_model: str | WorldModel = "mlp",
        world_model_kwargs: dict[str, Any] | None = None,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        prediction_loss_coef: float = 0.0,
        critic_trains_world_model: bool = False,
        privileged_critic: bool = False,
        critic_reads_belief: bool = False,
        controller_input: str = "belief",
        **kwargs: Any,
    ) -> None:
        if critic_trains_world_model and privileged_critic:
            raise ValueError(
                "critic_trains_world_model and privileged_critic exclude each other: a "
                "privileged critic sees the true observation, not the world model's belief"
            )
        if critic_reads_belief and not privileged_critic:
            raise ValueError(
                "critic_reads_belief needs privileged_critic=True: without it the critic "
                "already reads the belief, and nothing else"
            )
        who = "ObservationalDropoutPolicy"
        prediction_loss_coef = check_float(
            "prediction_loss_coef", prediction_loss_coef, minimum=0.0, who=who
        )
        for name, flag in [
            ("critic_trains_world_model", critic_trains_world_model),
            ("privileged_critic", privileged_critic),
            ("critic_reads_belief", critic_reads_belief),
        ]:
            check_bool(name, flag, who=who)
        _check_net_arch(net_arch, who)
        if not (isinstance(activation_fn, type) and issubclass(activation_fn, nn.Module)):
            raise TypeError(
                f"{who}: activation_fn must be an nn.Module class (e.g. torch.nn.Tanh), got "
                f"{activation_fn!r}"
            )
        if world_model_kwargs is not None and not isinstance(world_model_kwargs, dict):
            raise TypeError(
                f"{who}: world_model_kwargs must be a dict, got {type(world_model_kwargs).__name__}"
            )
        self.prediction_loss_coef = float(prediction_loss_coef)
        self.last_prediction_error = float("nan")
        self.critic_trains_world_model = bool(critic_trains_world_model)
        self.privileged_critic = bool(privileged_critic)
        self.critic_reads_belief = bool(critic_reads_belief)
        if kwargs.get("share_features_extractor", True) is not True:
            raise ValueError(
                f"{who}: share_features_extractor must be True: the world model is the shared "
                "recurrent core, which the actor and the critic read through one extractor"
            )
        action_size = _action_size(action_space)
        self.image_observations = isinstance(observation_space, spaces.Dict)
        if self.image_observations:
            assert isinstance(observation_space, spaces.Dict)
            obs_size = self._image_layout(observation_space, action_size, kwargs)
        else:
            obs_size = self._flat_layout(observation_space, action_size)
        for fixed in ("lstm_hidden_size", "n_lstm_layers", "shared_lstm", "enable_critic_lstm"):
            if fixed in kwargs:
                raise ValueError(f"{fixed} is fixed by ObservationalDropoutPolicy; drop it")
        self.obs_size = obs_size
        self.action_size = action_size
        self.world_model_name = world_model if isinstance(world_model, str) else "custom"
        self.world_model_kwargs = world_model_kwargs or {}
        self.controller_input = check_choice(
            "controller_input", controller_input, CONTROLLER_INPUTS, who=who
        )
        model = self._make_world_model(world_model)
        # the core replaces the parent's LSTM below; its output's width (what the controller
        # reads) is needed when the parent builds the controller
        core = WorldModelCore(model, obs_size, action_size, self.controller_input)
        self._core_output_size = core.output_size
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            net_arch=net_arch if net_arch is not None else [10],
            activation_fn=activation_fn,
            lstm_hidden_size=obs_size,
            n_lstm_layers=1,
            shared_lstm=True,
            enable_critic_lstm=False,
            **kwargs,
        )
        self.lstm_actor = core  # type: ignore[assignment]
        # The modules changed after the parent built its optimizer: build it again.
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _flat_layout(self, observation_space: spaces.Space[Any], action_size: int) -> int:
        """The true observation's size in the wrapper's flat layout, checked."""
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(
                "ObservationalDropoutPolicy needs the observations of ObservationalDropoutWrapper "
                f"(a flat Box, or a Dict around an image), got {observation_space}"
            )
        # [o * peek, peek, a_{t-1}], or [o * peek, peek, a_{t-1}, o] for a privileged critic
        width = int(observation_space.shape[0]) - 1 - action_size
        obs_size = width
        if self.privileged_critic:
            obs_size = width // 2 if width % 2 == 0 else 0  # 0: no layout fits, refused below
        if not _is_dropout_layout(observation_space, obs_size, self.privileged_critic):
            layout = (
                "ObservationalDropoutWrapper(..., expose_true_obs=True) (observations "
                "[o * peek, peek, previous action, o])"
                if self.privileged_critic
                else "ObservationalDropoutWrapper (observations [o * peek, peek, previous action]; "
                "with expose_true_obs=True, pass privileged_critic=True)"
            )
            raise ValueError(
                "ObservationalDropoutPolicy expects an environment wrapped in "
                f"paperports.adapters.observational_dropout.{layout}; this observation space "
                f"{observation_space} does not have that layout"
            )
        return obs_size

    def _image_layout(
        self, observation_space: spaces.Dict, action_size: int, kwargs: dict[str, Any]
    ) -> int:
        """The features' size for the wrapper's image layout, checked; sets the features
        extractor (SB3's ``NatureCNN`` for images unless one is given) in ``kwargs``. The
        world model then predicts in the extractor's feature space."""
        who = "ObservationalDropoutPolicy"
        keys = {"observation", "peek", "previous_action"}
        expected = keys | ({"true_observation"} if self.privileged_critic else set())
        if set(observation_space.spaces) != expected:
            raise ValueError(
                f"{who} expects an image environment wrapped in ObservationalDropoutWrapper"
                + (", expose_true_obs=True" if self.privileged_critic else "")
                + f": a Dict of {sorted(expected)}; got the keys "
                f"{sorted(observation_space.spaces)}"
                + (
                    " (with expose_true_obs=True, pass privileged_critic=True)"
                    if "true_observation" in observation_space.spaces
                    else ""
                )
            )
        previous = observation_space["previous_action"]
        if not isinstance(previous, spaces.Box) or previous.shape != (action_size,):
            raise ValueError(
                f"{who}: the observations' previous_action must have the action space's "
                f"{action_size} values, got {previous}"
            )
        image = observation_space["observation"]
        if kwargs.get("features_extractor_class") is None:
            kwargs["features_extractor_class"] = (
                NatureCNN if is_image_space(image, check_channels=False) else FlattenExtractor
            )
        extractor_kwargs = kwargs.get("features_extractor_kwargs") or {}
        probe = kwargs["features_extractor_class"](image, **extractor_kwargs)
        return int(probe.features_dim)

    def make_features_extractor(self) -> BaseFeaturesExtractor:
        """SB3's features extractor; for images, of the image alone (the peek and the
        previous action join its features in :meth:`extract_features`)."""
        if not self.image_observations:
            return super().make_features_extractor()
        space = self.observation_space
        assert isinstance(space, spaces.Dict)
        extractor: BaseFeaturesExtractor = self.features_extractor_class(
            space["observation"], **self.features_extractor_kwargs
        )
        return extractor

    def extract_features(  # type: ignore[override]  # SB3's own signature
        self, obs: Any, features_extractor: BaseFeaturesExtractor | None = None
    ) -> Tensor | tuple[Tensor, Tensor]:
        """SB3's features; for images, ``[f(o) * peek, peek, a_{t-1}]`` (and ``f(o)`` of the
        true image for a privileged critic), the layout the world-model core reads, with
        ``f`` the features extractor applied to the (masked) image."""
        if not self.image_observations:
            return super().extract_features(obs, features_extractor)
        extractor = features_extractor or self.features_extractor
        pre = preprocess_obs(obs, self.observation_space, normalize_images=self.normalize_images)
        assert isinstance(pre, dict)
        peek = pre["peek"].float()
        parts = [extractor(pre["observation"]) * peek, peek, pre["previous_action"].float()]
        if self.privileged_critic:
            parts.append(extractor(pre["true_observation"]))
        return torch.cat(parts, dim=-1)

    def _build_mlp_extractor(self) -> None:
        """sb3-contrib's controller and critic layers; a critic that reads the belief beside
        the true observation takes twice as many inputs."""
        # the controller reads the core's output, which may carry M's hidden units too
        self.lstm_output_dim = self._core_output_size
        super()._build_mlp_extractor()
        if self.critic_reads_belief:
            wide = MlpExtractor(
                self.obs_size + self.lstm_output_dim,
                net_arch=self.net_arch,
                activation_fn=self.activation_fn,
                device=self.device,
            )
            self.mlp_extractor.value_net = wide.value_net
            self.mlp_extractor.latent_dim_vf = wide.latent_dim_vf

    @staticmethod
    def _process_sequence(
        features: Tensor,
        lstm_states: tuple[Tensor, Tensor],
        episode_starts: Tensor,
        lstm: nn.Module,
    ) -> tuple[Tensor, Any]:  # (output, (h, c)), as sb3-contrib's
        """As ``RecurrentActorCriticPolicy._process_sequence`` (the same layouts), but the
        world-model core takes the episode starts itself, so sequences with a reset in the
        middle run in one call instead of step by step."""
        if not isinstance(lstm, WorldModelCore):  # pragma: no cover - never built so
            return RecurrentActorCriticPolicy._process_sequence(
                features,
                lstm_states,
                episode_starts,
                lstm,  # type: ignore[arg-type]
            )
        n_seq = lstm_states[0].shape[1]
        sequence = features.reshape((n_seq, -1, lstm.input_size)).swapaxes(0, 1)
        starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)
        output, states = lstm(sequence, lstm_states, starts)
        return torch.flatten(output.transpose(0, 1), start_dim=0, end_dim=1), states

    def evaluate_actions(  # type: ignore[override]  # sb3-contrib's own signature
        self, obs: Tensor, actions: Tensor, lstm_states: RNNStates, episode_starts: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``RecurrentActorCriticPolicy.evaluate_actions``; with ``prediction_loss_coef > 0``
        it also records M's prediction error and joins it to the loss that ``RecurrentPPO``
        backpropagates through the returned values."""
        if self.prediction_loss_coef == 0:
            return self._evaluate(obs, actions, lstm_states, episode_starts)
        core = self.lstm_actor
        assert isinstance(core, WorldModelCore)
        with core.recording_prediction_error() as errors:
            values, log_prob, entropy = self._evaluate(obs, actions, lstm_states, episode_starts)
        if not errors:
            return values, log_prob, entropy
        summed = torch.stack([e for e, _ in errors]).sum()
        count = torch.stack([n for _, n in errors]).sum().clamp(min=1.0)
        loss = summed / (count * self.obs_size)  # mean squared error per known value
        self.last_prediction_error = float(loss.detach())
        joined: Tensor = _JoinLoss.apply(values, loss, self.prediction_loss_coef)  # type: ignore[no-untyped-call]
        return joined, log_prob, entropy

    def _latents(
        self, obs: Tensor, lstm_states: tuple[Tensor, ...], episode_starts: Tensor
    ) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
        """The belief :math:`\\tilde o_t` (the controller's input), the critic's input and the
        core's new state. The critic's input is the belief, detached unless
        ``critic_trains_world_model``, or the true observation for a privileged critic (with
        the detached belief after it if ``critic_reads_belief``)."""
        features = self.extract_features(obs)
        assert isinstance(features, Tensor)  # the features extractor is shared
        core_size = self.obs_size + 1 + self.action_size
        believed, states = self._process_sequence(
            features[:, :core_size],
            (lstm_states[0], lstm_states[1]),
            episode_starts,
            self.lstm_actor,
        )
        if self.privileged_critic:
            critic_input = features[:, core_size:]
            if self.critic_reads_belief:
                critic_input = torch.cat([critic_input, believed.detach()], dim=-1)
        elif self.critic_trains_world_model:
            critic_input = believed
        else:
            critic_input = believed.detach()
        return believed, critic_input, states

    def _values(self, critic_input: Tensor) -> Tensor:
        """The critic's value :math:`V` of its input (from :meth:`_latents`)."""
        values: Tensor = self.value_net(self.mlp_extractor.forward_critic(critic_input))
        return values

    def forward(  # type: ignore[override]  # sb3-contrib's own signature
        self,
        obs: Tensor,
        lstm_states: RNNStates,
        episode_starts: Tensor,
        deterministic: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, RNNStates]:
        """``RecurrentActorCriticPolicy.forward``, with the critic's input of :meth:`_latents`."""
        believed, critic_input, states = self._latents(obs, lstm_states.pi, episode_starts)
        distribution = self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(believed))
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        actions = actions.reshape((-1, *self.action_space.shape))  # type: ignore[misc]
        detached = (states[0].detach(), states[1].detach())
        return actions, self._values(critic_input), log_prob, RNNStates(states, detached)

    def get_distribution(  # type: ignore[override]  # sb3-contrib's own signature
        self, obs: Tensor, lstm_states: tuple[Tensor, Tensor], episode_starts: Tensor
    ) -> tuple[Distribution, tuple[Tensor, ...]]:
        """The action distribution on the belief, and the core's new state."""
        believed, _, states = self._latents(obs, lstm_states, episode_starts)
        return self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(believed)), states

    def predict_values(  # type: ignore[override]  # sb3-contrib's own signature
        self, obs: Tensor, lstm_states: tuple[Tensor, Tensor], episode_starts: Tensor
    ) -> Tensor:
        """The critic's values (of the belief, or of the true observation if privileged)."""
        _, critic_input, _ = self._latents(obs, lstm_states, episode_starts)
        return self._values(critic_input)

    def _evaluate(
        self, obs: Tensor, actions: Tensor, lstm_states: RNNStates, episode_starts: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        believed, critic_input, _ = self._latents(obs, lstm_states.pi, episode_starts)
        distribution = self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(believed))
        return self._values(critic_input), distribution.log_prob(actions), distribution.entropy()

    @property
    def world_model(self) -> WorldModel:
        """The world model M."""
        model = self.lstm_actor.world_model
        assert isinstance(model, WorldModel)
        return model

    def _make_world_model(self, world_model: str | WorldModel) -> WorldModel:
        if isinstance(world_model, WorldModel):
            model = world_model
        elif world_model == "mlp":
            model = MlpWorldModel(self.obs_size, self.action_size, **self.world_model_kwargs)
        elif world_model == "cartpole":
            model = CartPoleWorldModel(**self.world_model_kwargs)
        else:
            raise ValueError(
                f"world_model must be 'mlp', 'cartpole' or a WorldModel, got {world_model!r}"
            )
        try:
            with torch.no_grad():
                out = model(torch.zeros(2, self.obs_size), torch.zeros(2, self.action_size))
        except (RuntimeError, ValueError) as err:
            raise ValueError(
                f"the world model cannot take observations of {self.obs_size} values and "
                f"actions of {self.action_size} ({err})"
            ) from err
        if out.shape != (2, self.obs_size):
            raise ValueError(
                f"the world model predicts {tuple(out.shape[1:])} per observation, but the "
                f"environment's observations have {self.obs_size} values"
            )
        return model

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        for fixed in ("lstm_hidden_size", "n_lstm_layers", "shared_lstm", "enable_critic_lstm"):
            data.pop(fixed, None)
        if self.world_model_name == "custom":
            data["world_model"] = self.world_model
        else:
            data["world_model"] = self.world_model_name
        data["world_model_kwargs"] = self.world_model_kwargs
        data["prediction_loss_coef"] = self.prediction_loss_coef
        data["critic_trains_world_model"] = self.critic_trains_world_model
        data["privileged_critic"] = self.privileged_critic
        data["critic_reads_belief"] = self.critic_reads_belief
        data["controller_input"] = self.controller_input
        return data
