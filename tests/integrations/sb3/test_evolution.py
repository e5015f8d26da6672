"""The evolution-strategy route on the same policy and wrapper as RecurrentPPO."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import RecurrentPPO
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from paperports._imports import MissingExtraError
from paperports.integrations.sb3 import (
    ObservationalDropoutPolicy,
    ObservationalDropoutWrapper,
    train_with_cma,
    train_with_es,
)
from paperports.integrations.sb3.evolution import (
    acting_parameters,
    episode_return,
    population_returns,
)


def make_env() -> ObservationalDropoutWrapper:
    return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUp-v0"), 0.2)


def test_cma_searches_the_acting_parameters_and_keeps_the_best(tmp_path: Path) -> None:
    model = RecurrentPPO(
        ObservationalDropoutPolicy, make_env(), seed=0, policy_kwargs={"world_model": "cartpole"}
    )
    policy = model.policy
    before = parameters_to_vector(acting_parameters(policy)).detach().clone()
    critic = policy.value_net.weight.detach().clone()
    result = train_with_cma(
        policy, make_env, generations=3, population=6, sigma=0.3, max_steps=100, seed=0
    )
    # 3 generations of 6, and the starting parameters once (the return to beat)
    assert result.evaluations == 19 and len(result.best_per_generation) == 3
    after = parameters_to_vector(acting_parameters(policy)).detach()
    assert (after - before).abs().max() > 0
    torch.testing.assert_close(policy.value_net.weight, critic)  # the critic is not searched
    assert result.best_return == max(result.best_per_generation)
    # the parameters written back are the best candidate's: replaying its generation's
    # episode gives its return again
    generation = result.best_per_generation.index(result.best_return)
    replay = episode_return(policy, make_env(), seed=1000 * generation, max_steps=100)
    assert replay == pytest.approx(result.best_return, rel=1e-5)
    model.save(tmp_path / "es.zip")
    loaded = RecurrentPPO.load(tmp_path / "es.zip")
    torch.testing.assert_close(parameters_to_vector(acting_parameters(loaded.policy)), after)


def test_bad_budgets_are_refused() -> None:
    policy = RecurrentPPO(ObservationalDropoutPolicy, make_env(), seed=0).policy
    before = parameters_to_vector(acting_parameters(policy)).detach().clone()
    with pytest.raises(ValueError, match="generations"):
        train_with_cma(policy, make_env, generations=0)
    with pytest.raises(ValueError, match="sigma"):
        train_with_cma(policy, make_env, generations=1, sigma=0.0)
    # max_steps = 0 once scored every candidate 0 and wrote a random one into the policy
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
        train_with_cma(policy, make_env, generations=1, max_steps=0)
    with pytest.raises(TypeError, match="episodes must be an integer"):
        train_with_cma(policy, make_env, generations=1, episodes=1.5)
    torch.testing.assert_close(parameters_to_vector(acting_parameters(policy)), before)


def test_a_search_that_finds_nothing_better_keeps_the_policy() -> None:
    """In one step of CartPole every candidate scores 1, as the start does: no candidate is
    better, so the trained parameters stay."""

    def cartpole() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make("CartPole-v1"), 0.5)

    policy = RecurrentPPO(ObservationalDropoutPolicy, cartpole(), seed=0).policy
    before = parameters_to_vector(acting_parameters(policy)).detach().clone()
    result = train_with_cma(policy, cartpole, generations=2, population=4, max_steps=1)
    assert result.best_return == 1.0 and result.best_per_generation == [1.0, 1.0]
    torch.testing.assert_close(parameters_to_vector(acting_parameters(policy)), before)


@pytest.mark.parametrize(
    ("env_id", "world_model"),
    [("paperports/CartPoleSwingUp-v0", "cartpole"), ("CartPole-v1", "mlp")],
)
def test_population_returns_equal_one_episode_per_candidate(env_id: str, world_model: str) -> None:
    """The side-by-side evaluation gives each candidate the return that its own episodes,
    run one by one through ``predict``, give (a Box and a Discrete action space)."""

    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make(env_id), 0.3)

    policy = RecurrentPPO(
        ObservationalDropoutPolicy, make(), seed=0, policy_kwargs={"world_model": world_model}
    ).policy
    params = acting_parameters(policy)
    start = parameters_to_vector(params).detach()
    generator = torch.Generator().manual_seed(0)
    candidates = start + 0.5 * torch.randn(5, start.numel(), generator=generator)
    seeds = [3, 4]
    batched = population_returns(policy, candidates.numpy(), make, seeds, max_steps=60)
    torch.testing.assert_close(parameters_to_vector(params).detach(), start)  # left alone
    one_by_one = []
    for candidate in candidates:
        vector_to_parameters(candidate, params)
        one_by_one.append(np.mean([episode_return(policy, make(), s, 60) for s in seeds]))
    assert len(set(np.round(one_by_one, 3))) > 1  # the candidates differ
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-4)


def test_population_returns_refuses_vectors_of_the_wrong_size() -> None:
    policy = RecurrentPPO(ObservationalDropoutPolicy, make_env(), seed=0).policy
    with pytest.raises(ValueError, match="parameter vectors"):
        population_returns(policy, np.zeros((3, 7)), make_env, [0], max_steps=5)


class _Counted(gym.Wrapper[Any, Any, Any, Any]):
    steps = 0

    def step(self, action: Any) -> Any:
        type(self).steps += 1
        return self.env.step(action)


@pytest.mark.parametrize(
    ("env_id", "policy_kwargs", "expose"),
    [
        ("paperports/CartPoleSwingUpHarder-v0", {"world_model": "cartpole"}, False),
        ("paperports/CartPoleSwingUp-v0", {"world_model": "mlp"}, False),
        # the reproduction's agent: the wrapper appends the true observation for its critic
        (
            "paperports/CartPoleSwingUpHarder-v0",
            {"world_model": "cartpole", "privileged_critic": True},
            True,
        ),
    ],
)
def test_the_vectorised_swingup_gives_the_returns_of_environment_copies(
    env_id: str, policy_kwargs: dict[str, Any], expose: bool
) -> None:
    """All candidates' episodes stepped as tensors give the returns that one copy of the
    wrapped environment per candidate and episode gives: the same starts, peeks, actions
    and terminations."""

    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make(env_id), 0.3, expose_true_obs=expose)

    policy = RecurrentPPO(
        ObservationalDropoutPolicy, make(), seed=0, policy_kwargs=policy_kwargs
    ).policy
    start = parameters_to_vector(acting_parameters(policy)).detach()
    generator = torch.Generator().manual_seed(1)
    candidates = (start + 0.5 * torch.randn(6, start.numel(), generator=generator)).numpy()
    seeds = [3, 4, 5]
    copies = population_returns(policy, candidates, make, seeds, 300, vectorized=False)
    vectorised = population_returns(policy, candidates, make, seeds, 300, vectorized=True)
    assert len(set(np.round(copies, 6))) == len(copies)  # the candidates differ
    np.testing.assert_allclose(vectorised, copies, rtol=1e-5)
    # the default picks the vectorised evaluation for the swing-up
    np.testing.assert_array_equal(
        population_returns(policy, candidates, make, seeds, 300), vectorised
    )


def test_the_vectorised_swingup_ends_episodes_at_the_time_limit() -> None:
    """A ``TimeLimit`` shorter than ``max_steps`` truncates the episodes, as in the copies."""

    def make() -> ObservationalDropoutWrapper:
        env = gym.make("paperports/CartPoleSwingUp-v0", max_episode_steps=40)
        return ObservationalDropoutWrapper(env, 0.5)

    policy = RecurrentPPO(ObservationalDropoutPolicy, make(), seed=0).policy
    start = parameters_to_vector(acting_parameters(policy)).detach().numpy()
    candidates = np.stack([start, start * 1.5])
    copies = population_returns(policy, candidates, make, [0, 1], 200, vectorized=False)
    vectorised = population_returns(policy, candidates, make, [0, 1], 200, vectorized=True)
    np.testing.assert_allclose(vectorised, copies, rtol=1e-5)
    assert np.all(vectorised <= 40)  # rewards are at most 1 a step


def test_other_wrappers_are_stepped_as_copies() -> None:
    """A wrapper between the dropout wrapper and the swing-up may change what the episodes
    do, so the default steps copies (through it) and ``vectorized=True`` refuses."""

    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(_Counted(gym.make("paperports/CartPoleSwingUp-v0")), 0.5)

    policy = RecurrentPPO(ObservationalDropoutPolicy, make(), seed=0).policy
    start = parameters_to_vector(acting_parameters(policy)).detach().numpy()[None]
    _Counted.steps = 0
    population_returns(policy, start, make, [0], 10)
    assert _Counted.steps == 10
    with pytest.raises(ValueError, match="vectorized=True"):
        population_returns(policy, start, make, [0], 10, vectorized=True)


def _paper_policy(make: Any) -> RecurrentPPO:
    return RecurrentPPO(
        ObservationalDropoutPolicy,
        make(),
        seed=0,
        device="cpu",
        policy_kwargs={"world_model": "cartpole", "world_model_kwargs": {"hidden_sizes": (16,)}},
    )


def test_pgpe_trains_the_acting_parameters_and_sb3_saves_and_loads_them(tmp_path: Path) -> None:
    """The paper's optimiser: the best candidate scored is written back, replays to its
    return on its generation's episodes, and survives ``save`` / ``load``."""

    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)

    model = _paper_policy(make)
    params = acting_parameters(model.policy)
    before = parameters_to_vector(params).detach().clone()
    critic = model.policy.value_net.weight.detach().clone()
    result = train_with_es(model.policy, make, 3, population=8, episodes=2, max_steps=100, seed=0)
    # per generation the search's mean and 8 samples; the start once
    assert result.evaluations == (1 + 3 * 9) * 2 and len(result.best_per_generation) == 3
    after = parameters_to_vector(params).detach()
    assert (after - before).abs().max() > 0
    torch.testing.assert_close(model.policy.value_net.weight, critic)  # not searched
    assert result.best_return >= max(result.best_per_generation)
    seeds = [1000 * result.best_generation + e for e in range(2)]
    replay = np.mean([episode_return(model.policy, make(), s, 100) for s in seeds])
    assert replay == pytest.approx(result.best_return, rel=1e-5)
    model.save(tmp_path / "pgpe.zip")
    loaded = RecurrentPPO.load(tmp_path / "pgpe.zip", device="cpu")
    torch.testing.assert_close(parameters_to_vector(acting_parameters(loaded.policy)), after)
    obs, _ = make().reset(seed=0)
    action, _ = loaded.predict(obs, episode_start=np.array([True]), deterministic=True)
    assert action.shape == (1,)


def test_pgpe_is_seeded_and_leaves_torch_random_state_alone() -> None:
    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)

    runs = []
    for _ in range(2):
        policy = _paper_policy(make).policy
        torch.manual_seed(123)
        result = train_with_es(policy, make, 2, population=6, episodes=1, max_steps=30, seed=4)
        runs.append((result, parameters_to_vector(acting_parameters(policy)).detach()))
        # the search seeds a fork of torch's generator: the caller's stream goes on as if
        # nothing had drawn from it
        assert torch.rand(()) == torch.rand((), generator=torch.Generator().manual_seed(123))
    assert runs[0][0] == runs[1][0]
    torch.testing.assert_close(runs[0][1], runs[1][1])


def test_two_ray_workers_give_the_returns_of_one() -> None:
    """Population evaluation on 2 local Ray workers: the same returns, the same search and
    the same parameters as in this process, for the same seed."""
    pytest.importorskip("ray")

    def make() -> ObservationalDropoutWrapper:  # nested: Ray's pickling ships it by value
        return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)

    outcomes = []
    for workers in (1, 2):
        policy = _paper_policy(make).policy
        result = train_with_es(
            policy, make, 2, population=6, episodes=2, max_steps=50, seed=0, workers=workers
        )
        outcomes.append((result, parameters_to_vector(acting_parameters(policy)).detach()))
    (one, one_params), (two, two_params) = outcomes
    np.testing.assert_allclose(two.best_per_generation, one.best_per_generation, rtol=1e-6)
    np.testing.assert_allclose(two.mean_per_generation, one.mean_per_generation, rtol=1e-6)
    assert two.best_return == pytest.approx(one.best_return, rel=1e-6)
    torch.testing.assert_close(two_params, one_params)


@pytest.mark.parametrize(
    ("blocked", "options"),
    [("evotorch", {}), ("ray", {"algorithm": "cma", "workers": 2})],
)
def test_the_es_extra_is_named_when_missing(
    monkeypatch: pytest.MonkeyPatch, blocked: str, options: dict[str, Any]
) -> None:
    """PGPE needs evotorch and the workers Ray: without them, the error names the extra,
    and the policy is left as it was."""
    policy = RecurrentPPO(ObservationalDropoutPolicy, make_env(), seed=0).policy
    before = parameters_to_vector(acting_parameters(policy)).detach().clone()
    for name in [m for m in sys.modules if m == blocked or m.startswith(blocked + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # makes `import blocked` fail
    with pytest.raises(MissingExtraError, match=r'pip install "paperports\[es\]"'):
        train_with_es(policy, make_env, 1, population=4, max_steps=5, **options)
    torch.testing.assert_close(parameters_to_vector(acting_parameters(policy)), before)


def test_a_search_stopped_and_resumed_from_its_checkpoint_ends_where_one_run_does(
    tmp_path: Path,
) -> None:
    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)

    options: dict[str, Any] = {"population": 6, "episodes": 2, "max_steps": 40, "seed": 1}
    straight = _paper_policy(make).policy
    whole = train_with_es(straight, make, 4, **options)
    path = tmp_path / "es.pkl"
    stopped = _paper_policy(make).policy
    train_with_es(stopped, make, 2, checkpoint=path, **options)
    resumed = _paper_policy(make).policy  # a new process would build it afresh
    result = train_with_es(resumed, make, 4, checkpoint=path, **options)
    assert result == whole
    torch.testing.assert_close(
        parameters_to_vector(acting_parameters(resumed)),
        parameters_to_vector(acting_parameters(straight)),
    )
    with pytest.raises(ValueError, match="population: saved 6, now 8"):
        train_with_es(resumed, make, 5, checkpoint=path, **(options | {"population": 8}))
    path.write_bytes(b"truncated")
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        train_with_es(resumed, make, 1, checkpoint=path, **options)
    assert train_with_es(resumed, make, 1, checkpoint=path, **options).best_per_generation


def test_keep_center_writes_back_the_searchs_mean(tmp_path: Path) -> None:
    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)

    policy = _paper_policy(make).policy
    options: dict[str, Any] = {"population": 6, "episodes": 1, "max_steps": 30}
    train_with_es(policy, make, 2, checkpoint=tmp_path / "es.pkl", keep="center", **options)
    with (tmp_path / "es.pkl").open("rb") as file:
        center = pickle.load(file)["search"].center()
    after = parameters_to_vector(acting_parameters(policy)).detach().double().numpy()
    np.testing.assert_allclose(after, center, rtol=1e-6)
    # the mean moved away from the start, and from every scored candidate
    best = _paper_policy(make).policy
    train_with_es(best, make, 2, **options)
    assert not np.allclose(parameters_to_vector(acting_parameters(best)).detach().numpy(), after)


def test_the_vectorised_evaluation_with_a_controller_on_the_models_hidden_units() -> None:
    """The acting path hands the controller what the core outputs and keeps the belief as
    the state: equal to the copies, whose predict does the same."""

    def make() -> ObservationalDropoutWrapper:
        return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.3)

    policy = RecurrentPPO(
        ObservationalDropoutPolicy,
        make(),
        seed=0,
        policy_kwargs={"world_model": "cartpole", "controller_input": "belief_and_model_hidden"},
    ).policy
    start = parameters_to_vector(acting_parameters(policy)).detach()
    generator = torch.Generator().manual_seed(2)
    candidates = (start + 0.3 * torch.randn(4, start.numel(), generator=generator)).numpy()
    copies = population_returns(policy, candidates, make, [1, 2], 120, vectorized=False)
    vectorised = population_returns(policy, candidates, make, [1, 2], 120, vectorized=True)
    np.testing.assert_allclose(vectorised, copies, rtol=1e-5)
    vector_to_parameters(torch.as_tensor(candidates[0]), acting_parameters(policy))
    one = np.mean([episode_return(policy, make(), s, 120) for s in (1, 2)])
    assert one == pytest.approx(vectorised[0], rel=1e-4)
