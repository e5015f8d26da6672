"""sb3-contrib's own recurrent-policy tests over our policy (issue 27, item 6).

sb3-contrib tests ``RecurrentPPO``'s LSTM policies with ``tests/test_lstm.py`` (at the
installed version, fetched by ``make setup``: see ``tests/integrations/ecosystem_suites.py``):
flat, image and dict observations, discrete, continuous and multi-dimensional actions,
gSDE, vectorised environments, evaluation. Here every one of its tests runs, unchanged,
with its ``RecurrentPPO`` pointed at ours: whatever policy it names becomes
:class:`ObservationalDropoutPolicy`, and whatever environment it passes is wrapped in
:class:`ObservationalDropoutWrapper` (p = 0.5; a vectorised environment's copies, in place,
so that its own evaluation later sees the same observations).

The cases that set an LSTM's own options (``lstm_hidden_size``, ``n_lstm_layers``,
``shared_lstm``, ``enable_critic_lstm``; our recurrent core is the world model, shared by
the actor and the critic) or ``share_features_extractor=False``, and ``test_check``, which
checks sb3-contrib's assertions on those options, must be refused with our clear error
instead; every other case must pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from paperports.integrations.sb3 import ObservationalDropoutPolicy, ObservationalDropoutWrapper

from ..ecosystem_suites import use_suite

use_suite("sb3-contrib")

import sb3_contrib_tests.test_lstm as suite  # noqa: E402

PEEK = 0.5
LSTM_ONLY = {"lstm_hidden_size", "n_lstm_layers", "shared_lstm", "enable_critic_lstm"}


def _wrap(env: Any) -> Any:
    """The environment a suite test passes, with observational dropout."""
    if isinstance(env, str):
        return ObservationalDropoutWrapper(gym.make(env), PEEK)
    if isinstance(env, DummyVecEnv):
        wrapped = [ObservationalDropoutWrapper(e, PEEK) for e in env.envs]
        DummyVecEnv.__init__(env, [lambda e=e: e for e in wrapped])  # type: ignore[misc]
        return env
    if isinstance(env, VecEnv):  # pragma: no cover - the suite uses DummyVecEnv
        raise TypeError(f"cannot wrap a {type(env).__name__}'s copies")
    return ObservationalDropoutWrapper(env, PEEK)


class OurRecurrentPPO(RecurrentPPO):
    """``RecurrentPPO`` with our policy, whatever policy the test names, on the wrapped
    environment."""

    def __init__(self, policy: Any, env: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(ObservationalDropoutPolicy, _wrap(env), *args, **kwargs)


def _cases() -> Iterator[Any]:
    """Every test of the suite, with each of its parameter sets (the slow one left out,
    as the suite itself leaves it out by default)."""
    for name in sorted(n for n in vars(suite) if n.startswith("test_")):
        marks = getattr(getattr(suite, name), "pytestmark", [])
        if any(mark.name == "slow" for mark in marks):
            continue
        grids = [mark.args for mark in marks if mark.name == "parametrize"]
        if not grids:
            yield pytest.param(name, {}, id=name)
            continue
        ((argname, values),) = grids  # one parametrisation per test in this suite
        for i, value in enumerate(values):
            yield pytest.param(name, {argname: value}, id=f"{name}[{i}]")


def _refused(name: str, kwargs: dict[str, Any]) -> bool:
    """Whether the case sets what our policy fixes (see the module)."""
    options = kwargs.get("policy_kwargs", {})
    return (
        name == "test_check"
        or bool(LSTM_ONLY & set(options))
        or options.get("share_features_extractor") is False
    )


CASES = list(_cases())


def test_the_suite_is_the_one_expected() -> None:
    """The harness runs what it should: sb3-contrib's tests of flat, image and dict
    observations are all among the cases, and both kinds of case occur."""
    names = {case.values[0] for case in CASES}
    assert {"test_cnn", "test_dict_obs", "test_run", "test_policy_kwargs"} <= names
    refused = [case for case in CASES if _refused(*case.values)]
    assert 0 < len(refused) < len(CASES)


@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_sb3_contrib_recurrent_policy_tests_on_our_policy(
    monkeypatch: pytest.MonkeyPatch, name: str, kwargs: dict[str, Any]
) -> None:
    monkeypatch.setattr(suite, "RecurrentPPO", OurRecurrentPPO)
    test = getattr(suite, name)
    if _refused(name, kwargs):
        with pytest.raises(ValueError, match="ObservationalDropoutPolicy"):
            test(**kwargs)
    else:
        test(**kwargs)
