"""The paper's own training: observational dropout by the evolution strategy (issue 27,
item 4).

    python -m paperports.experiments.obsdrop.es_reproduce --out docs/reports/obsdrop-es [--jobs 2]

For each peek probability p and seed, the paper's agent (the world model M: one hidden layer
of 120 tanh units predicting the two accelerations, integrated by Euler steps of 0.01 s,
starting as the constant-velocity model; the controller: 10 tanh units) is trained by
:func:`~paperports.integrations.sb3.train_with_es`, PGPE with the paper's population of 384
and 16 episodes per evaluation, on the reward alone and without a critic; the agent kept
is the search's mean after the last generation (``keep="center"``). Then it is
measured as the PPO route's agents are (:mod:`~paperports.experiments.obsdrop.agents`): the
mean return of deterministic episodes in the real environment with the same dropout, the
dream transfer (a fresh PPO policy trained inside M alone, then deployed), and M's one-step
error. The PPO route's committed results (``docs/reports/obsdrop/results.json``) are shown
beside them.

The agents are independent: ``--jobs N`` trains N at a time in worker processes, each on one
torch thread as an agent trained in this process is, so the numbers do not depend on it.
Every search is checkpointed after each generation under ``<out>/runs``: a run that stops
resumes where it stopped, and finished agents are not trained again. The files are named by
the agent and a fingerprint of the code that trains and measures it and of the libraries'
versions (:func:`~paperports.experiments.obsdrop.es_agents.es_fingerprint`: the sb3
integration, :mod:`~paperports.experiments.obsdrop.es_agents`, the agents' measurements,
the vectorised swing-up and evotorch): a change to any of them starts the agents afresh
instead of resuming a search of other code; a change to this module's report does not.

The full budget (18 agents of about 25 minutes each, two at a time on two cores) outlasts
a working session, so the finished agents' records (``<out>/runs/*.json``, a few kB each)
are committed under ``docs/reports/obsdrop-es/runs`` as they finish (``.gitignore`` keeps
them and leaves out the checkpoints and weights): a later clone, run with
``--out docs/reports/obsdrop-es``, trains only the agents still missing.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperports._checks import check_int, whole_number
from paperports.experiments import each_in_workers, experiment_main, one_torch_thread
from paperports.experiments.obsdrop.es_agents import EsBudget, es_agent
from paperports.experiments.obsdrop.reproduce import PAPER_DREAM_BEST, PAPER_RETURNS
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

__all__ = ["reproduce_es"]

# The forward-predictive baselines of the paper's dream transfer (120 and 1,200 units).
PAPER_FORWARD_BASELINES = {120: 274, 1200: 430}
# The authors' own search, read off the log their code committed (google/brain-tokyo-workshop,
# learntopredict/cartpole/log/learn_cartpole.pepg.16.384.hist.json; it does not record the
# peek probability): its length, and the population's mean return over the 20 generations
# that end at each milestone (its third column).
PAPER_SEARCH: dict[str, Any] = {
    "generations": 20_621,
    "hours": 46.9,
    "population_mean": {"200": 249.6, "1000": 376.7, "20621": 525.1},
}
PPO_RESULTS = Path(__file__).resolve().parents[4] / "docs" / "reports" / "obsdrop" / "results.json"


def _ppo_rows() -> dict[str, Any]:
    """The PPO route's committed returns and dream transfers per p, where present."""
    if not PPO_RESULTS.exists():
        return {}
    results = json.loads(PPO_RESULTS.read_text())
    return {"returns": results.get("returns", {}), "dream": results.get("dream_transfer", {})}


def _agent_on_one_thread(p: float, seed: int, budget: EsBudget, runs: Path) -> dict[str, Any]:
    """:func:`es_agent` on one torch thread, in this process or a worker: the same numbers
    whatever ``--jobs`` is."""
    with one_torch_thread():
        return es_agent(p, seed, budget, runs)


def reproduce_es(ctx: RunContext, generations: int | None = None, jobs: int = 1) -> Path:
    """Train and measure every agent (``jobs`` at a time, in worker processes), then write
    the report."""
    jobs = check_int("jobs", jobs, minimum=1, who="es_reproduce")
    if generations is not None:  # 0 must not read as "the default"
        generations = check_int("generations", generations, minimum=1, who="es_reproduce")
    report = Report(METHODS["obsdrop"], ctx.out, ctx.command)
    ps = [0.1, 1.0] if ctx.quick else sorted(PAPER_RETURNS)
    seeds = [ctx.seed] if ctx.quick else [ctx.seed + k for k in range(3)]
    budget = (
        EsBudget(generations or 3, 16, 2, 20, 2_000)
        if ctx.quick
        else EsBudget(generations or 200, 384, 16, 500, 500_000)
    )
    first = sorted(ps, key=lambda p: (p != 0.1, p))  # the goal's p first
    agents = [(p, seed) for p in first for seed in seeds]
    trained: dict[tuple[float, int], dict[str, Any]] = {}
    ctx.log(
        f"obsdrop-es: {len(agents)} agents of {budget.generations} generations, {jobs} at a time"
    )

    def finish(i: int, result: dict[str, Any]) -> None:
        trained[agents[i]] = result
        ctx.log(f"obsdrop-es: p = {agents[i][0]:.0%}, seed {agents[i][1]} done")

    calls = [(p, seed, budget, ctx.out / "runs") for p, seed in agents]
    each_in_workers(_agent_on_one_thread, calls, jobs, finish, ctx, "obsdrop-es agents")
    ppo = _ppo_rows()

    def per_seed(p: float, key: str) -> list[float]:
        return [trained[(p, s)][key] for s in seeds]

    report.section("Return against the peek probability, trained by the ES")
    report.text(
        f"PGPE (evotorch), population {budget.population}, {budget.episodes} episodes per "
        f"evaluation, {budget.generations} generations per agent; the search's mean after "
        f"the last generation, measured over {budget.eval_episodes} held-out episodes of the real "
        f"environment with the same dropout. Seeds {', '.join(map(str, seeds))}. The dream: "
        f"a fresh PPO policy trained {budget.dream_steps:,} steps inside M alone, deployed. "
        "The PPO route's rows are the committed `paperports reproduce obsdrop` results."
    )
    rows = []
    for p in ps:
        ppo_returns = ppo.get("returns", {}).get(str(p))
        rows.append(
            [
                f"{p:.0%}",
                " / ".join(f"{v:.1f}" for v in per_seed(p, "return")),
                f"{np.mean(per_seed(p, 'return')):.0f}",
                PAPER_RETURNS[p],
                f"{np.mean(ppo_returns):.0f}" if ppo_returns else "",
                " / ".join(f"{v:.1f}" for v in per_seed(p, "dream")),
                " / ".join(f"{v:.3f}" for v in per_seed(p, "error")),
            ]
        )
    report.table(
        ["p", "ES return per seed", "ES mean", "paper", "PPO route mean", "dream", "M's error"],
        rows,
    )
    _figure(report, ps, per_seed, ppo)
    population_at_end = _search_length(report, ps, seeds, trained, budget)
    dream_best = max(np.mean(per_seed(p, "dream")) for p in ps)
    report.results["es"] = {
        "seeds": seeds,
        "budget": budget.as_dict(),
        "returns": {str(p): per_seed(p, "return") for p in ps},
        "dream_transfer": {str(p): per_seed(p, "dream") for p in ps},
        "one_step_error": {str(p): per_seed(p, "error") for p in ps},
        "best_per_generation": {
            str(p): [trained[(p, s)]["search"]["best_per_generation"] for s in seeds] for p in ps
        },
        "mean_per_generation": {
            str(p): [trained[(p, s)]["search"]["mean_per_generation"] for s in seeds] for p in ps
        },
        "paper": {str(p): v for p, v in PAPER_RETURNS.items()},
        "paper_dream_best": PAPER_DREAM_BEST[1],
        "paper_forward_baselines": PAPER_FORWARD_BASELINES,
        "population_mean_at_end": population_at_end,
        "paper_search": PAPER_SEARCH,
    }
    if 0.1 in ps:
        report.finding(
            "swing-up return at p = 10%, trained by the ES (mean over seeds)",
            f"{np.mean(per_seed(0.1, 'return')):.0f}",
            f"{PAPER_RETURNS[0.1]}",
        )
    report.finding(
        "best dream transfer (mean over seeds, best p)",
        f"{dream_best:.0f}",
        f"{PAPER_DREAM_BEST[1]} (forward-predictive baselines "
        f"{PAPER_FORWARD_BASELINES[120]} / {PAPER_FORWARD_BASELINES[1200]})",
    )
    return report.write()


def _search_length(
    report: Report,
    ps: list[float],
    seeds: list[int],
    trained: dict[tuple[float, int], dict[str, Any]],
    budget: EsBudget,
) -> dict[str, list[float]]:
    """Our searches' population mean at their end beside the authors' search at the same
    generation and at its own end: whether the shortfall is the search's length. Returns
    ours per p and seed."""
    last = budget.generations
    ours = {
        p: [float(np.mean(trained[(p, s)]["search"]["mean_per_generation"][-20:])) for s in seeds]
        for p in ps
    }
    paper = PAPER_SEARCH["population_mean"]
    report.section("The search's length")
    report.text(
        f"The population's mean return over the last 20 of our {last} generations, per seed, "
        "beside the authors' own search, read off the log their code committed "
        "(`learntopredict/cartpole/log/learn_cartpole.pepg.16.384.hist.json`; it does not "
        f"record the peek probability): it ran {PAPER_SEARCH['generations']:,} generations "
        f"({PAPER_SEARCH['hours']} hours on their machines). The returns in the table above "
        "are the search's mean (its centre), which scores above the population it samples."
    )
    rows = [
        [f"{p:.0%}", " / ".join(f"{v:.1f}" for v in ours[p]), f"{np.mean(ours[p]):.0f}"] for p in ps
    ]
    report.table(["p", f"ours, generation {last}, per seed", "mean"], rows)
    if str(last) in paper:
        report.text(
            f"The authors' search: {paper[str(last)]} at generation {last}, "
            f"{paper['1000']} at 1,000, {paper[str(PAPER_SEARCH['generations'])]} at "
            f"{PAPER_SEARCH['generations']:,}."
        )
    return {str(p): ours[p] for p in ps}


def _figure(
    report: Report,
    ps: list[float],
    per_seed: Callable[[float, str], list[float]],
    ppo: dict[str, Any],
) -> None:
    """Return against p: the ES agents (each seed, and the mean), the PPO route's mean, the
    paper's."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    for p in ps:
        ax.plot([p] * len(per_seed(p, "return")), per_seed(p, "return"), ".", color="C0", alpha=0.5)
    ax.plot(ps, [np.mean(per_seed(p, "return")) for p in ps], "-o", color="C0", label="ES (PGPE)")
    ppo_returns = ppo.get("returns", {})
    shown = [p for p in ps if str(p) in ppo_returns]
    if shown:
        means = [np.mean(ppo_returns[str(p)]) for p in shown]
        ax.plot(shown, means, "--s", color="C1", label="PPO route")
    ax.plot(
        sorted(PAPER_RETURNS),
        [PAPER_RETURNS[p] for p in sorted(PAPER_RETURNS)],
        "k*",
        label="paper",
    )
    ax.set_xscale("log")
    ax.set_xlabel("peek probability p")
    ax.set_ylabel("return")
    ax.legend()
    report.figure(
        fig, "return_vs_p", "Return in the real environment against p, by training route."
    )


def main(argv: Sequence[str] | None = None) -> int:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--generations", type=whole_number(1), default=None)
        parser.add_argument(
            "--jobs",
            type=whole_number(1),
            default=1,
            help="agents trained at a time, in worker processes",
        )

    return experiment_main(
        "paperports.experiments.obsdrop.es_reproduce",
        __doc__,
        lambda ctx, args: reproduce_es(ctx, args.generations, args.jobs),
        "runs/obsdrop-es",
        argv,
        options,
    )


if __name__ == "__main__":
    raise SystemExit(main())
