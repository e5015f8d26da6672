"""The ES reproduction's agents: the paper's agent trained by PGPE, and its measurements.

What :mod:`~paperports.experiments.obsdrop.es_reproduce` runs for each peek probability and
seed, kept apart from the report's writing so that the agents' fingerprint covers what
trains and measures them and nothing else: rewording the report keeps the finished agents.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import RecurrentPPO

from paperports.adapters import cartpole_swingup_vector
from paperports.experiments.obsdrop import agents
from paperports.experiments.obsdrop.agents import (
    ENV_ID,
    PREDICTION_OFFSET,
    dream_transfer,
    eval_seed,
    evaluate_recurrent,
    prediction_error,
)
from paperports.experiments.obsdrop.run_cache import code_fingerprint
from paperports.experiments.records import read_record, write_record
from paperports.integrations.sb3 import (
    ObservationalDropoutPolicy,
    ObservationalDropoutWrapper,
    train_with_es,
)

__all__ = ["ES_POLICY", "EsBudget", "es_agent", "es_fingerprint"]

# The paper's agent (its code): M's 120 tanh units predict the accelerations; the controller
# has 10. M starts at zero accelerations, scaled x10 (the swing-up's reach tens of m/s^2).
ES_POLICY: dict[str, Any] = {
    "world_model": "cartpole",
    "world_model_kwargs": {"hidden_sizes": (120,), "acceleration_scale": 10.0, "zero_init": True},
    "net_arch": [10],
}


class EsBudget:
    """What one agent costs: generations of ``population`` x ``episodes``, and the
    measurements' episodes and dream steps."""

    def __init__(
        self,
        generations: int,
        population: int,
        episodes: int,
        eval_episodes: int,
        dream_steps: int,
    ) -> None:
        self.generations = generations
        self.population = population
        self.episodes = episodes
        self.eval_episodes = eval_episodes
        self.dream_steps = dream_steps

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


def _wrapped(p: float) -> ObservationalDropoutWrapper:
    return ObservationalDropoutWrapper(gym.make(ENV_ID), p)


def es_fingerprint() -> str:
    """The code and library versions the agents depend on (see the module)."""
    files = (Path(__file__), Path(agents.__file__), Path(cartpole_swingup_vector.__file__))
    return code_fingerprint(files, extra_libraries=("evotorch",))


def es_agent(p: float, seed: int, budget: EsBudget, runs: Path) -> dict[str, Any]:
    """Train (or resume, or load) one agent by PGPE and measure it."""
    runs.mkdir(parents=True, exist_ok=True)
    name = f"es_{p}_{seed}_{es_fingerprint()}"
    done = runs / f"{name}.json"
    saved = read_record(done)  # a damaged record is named in a warning and measured again
    if saved is not None and saved.get("budget") == budget.as_dict():
        return saved
    torch.manual_seed(seed)
    model = RecurrentPPO(
        ObservationalDropoutPolicy, _wrapped(p), seed=seed, device="cpu", policy_kwargs=ES_POLICY
    )
    began = time.perf_counter()
    result = train_with_es(
        model.policy,  # type: ignore[arg-type]
        lambda: _wrapped(p),
        budget.generations,
        population=budget.population,
        episodes=budget.episodes,
        seed=seed,
        checkpoint=runs / f"{name}.pkl",
        keep="center",
    )
    seconds = time.perf_counter() - began
    returns = evaluate_recurrent(model, p, budget.eval_episodes, eval_seed(seed))
    measured = {
        "p": p,
        "seed": seed,
        "budget": budget.as_dict(),
        "return": float(np.mean(returns)),
        "returns": [float(r) for r in returns],
        "dream": dream_transfer(model, budget.dream_steps, seed, budget.eval_episodes),
        "error": prediction_error(model, p, 1000, eval_seed(seed, PREDICTION_OFFSET)),
        "search": asdict(result),
        "train_seconds_this_session": seconds,
    }
    model.save(runs / f"{name}.zip")
    write_record(done, measured)
    return measured
