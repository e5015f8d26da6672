"""``paperports reproduce obsdrop``: observational dropout on the cart-pole swing-up.

For each peek probability p: ``RecurrentPPO`` with :class:`ObservationalDropoutPolicy` (the
physics-structured world model) on ``CartPoleSwingUpHarder`` wrapped in the dropout, the
return in the real environment with the same dropout; the dream transfer (a fresh PPO
policy trained only inside the agent's world model, evaluated in the real environment);
and two references on the same budget: ``MlpLstmPolicy`` on the same wrapped environment
(a memory, but no model) and PPO on the unmasked environment (the p = 100% ceiling). At
p = 10%, what trains M: the policy gradient alone (the default), the value loss too
(``VALUE_ROUTE``), or an auxiliary prediction loss (the ablation). Then a rollout of M
against the true trajectory, with the peeks marked, and a frame strip. The agents are
independent: ``--jobs N`` trains N at a time in worker processes. How each agent is
trained and measured is in :mod:`~paperports.experiments.obsdrop.agents`; this module
chooses the runs and writes the report.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Literal

import numpy as np
from sb3_contrib import RecurrentPPO

from paperports.experiments import each_in_workers
from paperports.experiments.obsdrop import agents
from paperports.experiments.obsdrop.agents import (
    CONTROLLER,
    EVAL_SEED,
    LEARNING_RATE,
    N_ENVS,
    PLAIN_PPO_SETTINGS,
    PPO_SETTINGS,
    PREDICTION_OFFSET,
    AgentRun,
    Critic,
    eval_seed,
    model_rollout,
    run_agent,
)
from paperports.experiments.obsdrop.probe import ModelProbe, probe_world_model
from paperports.experiments.obsdrop.run_cache import RunCache, code_fingerprint
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

# The paper's figure 3: mean return over 100 episodes against the peek probability.
PAPER_RETURNS = {0.01: 351, 0.03: 410, 0.05: 519, 0.10: 607, 0.20: 612, 1.0: 625}
PAPER_DREAM_BEST = (0.10, 593)
# The steps each world model is probed on: those of its one-step error (``run_agent``'s).
PROBE_STEPS = 1000
# This project's goal on 2 CPU cores: this mean return at p = 10% within 2 M steps.
GOAL_P10 = 550


# The rows of "What trains the world model" at p = 10%, besides the main agent (critic None:
# privileged): the other critics, and the auxiliary prediction loss (the ablation) with the
# critic it was measured with (603 / 625 / 622, docs/reports/obsdrop/findings.md).
ABLATION_CRITICS: tuple[Critic, ...] = ("belief", "value_route")
PREDICTION_LOSS = 1.0
PREDICTION_LOSS_CRITIC: Critic = "belief"
ABLATION_ROWS: dict[str | None, str] = {
    None: "policy gradient, the critic sees the true state (the agent above)",
    "belief": "policy gradient, the critic reads the belief, detached (sb3-contrib's default)",
    "value_route": "policy gradient and value loss (critic on the belief; accelerations x10)",
    "prediction loss": "with the prediction loss (coefficient 1; critic on the belief)",
}


def run_agents(
    runs: list[AgentRun],
    steps: int,
    dream_steps: int,
    episodes: int,
    ctx: RunContext,
    cache: RunCache | None = None,
) -> list[dict[str, Any]]:
    """:func:`run_agent` for each run, in order; with ``ctx.jobs > 1`` in that many worker
    processes, else in this process. Every run is on one torch thread either way, so the
    numbers are the same whatever ``jobs`` is. With a ``cache``, runs found there are not
    trained again, and each run is saved there as soon as it finishes."""
    args = (steps, dream_steps, episodes)
    results = [cache.load(r) if cache is not None else None for r in runs]
    todo = [i for i, result in enumerate(results) if result is None]
    if cache is not None and len(todo) < len(runs):
        ctx.log(f"obsdrop: {len(runs) - len(todo)} of {len(runs)} agents from {cache.folder}")

    def finish(i: int, result: dict[str, Any]) -> None:
        results[i] = result
        if cache is not None:
            cache.save(runs[i], result)

    each_in_workers(
        run_agent,
        [(runs[i], *args) for i in todo],
        ctx.jobs,
        lambda k, result: finish(todo[k], result),
        ctx,
        "obsdrop agents",
    )
    return [result for result in results if result is not None]


def reproduce(ctx: RunContext) -> Path:
    report = Report(METHODS["obsdrop"], ctx.out, ctx.command)
    ps = [0.1, 1.0] if ctx.quick else sorted(PAPER_RETURNS)
    seeds = [ctx.seed] if ctx.quick else [ctx.seed + k for k in range(3)]
    steps = 40_000 if ctx.quick else 2_000_000
    dream_steps = 20_000 if ctx.quick else 500_000
    # Episodes are cheap (run 100 at a time: 500 in well under a minute) and their returns
    # spread widely (standard deviation ~400: a third of the random starts end within 100
    # steps), so even the quick budget uses 20, and the full one 500 per agent.
    episodes = 20 if ctx.quick else 500
    # the goal's agents (p = 10%) first: a reproduction stopped part-way has measured them
    first = sorted(ps, key=lambda p: (p != 0.1, p))
    runs = [AgentRun("obsdrop", p, s) for p in first for s in seeds]
    if not ctx.quick:  # the references and the ablation: the full budget's
        runs += [AgentRun("obsdrop", 0.1, s, critic=c) for c in ABLATION_CRITICS for s in seeds]
        runs += [
            AgentRun("obsdrop", 0.1, s, PREDICTION_LOSS, PREDICTION_LOSS_CRITIC) for s in seeds
        ]
        runs += [AgentRun("lstm", 0.1, s) for s in seeds]
        runs += [AgentRun("ceiling", 1.0, s) for s in seeds]
    ctx.log(f"obsdrop: {len(runs)} agents of {steps:,} steps, {ctx.jobs} at a time ...")
    budget = {"steps": steps, "dream_steps": dream_steps, "episodes": episodes}
    cache = RunCache(ctx.out / "runs", budget, code_fingerprint((Path(agents.__file__),)))
    results = run_agents(runs, steps, dream_steps, episodes, ctx, cache)
    done = list(zip(runs, results, strict=True))

    def measured(
        kind: Literal["obsdrop", "lstm", "ceiling"],
        p: float,
        key: str,
        coef: float = 0.0,
        critic: Critic | None = None,
    ) -> list[float]:
        """``key`` of the runs of that kind, p and variant, one per seed."""
        return [
            result[key]
            for run, result in done
            if (run.kind, run.p, run.prediction_loss_coef, run.critic) == (kind, p, coef, critic)
        ]

    keys = ("return", "returns", "dream", "error")
    main = {p: {key: measured("obsdrop", p, key) for key in keys} for p in ps}
    ablation = {ABLATION_ROWS[None]: {key: measured("obsdrop", 0.1, key) for key in keys}}
    for critic in ABLATION_CRITICS:
        ablation[ABLATION_ROWS[critic]] = {
            key: measured("obsdrop", 0.1, key, critic=critic) for key in keys
        }
    ablation[ABLATION_ROWS["prediction loss"]] = {
        key: measured("obsdrop", 0.1, key, PREDICTION_LOSS, PREDICTION_LOSS_CRITIC) for key in keys
    }
    ablation = {name: row for name, row in ablation.items() if row["return"]}  # those that ran
    # What each world model learned, on the steps of its one-step error (see probe.py): not
    # part of a run's cached results, so the probe can change without retraining anything.
    loaded = {
        run: RecurrentPPO.load(io.BytesIO(result["agent"]), device="cpu")
        for run, result in done
        if run.kind == "obsdrop"
    }
    probed = {
        run: probe_world_model(agent, run.p, PROBE_STEPS, eval_seed(run.seed, PREDICTION_OFFSET))
        for run, agent in loaded.items()
    }

    def probes(p: float, coef: float = 0.0, critic: Critic | None = None) -> list[ModelProbe]:
        return [
            probe
            for run, probe in probed.items()
            if (run.p, run.prediction_loss_coef, run.critic) == (p, coef, critic)
        ]

    learned = {f"p = {p:.0%}": probes(p) for p in ps}
    learned |= {ABLATION_ROWS[critic]: probes(0.1, critic=critic) for critic in ABLATION_CRITICS}
    learned[ABLATION_ROWS["prediction loss"]] = probes(0.1, PREDICTION_LOSS, PREDICTION_LOSS_CRITIC)
    lstm = measured("lstm", 0.1, "return")
    ceiling = measured("ceiling", 1.0, "return")
    shown = AgentRun("obsdrop", min(ps), ctx.seed)  # the rollout figure's agent
    rollout = model_rollout(loaded[shown], min(ps), 300, ctx.seed)
    _write(report, ctx, seeds, (steps, dream_steps, episodes), main, lstm, ceiling, ablation)
    _write_learned(report, learned)
    _figures(report, main, rollout)
    _findings(report, main)
    return report.write()


def _findings(report: Report, main: dict[float, dict[str, list[Any]]]) -> None:
    """The summary's rows: the return at the paper's headline p, and the best dream."""
    shown = [p for p in (0.1, 1.0) if p in main]
    report.finding(
        "swing-up return, p = " + " / ".join(f"{p:.0%}" for p in shown),
        " / ".join(f"{np.mean(main[p]['return']):.0f}" for p in shown),
        " / ".join(f"{PAPER_RETURNS[p]}" for p in shown),
    )
    dreams = {p: float(np.mean(row["dream"])) for p, row in main.items() if row["dream"]}
    if dreams:
        best = max(dreams, key=dreams.__getitem__)
        paper_p, paper_dream = PAPER_DREAM_BEST
        report.finding(
            "return of PPO trained in the dream, best p",
            f"{dreams[best]:.0f} (p = {best:.0%})",
            f"{paper_dream} (p = {paper_p:.0%})",
        )


def _pooled(returns: list[list[float]]) -> tuple[float, float, int]:
    """Mean and standard error of several agents' episode returns pooled, and their count."""
    episodes = np.concatenate([np.asarray(r, dtype=float) for r in returns] or [np.zeros(0)])
    if len(episodes) == 0:
        return float("nan"), float("nan"), 0
    error = float(episodes.std(ddof=1) / np.sqrt(len(episodes))) if len(episodes) > 1 else np.nan
    return float(episodes.mean()), float(error), len(episodes)


def _verdict(mean: float, error: float, goal: float) -> str:
    """Whether ``mean`` reaches ``goal``, saying so when the goal is within two standard
    errors of it: a mean that clears the goal by less than its noise is no clear pass."""
    if not np.isfinite(error):
        return "reached" if mean >= goal else "**not reached**"
    low, high = mean - 2 * error, mean + 2 * error
    band = f"{low:.0f}-{high:.0f} at two standard errors"
    if low >= goal:
        return f"reached ({band})"
    if mean >= goal:
        return f"reached by the mean, **not beyond its noise** ({band})"
    if high >= goal:
        return f"**not reached**, though within the noise ({band})"
    return f"**not reached** ({band})"


def _seeds(values: list[float], digits: int = 0) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values)


def _write(
    report: Report,
    ctx: RunContext,
    seeds: list[int],
    budget: tuple[int, int, int],
    main: dict[float, dict[str, list[Any]]],
    lstm: list[float],
    ceiling: list[float],
    ablation: dict[str, dict[str, list[Any]]],
) -> None:
    """The report's text, tables and ``results.json``: ``main`` holds, per p, each seed's
    ``return`` (its mean), ``returns`` (every episode), ``dream`` and ``error``."""
    steps, dream_steps, episodes = budget
    report.section("Set-up")
    report.text(
        f"Budget: {'quick' if ctx.quick else 'full'}: {steps:,} environment steps of "
        f"`RecurrentPPO` per agent ({N_ENVS} environments, n_steps "
        f"{PPO_SETTINGS['n_steps']}, batch {PPO_SETTINGS['batch_size']}, "
        f"{PPO_SETTINGS['n_epochs']} epochs, lr {LEARNING_RATE} decayed linearly to 0), "
        f"seeds {seeds}, {episodes} deterministic evaluation episodes each (every agent its "
        f"own: seeds {EVAL_SEED:,} + 1,000 x its seed on), on `CartPoleSwingUpHarder-v0`. "
        "Agent: `ObservationalDropoutPolicy` with the "
        "physics-structured world model, a privileged critic (it reads the true state; the "
        "controller and M never do, so M learns from the policy gradient alone) and a "
        f"{CONTROLLER} tanh controller (the same width "
        "for `MlpLstmPolicy`, with 16 LSTM units, and PPO's default). Feed-forward PPO "
        "(`MlpPolicy`: the unmasked reference and the dreamer) has the same environments and "
        f"n_steps, minibatches of {PLAIN_PPO_SETTINGS['batch_size']} and a constant lr. "
        f"Dream: a fresh PPO trained {dream_steps:,} steps inside the agent's world model "
        "(`WorldModelEnv`), evaluated in the real environment. M's one-step error: "
        "||M(o_{t-1}, a_{t-1}) - o_t||^2 with the true previous observation, the mean over "
        "1,000 steps the agent drives in the real environment (episodes from seed "
        f"{eval_seed(0, PREDICTION_OFFSET):,} + 1,000 x its seed on). The paper trained "
        "with PEPG (population 384) for far longer; the goal "
        f"of this project on 2 CPU cores is {GOAL_P10} at p = 10% within 2 M steps."
    )
    report.section("Return in the real environment against the peek probability")
    rows = []
    for p, row in main.items():
        mean, error, _ = _pooled(row["returns"])
        rows.append(
            [
                f"{p:.0%}",
                PAPER_RETURNS.get(p, ""),
                _seeds(row["return"]),
                f"{mean:.0f} ± {error:.0f}",
                _seeds(row["dream"]),
                f"{np.mean(row['error']):.3g}",
            ]
        )
    seed_names = " / ".join(str(seed) for seed in seeds)
    report.table(
        [
            "p (peek)",
            "paper",
            f"ours, seeds {seed_names}",
            "ours, mean ± standard error",
            "dream transfer, per seed",
            "M's one-step error, mean",
        ],
        rows,
    )
    report.text(
        "Each seed's return is the mean over its own episodes; the mean and its standard "
        "error pool the episodes of all seeds (returns spread widely: a third of the random "
        "starts end within 100 steps, whatever the agent)."
    )
    if lstm and ceiling:
        report.table(
            ["reference, same budget", f"return, seeds {seed_names}", "mean"],
            [
                [
                    "RecurrentPPO MlpLstmPolicy, p = 10% (memory, no model)",
                    _seeds(lstm),
                    f"{np.mean(lstm):.0f}",
                ],
                [
                    "PPO MlpPolicy on the unmasked env (see the set-up)",
                    _seeds(ceiling),
                    f"{np.mean(ceiling):.0f}",
                ],
            ],
        )
    else:
        report.text("The references (`MlpLstmPolicy`, unmasked PPO) run in the full budget.")
    at_target = main.get(0.1, {"returns": []})["returns"]
    p10_mean, p10_error, count = _pooled(at_target)
    paper_p, paper_dream = PAPER_DREAM_BEST
    dream_means = {p: float(np.mean(row["dream"])) for p, row in main.items() if row["dream"]}
    best_p = max(dream_means, key=dream_means.__getitem__) if dream_means else paper_p
    best = dream_means.get(best_p, float("nan"))
    report.text(
        f"At p = 10% ours reaches {p10_mean:.0f} (standard error {p10_error:.0f}, over the "
        f"{count} episodes of its {len(seeds)} seeds; paper {PAPER_RETURNS[0.1]}; goal "
        f"{GOAL_P10} within 2 M steps): {_verdict(p10_mean, p10_error, GOAL_P10)} with "
        f"{steps:,} steps. The paper's best dream transfer was at p = {paper_p:.0%} "
        f"({paper_dream}); ours is at best {best:.0f} (the "
        f"mean of p = {best_p:.0%}'s seeds), {best / paper_dream:.0%} of it: "
        f"{'reproduced' if best >= 0.9 * paper_dream else '**not reproduced**'}."
        + (
            " This quick budget shows the pipeline end to end; it is far too small to train "
            "a swing-up controller, so the numbers do not reproduce the paper's."
            if ctx.quick
            else ""
        )
    )
    report.section("What trains the world model (p = 10%)")
    if len(ablation) == 1:
        report.text("The ablation runs in the full budget (`paperports reproduce obsdrop`).")
    else:
        _write_ablation(report, ablation, seed_names)
    report.results = {
        "steps": steps,
        "dream_steps": dream_steps,
        "episodes": episodes,
        "seeds": seeds,
        "returns": {str(p): row["return"] for p, row in main.items()},
        "p10_pooled": {"mean": p10_mean, "standard_error": p10_error, "episodes": count},
        "dream_transfer": {str(p): row["dream"] for p, row in main.items()},
        "one_step_error": {str(p): row["error"] for p, row in main.items()},
        "mlp_lstm_p10": lstm,
        "ppo_unmasked": ceiling,
        "prediction_loss_ablation": {
            name: {key: row[key] for key in ("return", "dream", "error")}
            for name, row in ablation.items()
        },
        "paper": {str(p): v for p, v in PAPER_RETURNS.items()},
    }


def _write_ablation(
    report: Report, ablation: dict[str, dict[str, list[Any]]], seed_names: str
) -> None:
    """What trains the world model: the rows of agents at p = 10% trained differently."""
    report.text(
        "The paper's world model learns only from the reward. In the agent above only the "
        "policy-gradient loss reaches M, and its critic (used in training only) reads the "
        "true state (`privileged_critic=True`). The second row gives the critic the agent's "
        "belief instead, detached (sb3-contrib's default for a shared recurrent core); the "
        "third lets the value loss reach M through the belief too "
        "(`critic_trains_world_model=True`, still the reward alone) with M's accelerations "
        "scaled x10 from a zero start. The ablation adds M's squared error on the steps "
        "whose observation is shown to RecurrentPPO's loss (`prediction_loss_coef=1.0`, "
        "critic on the belief), same budget and seeds. The dream transfer needs an accurate "
        "M: compare the one-step errors."
    )
    rows = []
    for name, row in ablation.items():
        mean, error, _ = _pooled(row["returns"])
        rows.append(
            [
                name,
                _seeds(row["return"]),
                f"{mean:.0f} ± {error:.0f}",
                _seeds(row["dream"]),
                _seeds(row["error"], 3),
            ]
        )
    report.table(
        [
            "world model trained by",
            f"return (p = 10%), seeds {seed_names}",
            "mean ± standard error",
            "dream transfer",
            "one-step error",
        ],
        rows,
    )


def _write_learned(report: Report, learned: dict[str, list[ModelProbe]]) -> None:
    """The section on what each world model learned (:mod:`.probe`), per row of agents."""
    report.section("What the world model learned")
    report.text(
        "M's one-step error is small even for a model that has learned nothing: at the "
        "swing-up's 0.01 s step the constant-velocity model (zero accelerations) predicts "
        "closely too, the more so the calmer the agent drives. So each M is compared, on the "
        f"same {PROBE_STEPS:,} steps of its agent, with that model: its skill is one minus "
        "the ratio of their errors (1: the true dynamics; 0: no better than constant "
        "velocity; below 0: worse). Its action gains are the least-squares slopes of how "
        "its accelerations respond to the action (half the difference between a = 1 and "
        "a = -1) on how the true ones do, over the visited states (1: as the physics; 0: "
        "M ignores the action). A dreamer can only learn in an M that knows what the "
        "action does."
    )
    rows = [
        [
            name,
            f"{np.mean([q.error for q in probes]):.3g} "
            f"({np.mean([q.constant_velocity_error for q in probes]):.3g})",
            _seeds([q.skill for q in probes], 2),
            _seeds([q.gain_x for q in probes], 2),
            _seeds([q.gain_theta for q in probes], 2),
        ]
        for name, probes in learned.items()
        if probes
    ]
    report.table(
        [
            "agents",
            "one-step error, mean (constant velocity's)",
            "skill, per seed",
            "action gain on x''",
            "action gain on theta''",
        ],
        rows,
    )
    report.results["world_model_probe"] = {
        name: [probe.as_dict() for probe in probes] for name, probes in learned.items()
    }


def _figures(
    report: Report, main: dict[float, dict[str, list[Any]]], rollout: dict[str, np.ndarray]
) -> None:
    """Return against p (ours, the dream's and the paper's), M's rollout against the truth
    with the peeks marked, and a strip of ``rgb_array`` frames."""
    import matplotlib.pyplot as plt

    ps = list(main)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot(ps, [np.mean(main[p]["return"]) for p in ps], "-o", label="ours, with dropout")
    ax.plot(ps, [np.mean(main[p]["dream"]) for p in ps], "--s", label="ours, dream transfer")
    paper_ps = sorted(PAPER_RETURNS)
    ax.plot(paper_ps, [PAPER_RETURNS[p] for p in paper_ps], "k*", label="paper")
    ax.set_xscale("log")
    ax.set_xlabel("peek probability p")
    ax.set_ylabel("return")
    ax.legend()
    report.figure(fig, "return_vs_p", "Return in the real environment against p.")

    truth, belief, peeks = rollout["truth"], rollout["belief"], rollout["peeks"]
    fig, axes = plt.subplots(2, 1, figsize=(7, 4.2), sharex=True)
    t = np.arange(len(truth))
    for ax, (name, index) in zip(axes, (("x", 0), ("theta", None)), strict=True):
        if index is None:
            true_v = np.arctan2(truth[:, 3], truth[:, 2])
            belief_v = np.arctan2(belief[:, 3], belief[:, 2])
        else:
            true_v, belief_v = truth[:, index], belief[:, index]
        ax.plot(t, true_v, label="true")
        ax.plot(t, belief_v, "--", label="world model")
        ax.plot(t[peeks], true_v[peeks], "k|", label="peek")
        ax.set_ylabel(name)
    axes[0].legend(fontsize=7)
    axes[1].set_xlabel("step")
    report.figure(
        fig, "model_rollout", f"World model against the truth at p = {min(ps):.0%} (marks: peeks)."
    )
    frames = rollout["frames"]
    fig, axes = plt.subplots(1, len(frames), figsize=(2.2 * len(frames), 1.7))
    for ax, frame in zip(np.atleast_1d(axes), frames, strict=True):
        ax.imshow(frame)
        ax.axis("off")
    report.figure(fig, "frames", "Frames from `rgb_array`: the truth, and the belief in blue.")
