"""Bad input to the SB3 plugin (policy, wrapper, world models, dream, ES route, envs)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import RecurrentPPO

from paperports.adapters.cartpole_swingup import CartPoleSwingUpEnv, cartpole_swingup_step
from paperports.adapters.cartpole_swingup_vector import CartPoleSwingUpVectorEnv
from paperports.experiments.obsdrop.agents import AgentRun
from paperports.experiments.obsdrop.run_cache import RunCache, read_record, write_record
from paperports.integrations.sb3 import (
    CartPoleWorldModel,
    MlpWorldModel,
    ObservationalDropoutPolicy,
    ObservationalDropoutWrapper,
    WorldModelEnv,
    cartpole_reward,
    cartpole_terminated,
    population_returns,
    train_with_cma,
    train_with_es,
)
from paperports.integrations.sb3.evolution import acting_parameters, episode_return

from .conftest import assert_refused, case

SWINGUP = "paperports/CartPoleSwingUp-v0"


def wrapped(p: float = 0.5) -> ObservationalDropoutWrapper:
    return ObservationalDropoutWrapper(gym.make(SWINGUP), p)


def wrapped_other() -> ObservationalDropoutWrapper:
    """The swing-up behind a wrapper that the vectorised evaluation does not reproduce."""
    return ObservationalDropoutWrapper(gym.wrappers.ClipAction(gym.make(SWINGUP)), 0.5)


def ppo(**policy_kwargs: Any) -> RecurrentPPO:
    return RecurrentPPO(
        ObservationalDropoutPolicy,
        wrapped(),
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        seed=0,
        policy_kwargs=policy_kwargs,
    )


_POLICY: dict[str, Any] = {}


def policy() -> ObservationalDropoutPolicy:
    if "policy" not in _POLICY:
        _POLICY["policy"] = ppo().policy
    return _POLICY["policy"]  # type: ignore[no-any-return]


def candidates(n: int = 2) -> np.ndarray:
    size = sum(p.numel() for p in acting_parameters(policy()))
    return np.zeros((n, size))


def dream() -> WorldModelEnv:
    env = WorldModelEnv(CartPoleWorldModel(), gym.make(SWINGUP))
    env.reset(seed=0)
    return env


CONFIG = [
    case("peek_prob=0", lambda: wrapped(0.0), "peek_prob", "(0.0, 1.0]"),
    case("peek_prob=1.5", lambda: wrapped(1.5), "peek_prob"),
    case("peek_prob=nan", lambda: wrapped(float("nan")), "peek_prob"),
    case("peek_prob='0.5'", lambda: wrapped("0.5"), "peek_prob"),  # type: ignore[arg-type]
    case(
        "expose_true_obs='no'",
        lambda: ObservationalDropoutWrapper(gym.make(SWINGUP), 0.5, expose_true_obs="no"),
        "expose_true_obs",
    ),
    case("wrapper env a name", lambda: ObservationalDropoutWrapper(SWINGUP, 0.5), "env"),
    case(
        "wrapper discrete observations",
        lambda: ObservationalDropoutWrapper(gym.make("FrozenLake-v1"), 0.5),
        "Box observation space",
    ),
    case(
        "prediction_loss_coef=nan",
        lambda: ppo(prediction_loss_coef=float("nan")),
        "prediction_loss_coef",
    ),
    case("prediction_loss_coef=-1", lambda: ppo(prediction_loss_coef=-1.0), "prediction_loss_coef"),
    case("prediction_loss_coef='1'", lambda: ppo(prediction_loss_coef="1"), "prediction_loss_coef"),
    case("privileged_critic='yes'", lambda: ppo(privileged_critic="yes"), "privileged_critic"),
    case("critic_reads_belief alone", lambda: ppo(critic_reads_belief=True), "privileged_critic"),
    case(
        "both critics",
        lambda: ppo(critic_trains_world_model=True, privileged_critic=True),
        "exclude each other",
    ),
    case("net_arch=[0]", lambda: ppo(net_arch=[0]), "net_arch[0]"),
    case("net_arch='big'", lambda: ppo(net_arch="big"), "net_arch"),
    case("net_arch pi=[8.5]", lambda: ppo(net_arch={"pi": [8.5], "vf": [8]}), "net_arch['pi'][0]"),
    case("activation_fn='tanh'", lambda: ppo(activation_fn="tanh"), "activation_fn"),
    case("world_model='transformer'", lambda: ppo(world_model="transformer"), "world_model"),
    case("world_model_kwargs a list", lambda: ppo(world_model_kwargs=[1]), "world_model_kwargs"),
    case(
        "world_model_kwargs scale",
        lambda: ppo(world_model="cartpole", world_model_kwargs={"acceleration_scale": -1.0}),
        "acceleration_scale",
    ),
    case("lstm_hidden_size", lambda: ppo(lstm_hidden_size=8), "lstm_hidden_size"),
    case(
        "not wrapped",
        lambda: RecurrentPPO(ObservationalDropoutPolicy, gym.make(SWINGUP)),
        "ObservationalDropoutWrapper",
    ),
    case("world model of other sizes", lambda: ppo(world_model=MlpWorldModel(3, 1)), "5"),
    case("MlpWorldModel obs_size=0", lambda: MlpWorldModel(0, 1), "obs_size"),
    case("MlpWorldModel action_size=1.5", lambda: MlpWorldModel(5, 1.5), "action_size"),
    case("MlpWorldModel hidden_sizes=(0,)", lambda: MlpWorldModel(5, 1, (0,)), "hidden_sizes[0]"),
    case("MlpWorldModel hidden_sizes=64", lambda: MlpWorldModel(5, 1, 64), "hidden_sizes"),
    case("MlpWorldModel residual=1", lambda: MlpWorldModel(5, 1, residual=1), "residual"),
    case("CartPoleWorldModel dt=0", lambda: CartPoleWorldModel(dt=0.0), "dt"),
    case("CartPoleWorldModel dt=nan", lambda: CartPoleWorldModel(dt=float("nan")), "dt"),
    case(
        "CartPoleWorldModel acceleration_scale=0",
        lambda: CartPoleWorldModel(acceleration_scale=0.0),
        "acceleration_scale",
    ),
    case(
        "CartPoleWorldModel zero_init='yes'",
        lambda: CartPoleWorldModel(zero_init="yes"),
        "zero_init",
    ),
    case(
        "WorldModelEnv world_model a name",
        lambda: WorldModelEnv("cartpole", gym.make(SWINGUP)),
        "world_model",
    ),
    case(
        "WorldModelEnv real_env a name",
        lambda: WorldModelEnv(CartPoleWorldModel(), SWINGUP),
        "real_env",
    ),
    case(
        "WorldModelEnv max_episode_steps=0",
        lambda: WorldModelEnv(CartPoleWorldModel(), gym.make(SWINGUP), max_episode_steps=0),
        "max_episode_steps",
    ),
    case(
        "WorldModelEnv max_episode_steps=1.5",
        lambda: WorldModelEnv(CartPoleWorldModel(), gym.make(SWINGUP), max_episode_steps=1.5),
        "max_episode_steps",
    ),
    case(
        "WorldModelEnv reward_fn a number",
        lambda: WorldModelEnv(CartPoleWorldModel(), gym.make(SWINGUP), reward_fn=1.0),
        "reward_fn",
    ),
    case(
        "WorldModelEnv render_mode='human'",
        lambda: WorldModelEnv(CartPoleWorldModel(), gym.make(SWINGUP), render_mode="human"),
        "render_mode",
    ),
    case("WorldModelEnv sizes", lambda: WorldModelEnv(MlpWorldModel(4, 1), gym.make(SWINGUP)), "4"),
    case("swing-up harder='x'", lambda: CartPoleSwingUpEnv(harder="x"), "harder"),
    case("swing-up render_mode", lambda: CartPoleSwingUpEnv(render_mode="human"), "render_mode"),
    case("vector swing-up num_envs=0", lambda: CartPoleSwingUpVectorEnv(0), "num_envs"),
    case("vector swing-up harder='x'", lambda: CartPoleSwingUpVectorEnv(2, harder="x"), "harder"),
    case(
        "vector swing-up max_episode_steps=0",
        lambda: CartPoleSwingUpVectorEnv(2, max_episode_steps=0),
        "max_episode_steps",
    ),
    case(
        "vector swing-up dtype int",
        lambda: CartPoleSwingUpVectorEnv(2, dtype=torch.int64),
        "dtype",
        "float64",
    ),
]

DTYPE = [
    *[
        case(
            f"MlpWorldModel obs {d}",
            lambda d=d: MlpWorldModel(5, 1)(torch.ones(2, 5).to(d), torch.ones(2, 1)),
            "obs",
        )
        for d in (torch.float64, torch.int64, torch.bool)
    ],
    *[
        case(
            f"CartPoleWorldModel action {d}",
            lambda d=d: CartPoleWorldModel()(torch.ones(2, 5), torch.ones(2, 1).to(d)),
            "action",
        )
        for d in (torch.float16, torch.int64)
    ],
    case(
        "population candidates of strings",
        lambda: population_returns(policy(), np.array([["a"]]), wrapped, [0], 5),
        "candidates",
    ),
    case(
        "population seeds floats",
        lambda: population_returns(policy(), candidates(), wrapped, [0.5], 5),
        "seeds[0]",
    ),
    case(
        "population vectorized a word",
        lambda: population_returns(policy(), candidates(), wrapped, [0], 5, vectorized="yes"),
        "vectorized",
    ),
    case(
        "population vectorized=True, not the swing-up",
        lambda: population_returns(
            policy(), candidates(), lambda: wrapped_other(), [0], 5, vectorized=True
        ),
        "make_env",
    ),
    case("dream action a word", lambda: dream().step("left"), "action"),
    case(
        "policy share_features_extractor=False",
        lambda: ppo(share_features_extractor=False),
        "share_features_extractor",
    ),
]

EMPTY = [
    case(
        "population seeds []",
        lambda: population_returns(policy(), candidates(), wrapped, [], 5),
        "seeds",
    ),
    case(
        "population 0 candidates",
        lambda: population_returns(policy(), candidates(0), wrapped, [0], 5),
        "candidates",
    ),
    case(
        "population max_steps=0",
        lambda: population_returns(policy(), candidates(), wrapped, [0], 0),
        "max_steps",
    ),
    case(
        "episode_return max_steps=0", lambda: episode_return(policy(), wrapped(), 0, 0), "max_steps"
    ),
    case("cma max_steps=0", lambda: train_with_cma(policy(), wrapped, 1, max_steps=0), "max_steps"),
    case("cma generations=0", lambda: train_with_cma(policy(), wrapped, 0), "generations"),
    case(
        "cma population=1", lambda: train_with_cma(policy(), wrapped, 1, population=1), "population"
    ),
    case("cma episodes=0", lambda: train_with_cma(policy(), wrapped, 1, episodes=0), "episodes"),
    case(
        "es population=0", lambda: train_with_es(policy(), wrapped, 1, population=0), "population"
    ),
    case("es episodes=0", lambda: train_with_es(policy(), wrapped, 1, episodes=0), "episodes"),
]

VALUES = [
    case(
        "es odd population for pgpe",
        lambda: train_with_es(policy(), wrapped, 1, population=7),
        "population",
        "even",
    ),
    case(
        "es algorithm pepg", lambda: train_with_es(policy(), wrapped, 1, algorithm="pepg"), "pgpe"
    ),
    case("es workers=0", lambda: train_with_es(policy(), wrapped, 1, workers=0), "workers"),
    case(
        "es learning_rate=0",
        lambda: train_with_es(policy(), wrapped, 1, learning_rate=0.0),
        "learning_rate",
    ),
    case(
        "population seed negative",
        lambda: population_returns(policy(), candidates(), wrapped, [0, -1], 5),
        "seeds[1]",
        ">= 0",
    ),
    case(
        "es ray address where no cluster answers",
        lambda: train_with_es(policy(), wrapped, 1, workers=2, ray_address="127.0.0.1:9"),
        "127.0.0.1:9",
        "ray_address=None starts a local Ray",
    ),
    case(
        "es ray address not host:port",
        lambda: train_with_es(policy(), wrapped, 1, workers=2, ray_address="cluster"),
        "ray_address",
    ),
    case(
        "es ray address a number",
        lambda: train_with_es(policy(), wrapped, 1, workers=2, ray_address=6379),
        "ray_address",
    ),
    case("es keep worst", lambda: train_with_es(policy(), wrapped, 1, keep="worst"), "keep"),
    case(
        "es keep center with cma",
        lambda: train_with_es(policy(), wrapped, 1, algorithm="cma", keep="center"),
        "keep",
        "cma",
    ),
    case(
        "es checkpoint a number",
        lambda: train_with_es(policy(), wrapped, 1, checkpoint=3),
        "checkpoint",
    ),
    case(
        "es checkpoint a folder",
        lambda: train_with_es(policy(), wrapped, 1, checkpoint=Path(__file__).parent),
        "checkpoint",
        "folder",
    ),
    case("cma sigma=0", lambda: train_with_cma(policy(), wrapped, 1, sigma=0.0), "sigma"),
    case(
        "cma sigma=nan", lambda: train_with_cma(policy(), wrapped, 1, sigma=float("nan")), "sigma"
    ),
    case("cma generations=2.5", lambda: train_with_cma(policy(), wrapped, 2.5), "generations"),
    case("cma seed=-1", lambda: train_with_cma(policy(), wrapped, 1, seed=-1), "seed"),
    case("cma policy the algorithm", lambda: train_with_cma(ppo(), wrapped, 1), "policy"),
    case("cma make_env an env", lambda: train_with_cma(policy(), wrapped(), 1), "make_env"),
    case(
        "population policy a name",
        lambda: population_returns("policy", candidates(), wrapped, [0], 5),
        "policy",
    ),
    case(
        "population candidates of the wrong size",
        lambda: population_returns(policy(), np.zeros((2, 3)), wrapped, [0], 5),
        "candidates",
    ),
    case(
        "population candidates NaN",
        lambda: population_returns(policy(), candidates() * np.nan, wrapped, [0], 5),
        "candidates",
    ),
    case(
        "population make_env an env",
        lambda: population_returns(policy(), candidates(), wrapped(), [0], 5),
        "make_env",
    ),
    case("episode_return seed=0.5", lambda: episode_return(policy(), wrapped(), 0.5, 5), "seed"),
    case("episode_return policy a name", lambda: episode_return("p", wrapped(), 0, 5), "policy"),
    case(
        "MlpWorldModel obs width",
        lambda: MlpWorldModel(5, 1)(torch.ones(2, 4), torch.ones(2, 1)),
        "obs must be (..., 5)",
    ),
    case(
        "CartPoleWorldModel action width",
        lambda: CartPoleWorldModel()(torch.ones(2, 5), torch.ones(2, 2)),
        "action",
    ),
    case("dream action NaN", lambda: dream().step(np.array([np.nan])), "action", "finite"),
    case("dream action of two", lambda: dream().step(np.array([1.0, 2.0])), "action"),
    case("wrapper NaN action", lambda: _stepped(wrapped(), np.array([np.nan])), "finite"),
    case(
        "wrapper discrete action 5",
        lambda: _stepped(ObservationalDropoutWrapper(gym.make("CartPole-v1"), 0.5), 5),
        "action",
    ),
    case(
        "wrapper discrete action 0.5",
        lambda: _stepped(ObservationalDropoutWrapper(gym.make("CartPole-v1"), 0.5), 0.5),
        "action",
    ),
    case(
        "swing-up action of two",
        lambda: _stepped(CartPoleSwingUpEnv(), np.array([1.0, 0.0])),
        "action",
    ),
    case(
        "swing-up action inf", lambda: _stepped(CartPoleSwingUpEnv(), np.array([np.inf])), "finite"
    ),
    case(
        "vector swing-up actions of another count",
        lambda: _stepped(CartPoleSwingUpVectorEnv(3), np.zeros((2, 1))),
        "actions",
        "(3, 1)",
    ),
    case(
        "vector swing-up actions NaN",
        lambda: _stepped(CartPoleSwingUpVectorEnv(2), np.full((2, 1), np.nan)),
        "actions",
        "finite",
    ),
    case("dynamics state of three", lambda: cartpole_swingup_step(np.zeros(3), 0.0), "state"),
    case("dynamics action NaN", lambda: cartpole_swingup_step(np.zeros(4), np.nan), "action"),
    case("reward of a short observation", lambda: cartpole_reward(np.zeros(3)), "obs", "(5,)"),
    case("terminated of an empty observation", lambda: cartpole_terminated(np.zeros(0)), "obs"),
]


def _stepped(env: Any, action: Any) -> Any:
    env.reset(seed=0)
    return env.step(action)


@pytest.mark.parametrize(("call", "words", "error"), CONFIG + DTYPE + EMPTY + VALUES)
def test_refused(call: Any, words: tuple[str, ...], error: Any) -> None:
    assert_refused(call, words, error)


@pytest.mark.parametrize("damage", ["not json", "no optimizer", "not a zip", "no zip"])
def test_a_damaged_run_cache_entry_is_named_and_trained_again(damage: str, tmp_path: Path) -> None:
    """The reproduction's run cache: a damaged entry names its file and counts as not
    finished (the run trains again), instead of failing deep in SB3's load."""
    cache = RunCache(tmp_path, {"steps": 16}, "fingerprint")
    model = ppo()
    saved = tmp_path / "agent.zip"
    model.save(saved)
    run = AgentRun("obsdrop", 0.5, 0)
    cache.save(run, {"return": 1.0, "agent": saved.read_bytes()})
    entry = cache.path(run)
    agent = entry.with_suffix(".zip")
    if damage == "not json":
        entry.write_text('{"return": 1.')
    elif damage == "no optimizer":
        with zipfile.ZipFile(saved) as full, zipfile.ZipFile(agent, "w") as stripped:
            for item in full.infolist():
                if item.filename != "policy.optimizer.pth":
                    stripped.writestr(item, full.read(item.filename))
    elif damage == "not a zip":
        agent.write_bytes(b"")
    else:
        agent.unlink()
    with pytest.warns(RuntimeWarning, match=r"(json|zip)"):
        assert cache.load(run) is None
    assert json.loads(json.dumps(cache.budget)) == {"steps": 16}


@pytest.mark.parametrize(
    ("text", "why"),
    [('{"return": 1.', "JSONDecodeError"), ("[1, 2]", "a JSON list"), ("\udcff", "Unicode")],
)
def test_a_damaged_record_is_named_and_counts_as_missing(
    text: str, why: str, tmp_path: Path
) -> None:
    """The shared reader of finished runs' records (the run cache's and the CarRacing
    experiment's): a damaged file is named, and the run trains again."""
    path = tmp_path / "agent_0.1_0.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.warns(RuntimeWarning, match=rf"agent_0.1_0.json.*{why}"):
        assert read_record(path) is None
    assert read_record(tmp_path / "missing.json") is None
    write_record(path, {"return": 2.0})  # replaced whole
    assert read_record(path) == {"return": 2.0}
    assert list(tmp_path.iterdir()) == [path]  # no .partial left behind


def test_a_run_cache_entry_without_its_agent_flag_trains_again(tmp_path: Path) -> None:
    cache = RunCache(tmp_path, {"steps": 16}, "fingerprint")
    run = AgentRun("obsdrop", 0.5, 0)
    write_record(cache.path(run), {"return": 1.0})
    with pytest.warns(RuntimeWarning, match="has_agent"):
        assert cache.load(run) is None
