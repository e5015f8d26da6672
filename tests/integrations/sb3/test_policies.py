"""ObservationalDropoutPolicy inside sb3-contrib's RecurrentPPO: training, the world model's
gradients, save/load, predict with states, vectorised and discrete environments, image
observations through SB3's features extractors, bad use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import FlattenExtractor, NatureCNN

from paperports.integrations.sb3 import (
    CartPoleWorldModel,
    MlpWorldModel,
    ObservationalDropoutPolicy,
    ObservationalDropoutWrapper,
    WorldModelCore,
    population_returns,
)

SWINGUP = "paperports/CartPoleSwingUpHarder-v0"


def swingup(p: float = 0.1) -> ObservationalDropoutWrapper:
    return ObservationalDropoutWrapper(gym.make(SWINGUP), p)


def small_ppo(env: object, **policy_kwargs: object) -> RecurrentPPO:
    return RecurrentPPO(
        ObservationalDropoutPolicy,
        env,
        n_steps=64,
        batch_size=32,
        n_epochs=2,
        seed=0,
        policy_kwargs=policy_kwargs,
    )


def test_the_core_uses_the_observation_when_peeking_and_the_model_otherwise() -> None:
    model = small_ppo(swingup(), world_model="cartpole")
    core = model.policy.lstm_actor
    obs = torch.tensor([[0.1, 0.2, -1.0, 0.0, 0.5]])
    peeked = torch.cat([obs, torch.ones(1, 1), torch.tensor([[0.3]])], dim=1)
    hidden = torch.cat([torch.zeros(1, 5), torch.zeros(1, 1), torch.tensor([[0.7]])], dim=1)
    state = (torch.zeros(1, 1, 5), torch.zeros(1, 1, 5))
    out, (h, _) = core(torch.stack([peeked, hidden]), state)
    torch.testing.assert_close(out[0], obs)  # peek: the true observation
    predicted = model.policy.world_model(obs, torch.tensor([[0.7]]))
    torch.testing.assert_close(out[1], predicted)  # no peek: M(o~_{t-1}, a_{t-1})
    torch.testing.assert_close(h[0], predicted)


def test_recurrent_ppo_trains_the_world_model_through_the_policy_loss_only() -> None:
    model = small_ppo(swingup(), world_model="mlp")
    before = [p.detach().clone() for p in model.policy.world_model.parameters()]
    model.learn(256)
    after = list(model.policy.world_model.parameters())
    assert any((a - b).abs().max() > 0 for a, b in zip(before, after, strict=True))
    # The critic's input is detached: a value loss leaves M without gradient.
    policy = model.policy
    obs = torch.as_tensor(np.stack([swingup().reset(seed=s)[0] for s in range(4)]))
    states = (torch.zeros(1, 4, 5), torch.zeros(1, 4, 5))
    policy.zero_grad()
    policy.predict_values(obs, states, torch.zeros(4)).sum().backward()
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in policy.world_model.parameters())
    policy.zero_grad()
    dist, _ = policy.get_distribution(obs, states, torch.zeros(4))
    dist.log_prob(torch.zeros(4, 1)).sum().backward()
    # with peeking observations M is bypassed on the first step; the controller has grads
    assert policy.action_net.weight.grad is not None


def test_save_load_and_predict_with_state_and_episode_starts(tmp_path: Path) -> None:
    env = swingup(0.2)
    model = small_ppo(env, world_model="cartpole")
    model.learn(128)
    model.save(tmp_path / "agent.zip")
    loaded = RecurrentPPO.load(tmp_path / "agent.zip")
    assert isinstance(loaded.policy, ObservationalDropoutPolicy)
    assert isinstance(loaded.policy.world_model, CartPoleWorldModel)
    for a, b in zip(model.policy.parameters(), loaded.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    obs, _ = env.reset(seed=1)
    state, start = None, np.array([True])
    for _ in range(20):
        a1, s1 = model.predict(obs, state=state, episode_start=start, deterministic=True)
        a2, s2 = loaded.predict(obs, state=state, episode_start=start, deterministic=True)
        np.testing.assert_allclose(a1, a2, rtol=1e-6)
        np.testing.assert_allclose(s1[0], s2[0], rtol=1e-6)
        assert s1[0].shape == (1, 1, 5)
        obs, _, terminated, truncated, _ = env.step(a1)
        state, start = s1, np.array([terminated or truncated])


def test_vectorised_envs_and_discrete_actions() -> None:
    """Training on several envs moves the acting path; each env's belief is its own (a
    batch of three predicts what three single predictions give); discrete actions are
    one-hot encoded into the next observation."""
    vec = make_vec_env(
        SWINGUP,
        n_envs=3,
        seed=0,
        wrapper_class=ObservationalDropoutWrapper,
        wrapper_kwargs={"peek_prob": 0.1},
    )
    model = small_ppo(vec)
    before = [p.detach().clone() for p in model.policy.world_model.parameters()]
    model.learn(192)
    assert model.num_timesteps >= 192
    after = list(model.policy.world_model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    obs = vec.reset()
    starts = np.ones(3, dtype=bool)
    actions, state = model.predict(obs, episode_start=starts, deterministic=True)
    assert actions.shape == (3, 1) and state[0].shape == (1, 3, 5)
    for i in range(3):
        alone, alone_state = model.predict(
            obs[i : i + 1], episode_start=starts[:1], deterministic=True
        )
        np.testing.assert_allclose(actions[i], alone[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state[0][:, i], alone_state[0][:, 0], rtol=1e-5, atol=1e-6)
    discrete = make_vec_env(
        "CartPole-v1",
        n_envs=2,
        seed=0,
        wrapper_class=ObservationalDropoutWrapper,
        wrapper_kwargs={"peek_prob": 0.5},
    )
    model = small_ppo(discrete)
    assert model.policy.obs_size == 4 and model.policy.action_size == 2
    model.learn(128)
    obs = discrete.reset()
    actions, _ = model.predict(obs, episode_start=np.ones(2, dtype=bool), deterministic=True)
    assert actions.dtype.kind == "i" and set(actions.tolist()) <= {0, 1}
    after_step, *_ = discrete.step(actions)
    one_hot = after_step[:, 4 + 1 :]  # [o * peek, peek, previous action]
    np.testing.assert_array_equal(one_hot, np.eye(2)[actions])


def test_a_short_run_improves_on_cartpole_with_half_the_observations_dropped() -> None:
    env = make_vec_env(
        "CartPole-v1",
        n_envs=4,
        seed=0,
        wrapper_class=ObservationalDropoutWrapper,
        wrapper_kwargs={"peek_prob": 0.5},
    )
    model = RecurrentPPO(
        ObservationalDropoutPolicy,
        env,
        n_steps=128,
        batch_size=128,
        n_epochs=4,
        learning_rate=3e-3,
        seed=0,
    )
    before, _ = evaluate_policy(model, env, n_eval_episodes=10)
    model.learn(10_000)
    after, _ = evaluate_policy(model, env, n_eval_episodes=10)
    assert after > 2 * before and after > 35  # random play: about 20 steps


def test_bad_use_is_refused() -> None:
    with pytest.raises(ValueError, match="ObservationalDropoutWrapper"):
        small_ppo(gym.make(SWINGUP))  # not wrapped
    with pytest.raises(ValueError, match="cannot take observations of 5"):
        small_ppo(swingup(), world_model=MlpWorldModel(3, 1))
    wrong_output = MlpWorldModel(5, 1)
    wrong_output.net[-1] = torch.nn.Linear(64, 4)
    with pytest.raises(ValueError, match="predicts"):
        small_ppo(swingup(), world_model=wrong_output)
    with pytest.raises(ValueError, match="world_model must be"):
        small_ppo(swingup(), world_model="transformer")
    with pytest.raises(ValueError, match="fixed by ObservationalDropoutPolicy"):
        small_ppo(swingup(), lstm_hidden_size=64)


@pytest.mark.parametrize("coef", [float("nan"), float("inf"), -1.0])
def test_a_prediction_loss_coefficient_that_is_not_a_finite_weight_is_refused(
    coef: float,
) -> None:
    """NaN passed the `< 0` check and filled the parameters with NaN after learn(32)."""
    with pytest.raises(ValueError, match="prediction_loss_coef must be a finite number >= 0"):
        small_ppo(swingup(), prediction_loss_coef=coef)


def _rollout_batch(
    policy: ObservationalDropoutPolicy, n_seq: int, length: int, p: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """Observations ``(n_seq * length, F)`` (sequence-major, as RecurrentPPO flattens them)
    from real wrapped episodes, with episode starts in the middle of sequences."""
    env = ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUp-v0"), p)
    obs_rows, starts = [], []
    for k in range(n_seq):
        obs, _ = env.reset(seed=k)
        for t in range(length):
            start = t == 0 or (t == length // 2 and k % 2 == 0)
            if start and t > 0:
                obs, _ = env.reset(seed=100 + k)
            obs_rows.append(obs)
            starts.append(float(start))
            obs, *_ = env.step(env.action_space.sample())
    return torch.as_tensor(np.stack(obs_rows)), torch.tensor(starts)


def test_whole_sequences_with_resets_match_sb3_contribs_step_loop() -> None:
    """Our _process_sequence runs a sequence with episode starts inside it in one call and
    gives what sb3-contrib's step-by-step loop gives, outputs, states and gradients."""
    policy = small_ppo(swingup(), world_model="mlp").policy
    obs, starts = _rollout_batch(policy, n_seq=3, length=8)
    states = (torch.randn(1, 3, 5), torch.zeros(1, 3, 5))
    results = []
    for process in (
        ObservationalDropoutPolicy._process_sequence,
        RecurrentActorCriticPolicy._process_sequence,
    ):
        policy.zero_grad()
        out, (h, _) = process(obs, states, starts, policy.lstm_actor)
        (out.square().sum() + h.sum()).backward()
        results.append([out, h, *(p.grad for p in policy.world_model.parameters())])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)


def test_the_prediction_loss_ablation_adds_the_models_error_on_known_steps() -> None:
    torch.manual_seed(0)
    coef = 0.7
    policy = small_ppo(swingup(), world_model="mlp", prediction_loss_coef=coef).policy
    obs, starts = _rollout_batch(policy, n_seq=2, length=10)
    states = RNNStates((torch.zeros(1, 2, 5),) * 2, (torch.zeros(1, 2, 5),) * 2)
    actions = torch.zeros(len(obs), 1)
    policy.zero_grad()
    values, _, _ = policy.evaluate_actions(obs, actions, states, starts)
    (0.0 * values.sum()).backward()  # no reinforcement-learning signal at all
    grads = [p.grad.clone() for p in policy.world_model.parameters()]  # type: ignore[union-attr]

    # by hand: M's squared error where the observation is shown, past each episode's start
    policy.zero_grad()
    used = torch.zeros(2, 5)
    errors, known = [], []
    seq = obs.view(2, 10, -1).transpose(0, 1)
    for t, row in enumerate(seq):
        start = starts.view(2, 10)[:, t]
        used = (1 - start)[:, None] * used
        predicted = policy.world_model(used, row[:, 6:])
        peek = row[:, 5] * (1 - start)
        errors.append(peek * ((predicted - row[:, :5]) ** 2).sum(-1))
        known.append(peek)
        used = row[:, 5:6] * row[:, :5] + (1 - row[:, 5:6]) * predicted
    loss = torch.stack(errors).sum() / (torch.stack(known).sum() * 5)
    assert policy.last_prediction_error == pytest.approx(loss.item(), rel=1e-5)
    (coef * loss).backward()
    for g, p in zip(grads, policy.world_model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad)
    assert max(float(g.abs().max()) for g in grads) > 0

    # off by default: then nothing but the RL loss reaches M
    plain = small_ppo(swingup(), world_model="mlp").policy
    plain.evaluate_actions(obs, actions, states, starts)[0].sum().mul(0.0).backward()
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in plain.world_model.parameters())


def test_training_with_the_prediction_loss_makes_the_model_predict(tmp_path: Path) -> None:
    """The ablation's point: with the auxiliary loss M becomes a forward predictor; the
    same training without it leaves M's held-out prediction error far higher."""

    def trained(coef: float) -> RecurrentPPO:
        model = RecurrentPPO(
            ObservationalDropoutPolicy,
            ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUp-v0"), 0.5),
            n_steps=256,
            batch_size=64,
            n_epochs=4,
            learning_rate=1e-3,
            seed=0,
            policy_kwargs={"world_model": "mlp", "prediction_loss_coef": coef},
        )
        return model.learn(2048)

    def held_out_error(policy: ObservationalDropoutPolicy) -> float:
        obs, starts = _rollout_batch(policy, n_seq=4, length=50)
        core = policy.lstm_actor
        assert isinstance(core, WorldModelCore)
        with torch.no_grad(), core.recording_prediction_error() as errors:
            policy._process_sequence(obs, (torch.zeros(1, 4, 5),) * 2, starts, core)
        return float(sum(e for e, _ in errors) / sum(n for _, n in errors))

    with_loss, without = trained(10.0), trained(0.0)
    assert held_out_error(with_loss.policy) < 0.5 * held_out_error(without.policy)
    with_loss.save(tmp_path / "aux.zip")
    assert RecurrentPPO.load(tmp_path / "aux.zip").policy.prediction_loss_coef == 10.0


def test_the_critic_trains_the_world_model_only_when_asked(tmp_path: Path) -> None:
    """``critic_trains_world_model`` changes where the value loss's gradient goes, not what
    the policy computes: same values and log-probabilities, and M gets a gradient from the
    values alone only with the option on."""
    torch.manual_seed(0)
    attached = small_ppo(swingup(), world_model="mlp", critic_trains_world_model=True).policy
    detached = small_ppo(swingup(), world_model="mlp").policy
    detached.load_state_dict(attached.state_dict())
    obs, starts = _rollout_batch(attached, n_seq=2, length=10)
    states = RNNStates((torch.zeros(1, 2, 5),) * 2, (torch.zeros(1, 2, 5),) * 2)
    actions = torch.rand(len(obs), 1) * 2 - 1
    grads, outputs = [], []
    for policy in (attached, detached):
        policy.zero_grad()
        values, log_prob, entropy = policy.evaluate_actions(obs, actions, states, starts)
        values.square().sum().backward()
        grads.append([p.grad for p in policy.world_model.parameters()])
        outputs.append([values.detach(), log_prob.detach(), entropy.detach()])
    for got, want in zip(*outputs, strict=True):
        torch.testing.assert_close(got, want)
    assert max(float(g.abs().max()) for g in grads[0] if g is not None) > 0
    assert all(g is None or g.abs().max() == 0 for g in grads[1])

    model = small_ppo(swingup(), world_model="cartpole", critic_trains_world_model=True)
    model.learn(128)
    model.save(tmp_path / "critic.zip")
    loaded = RecurrentPPO.load(tmp_path / "critic.zip").policy
    assert isinstance(loaded, ObservationalDropoutPolicy) and loaded.critic_trains_world_model


def test_a_privileged_critic_values_the_true_observation_and_never_reaches_m(
    tmp_path: Path,
) -> None:
    """With ``privileged_critic`` the values follow the appended true observation while the
    actions ignore it, and only the policy-gradient loss reaches M."""
    torch.manual_seed(0)
    env = ObservationalDropoutWrapper(gym.make(SWINGUP), 0.3, expose_true_obs=True)
    policy = small_ppo(env, world_model="mlp", privileged_critic=True).policy
    plain_obs, starts = _rollout_batch(policy, n_seq=2, length=10, p=0.3)
    true_obs = torch.randn(len(plain_obs), 5)
    other_true_obs = true_obs + 1.0
    states = RNNStates((torch.zeros(1, 2, 5),) * 2, (torch.zeros(1, 2, 5),) * 2)
    actions = torch.rand(len(plain_obs), 1) * 2 - 1
    policy.zero_grad()
    values, log_prob, _ = policy.evaluate_actions(
        torch.cat([plain_obs, true_obs], 1), actions, states, starts
    )
    values.square().sum().backward()
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in policy.world_model.parameters())
    assert policy.value_net.weight.grad is not None and policy.value_net.weight.grad.abs().max() > 0
    other_values, other_log_prob, _ = policy.evaluate_actions(
        torch.cat([plain_obs, other_true_obs], 1), actions, states, starts
    )
    torch.testing.assert_close(other_log_prob, log_prob)  # the actor never sees it
    assert (other_values - values).abs().max() > 1e-4  # the critic does
    exposed = torch.cat([plain_obs, true_obs], 1)
    torch.testing.assert_close(policy.predict_values(exposed, states.pi, starts), values)
    _, rollout_values, _, _ = policy(exposed, states, starts)  # as RecurrentPPO collects
    torch.testing.assert_close(rollout_values, values)
    log_prob.sum().backward()  # the policy gradient still trains M
    assert max(float(p.grad.abs().max()) for p in policy.world_model.parameters()) > 0

    model = small_ppo(env, world_model="cartpole", privileged_critic=True)
    model.learn(128)
    model.save(tmp_path / "privileged.zip")
    loaded = RecurrentPPO.load(tmp_path / "privileged.zip")
    assert isinstance(loaded.policy, ObservationalDropoutPolicy) and loaded.policy.privileged_critic
    obs, _ = env.reset(seed=3)
    action, state = loaded.predict(obs, episode_start=np.array([True]), deterministic=True)
    assert action.shape == (1,) and state[0].shape == (1, 1, 5)

    discrete = ObservationalDropoutWrapper(gym.make("CartPole-v1"), 0.5, expose_true_obs=True)
    small_ppo(discrete, privileged_critic=True).learn(64)  # one-hot actions in the middle

    with pytest.raises(ValueError, match="expose_true_obs=True"):
        small_ppo(swingup(), privileged_critic=True)  # the true observation is not there
    with pytest.raises(ValueError, match="pass privileged_critic=True"):
        small_ppo(env)
    with pytest.raises(ValueError, match="exclude each other"):
        small_ppo(env, privileged_critic=True, critic_trains_world_model=True)


def test_a_critic_reading_the_belief_too_values_both_and_never_reaches_m(
    tmp_path: Path,
) -> None:
    """With ``critic_reads_belief`` the privileged critic's value moves with the true
    observation and with the belief (so with what M predicts), but its gradient stops at the
    belief: M is still trained by the policy gradient alone."""
    torch.manual_seed(0)
    env = ObservationalDropoutWrapper(gym.make(SWINGUP), 0.3, expose_true_obs=True)
    policy = small_ppo(
        env, world_model="mlp", privileged_critic=True, critic_reads_belief=True
    ).policy
    assert policy.mlp_extractor.value_net[0].in_features == 10  # [o_t, o~_t]
    assert policy.mlp_extractor.policy_net[0].in_features == 5  # the controller: o~_t
    plain_obs, starts = _rollout_batch(policy, n_seq=2, length=10, p=0.3)
    true_obs = torch.randn(len(plain_obs), 5)
    states = RNNStates((torch.zeros(1, 2, 5),) * 2, (torch.zeros(1, 2, 5),) * 2)
    actions = torch.rand(len(plain_obs), 1) * 2 - 1
    exposed = torch.cat([plain_obs, true_obs], 1)
    policy.zero_grad()
    values, log_prob, _ = policy.evaluate_actions(exposed, actions, states, starts)
    values.square().sum().backward()
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in policy.world_model.parameters())
    moved = torch.cat([plain_obs, true_obs + 1.0], 1)
    other_values, other_log_prob, _ = policy.evaluate_actions(moved, actions, states, starts)
    torch.testing.assert_close(other_log_prob, log_prob)
    assert (other_values - values).abs().max() > 1e-4  # the true observation counts
    with torch.no_grad():  # another M, the same true observations: the belief counts too
        for parameter in policy.world_model.parameters():
            parameter.add_(0.5)
    believed_values, _, _ = policy.evaluate_actions(exposed, actions, states, starts)
    unpeeked = plain_obs[:, 5] == 0  # where the belief is M's prediction
    assert unpeeked.any()
    assert (believed_values - values)[unpeeked].abs().max() > 1e-4
    torch.testing.assert_close(believed_values[~unpeeked], values[~unpeeked])  # seen: o~ = o
    torch.testing.assert_close(policy.predict_values(exposed, states.pi, starts), believed_values)

    model = small_ppo(env, world_model="cartpole", privileged_critic=True, critic_reads_belief=True)
    model.learn(128)
    model.save(tmp_path / "both.zip")
    loaded = RecurrentPPO.load(tmp_path / "both.zip").policy
    assert isinstance(loaded, ObservationalDropoutPolicy) and loaded.critic_reads_belief
    assert loaded.mlp_extractor.value_net[0].in_features == 10
    with pytest.raises(ValueError, match="critic_reads_belief needs privileged_critic"):
        small_ppo(swingup(), critic_reads_belief=True)


def _image_env(p: float = 0.5, **kwargs: Any) -> ObservationalDropoutWrapper:
    return ObservationalDropoutWrapper(
        FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=False), p, **kwargs
    )


def test_images_go_through_natures_cnn_and_the_world_model_predicts_its_features(
    tmp_path: Path,
) -> None:
    """Image observations, the SB3 way: the features extractor (``NatureCNN`` by default)
    reads the masked image, and the belief is ``f(o)`` on a peek and M's prediction in
    feature space otherwise; it trains, saves and loads."""
    model = RecurrentPPO(
        ObservationalDropoutPolicy, _image_env(), n_steps=16, batch_size=16, n_epochs=1, seed=0
    )
    policy = model.policy
    assert isinstance(policy.features_extractor, NatureCNN) and policy.obs_size == 512
    assert policy.world_model.obs_size == 512
    model.learn(32)
    obs_space = policy.observation_space
    assert isinstance(obs_space, gym.spaces.Dict)
    batch = {
        key: torch.as_tensor(np.stack([space.sample() for _ in range(2)]))
        for key, space in obs_space.spaces.items()
    }
    batch["peek"] = torch.tensor([[1.0], [0.0]])
    with torch.no_grad():
        features = policy.extract_features(batch)
        assert isinstance(features, torch.Tensor)
        image = preprocess_obs(batch, obs_space)["observation"]
        seen = policy.features_extractor(image)
        torch.testing.assert_close(features[0, :512], seen[0])  # f(o) where it peeks
        assert torch.all(features[1, :512] == 0)  # nothing where it does not
        previous = torch.randn(1, 2, 512)
        starts = torch.zeros(2)
        belief, _ = policy._process_sequence(
            features, (previous, torch.zeros_like(previous)), starts, policy.lstm_actor
        )
        torch.testing.assert_close(belief[0], seen[0])
        predicted = policy.world_model(previous[0, 1:], batch["previous_action"][1:].float())
        torch.testing.assert_close(belief[1], predicted[0])
    obs, _ = _image_env().reset(seed=1)
    action, _ = model.predict(obs, episode_start=np.array([True]), deterministic=True)
    model.save(tmp_path / "image.zip")
    loaded = RecurrentPPO.load(tmp_path / "image.zip")
    again, _ = loaded.predict(obs, episode_start=np.array([True]), deterministic=True)
    np.testing.assert_allclose(again, action, rtol=1e-6)


def test_image_policies_take_sb3s_extractor_options_and_a_privileged_critic() -> None:
    flat = RecurrentPPO(
        ObservationalDropoutPolicy,
        _image_env(),
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        policy_kwargs={
            "features_extractor_class": FlattenExtractor,
            "world_model_kwargs": {"hidden_sizes": (8,)},
        },
    )
    assert flat.policy.obs_size == 36 * 36
    privileged = RecurrentPPO(
        ObservationalDropoutPolicy,
        _image_env(expose_true_obs=True),
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        policy_kwargs={
            "privileged_critic": True,
            "features_extractor_kwargs": {"features_dim": 32},
        },
    )
    assert privileged.policy.obs_size == 32
    privileged.learn(16)
    with pytest.raises(ValueError, match="share_features_extractor must be True"):
        RecurrentPPO(
            ObservationalDropoutPolicy,
            _image_env(),
            policy_kwargs={"share_features_extractor": False},
        )
    with pytest.raises(ValueError, match="pass privileged_critic=True"):
        RecurrentPPO(ObservationalDropoutPolicy, _image_env(expose_true_obs=True))
    with pytest.raises(ValueError, match="flat observations"):
        population_returns(flat.policy, np.zeros((1, 3)), _image_env, [0], 5)


@pytest.mark.parametrize("controller_input", ["belief_and_model_hidden", "model_hidden"])
def test_the_controller_can_read_the_world_models_hidden_units(
    controller_input: str, tmp_path: Path
) -> None:
    """The paper's CarRacing controller reads z and M's hidden units; its linear probe, M's
    hidden units alone. The state stays the belief."""
    model = small_ppo(
        swingup(0.5),
        world_model="mlp",
        world_model_kwargs={"hidden_sizes": (10,), "residual": True},
        controller_input=controller_input,
        net_arch=[] if controller_input == "model_hidden" else [10],
    )
    core = model.policy.lstm_actor
    assert isinstance(core, WorldModelCore)
    previous = torch.randn(1, 3, 5)
    step = torch.cat([torch.randn(3, 5), torch.tensor([[1.0], [0.0], [0.0]]), torch.randn(3, 1)], 1)
    with torch.no_grad():
        out, (state, _) = core(step[None], (previous, torch.zeros_like(previous)))
        predicted, hidden = core.world_model.forward_with_hidden(previous[0], step[:, 6:])
    belief = torch.cat([step[:1, :5], predicted[1:]])
    torch.testing.assert_close(state[0], belief)
    expected = hidden if controller_input == "model_hidden" else torch.cat([belief, hidden], 1)
    torch.testing.assert_close(out[0], expected)
    assert hidden.shape == (3, 10) and bool((hidden.abs() <= 1).all())  # tanh units
    width = 10 if controller_input == "model_hidden" else 15
    first = (
        model.policy.action_net
        if controller_input == "model_hidden"
        else model.policy.mlp_extractor.policy_net[0]
    )
    assert first.in_features == width
    model.learn(64)
    model.save(tmp_path / "hidden.zip")
    loaded = RecurrentPPO.load(tmp_path / "hidden.zip")
    assert loaded.policy.controller_input == controller_input
    obs, _ = swingup(0.5).reset(seed=0)
    action, state = loaded.predict(obs, episode_start=np.array([True]), deterministic=True)
    assert state[0].shape == (1, 1, 5)
    again, _ = model.predict(obs, episode_start=np.array([True]), deterministic=True)
    np.testing.assert_allclose(action, again, rtol=1e-6)


def test_reading_hidden_units_needs_a_model_that_exposes_them() -> None:
    class Opaque(MlpWorldModel):
        hidden_size = None

        def __init__(self) -> None:
            super().__init__(5, 1)
            self.hidden_size = None

    with pytest.raises(ValueError, match="does not expose any"):
        small_ppo(swingup(), world_model=Opaque(), controller_input="model_hidden")
    with pytest.raises(ValueError, match="controller_input"):
        small_ppo(swingup(), controller_input="hidden")
