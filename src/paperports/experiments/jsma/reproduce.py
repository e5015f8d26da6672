"""``paperports reproduce jsma``: the paper's MNIST experiment on the digits stand-in.

Every held-out image is attacked towards each of the 9 other classes with theta = +1 and
Upsilon = 14.5%, in the pair and single-feature modes, differentiating probabilities and
logits, and with ART's ``SaliencyMapMethod`` on the same model and images. Then the
paper's rule, the probabilistic variants (WJSMA, TJSMA) and our default on four set-ups
that separate the data (smooth digits, or sharp MNIST-like strokes) from the network (our
small CNN, or the paper's LeNet), each run also judging a list of L0 budgets in the same
calls (a robustness curve).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

import foolbox as fb
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from paperports.adapters.digits import (
    Architecture,
    Strokes,
    accuracy,
    digits_classifier,
    load_digits_tensors,
)
from paperports.experiments.jsma.common import (
    AttackRun,
    all_other_targets,
    run_art,
    run_ours,
)
from paperports.integrations.foolbox import (
    SaliencyMapAttack,
    adversarial_distance_matrix,
    hardness_matrix,
)
from paperports.integrations.foolbox.saliency import Outputs
from paperports.integrations.foolbox.saliency_map_attack import Variant
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

PAPER = {"success_rate": 0.9710, "mean_l0_fraction": 0.0402}
UPSILON = 0.145
CONFIGS: list[tuple[str, bool, Outputs]] = [  # (name, pairwise, outputs)
    ("pairs, probabilities (default)", True, "probabilities"),
    ("pairs, logits (the paper's rule)", True, "logits"),
    ("single feature, probabilities", False, "probabilities"),
    ("single feature, logits", False, "logits"),
]
SETUPS: list[tuple[str, Architecture, Strokes]] = [  # (name, network, data)
    ("small CNN, smooth digits", "cnn", "smooth"),
    ("small CNN, sharp digits", "cnn", "sharp"),
    ("LeNet, smooth digits", "lenet", "smooth"),
    ("LeNet, sharp digits", "lenet", "sharp"),
]
CLOSEST = "LeNet, sharp digits"
RULES: list[tuple[str, Variant, Outputs]] = [  # (name, variant, outputs)
    ("JSMA, logits (the paper's rule)", "jsma", "logits"),
    ("WJSMA", "wjsma", "logits"),
    ("TJSMA", "tjsma", "logits"),
    ("JSMA, probabilities (our default)", "jsma", "probabilities"),
]
CURVE = [*range(0, 113, 4), 113]  # L0 budgets in features of 784, judged in the same calls
MNIST_MEAN = 0.1307  # MNIST's mean pixel intensity, the constant of its usual normalisation
PAIRS_PER_STEP = 8


def reproduce(ctx: RunContext) -> Path:
    torch.manual_seed(ctx.seed)
    report = Report(METHODS["jsma"], ctx.out, ctx.command)
    n_images = 20 if ctx.quick else None  # per size; None = the whole held-out split

    model = digits_classifier(28, seed=ctx.seed)
    x_test, y_test = load_digits_tensors(28, "test")
    acc = accuracy(model, x_test, y_test)
    x, y = x_test[:n_images], y_test[:n_images]
    xa, src, dst = all_other_targets(x, y)
    ctx.log(f"jsma: {len(x)} images x 9 targets = {len(xa)} attacks on 28x28 digits")

    runs: list[AttackRun] = []
    # --quick: the pair attacks alone (the paper's; single features are an extension)
    for name, pairwise, outputs in CONFIGS[:2] if ctx.quick else CONFIGS:
        attack = SaliencyMapAttack(pairwise=pairwise, outputs=outputs, max_perturbation=UPSILON)
        runs.append(run_ours(name, model, xa, dst, attack, progress=ctx.progress, epsilons=CURVE))
    ctx.log("jsma: ART SaliencyMapMethod on the same attacks ...")
    art = run_art(model, xa, dst, gamma=UPSILON)
    many = [] if ctx.quick else [
        run_ours(
            f"pairs_per_step={PAIRS_PER_STEP}, {outputs}",
            model,
            xa,
            dst,
            SaliencyMapAttack(
                outputs=outputs, max_perturbation=UPSILON, pairs_per_step=PAIRS_PER_STEP
            ),
        )
        for outputs in ("probabilities", "logits")
    ]  # fmt: skip
    setups = _setups(ctx, n_images, {"smooth": (model, x, y, acc)}, runs)

    # raw 8x8 digits: Upsilon = 14.5% of 64 features allows only 4 pair steps
    model8 = digits_classifier(8, seed=ctx.seed)
    x8_test, y8_test = load_digits_tensors(8, "test")
    acc8 = accuracy(model8, x8_test, y8_test)
    x8a, _, dst8 = all_other_targets(x8_test[:n_images], y8_test[:n_images])
    runs8 = [
        run_ours(
            f"8x8, {name}",
            model8,
            x8a,
            dst8,
            SaliencyMapAttack(pairwise=pairwise, outputs=outputs, max_perturbation=UPSILON),
        )
        for name, pairwise, outputs in CONFIGS[:2]
    ]
    art8 = run_art(model8, x8a, dst8, gamma=UPSILON)

    fm = fb.PyTorchModel(model, bounds=(0.0, 1.0), device="cpu")  # where x is
    modes: tuple[Outputs, ...] = ("probabilities", "logits")
    distance: dict[str, np.ndarray] = {
        outputs: adversarial_distance_matrix(fm, x, y, outputs=outputs) for outputs in modes
    }
    default = runs[0]
    hardness = hardness_matrix(
        default.l0_fraction,
        src,
        dst,
        num_classes=10,
        max_perturbations=np.linspace(0.01, UPSILON, 8).tolist(),
    )
    success_matrix = _per_pair(default.success.astype(float), src.numpy(), dst.numpy())

    _write(
        report,
        ctx,
        acc,
        acc8,
        len(x),
        runs,
        art,
        runs8,
        art8,
        distance,
        hardness,
        success_matrix,
        default,
        xa,
        src,
        dst,
    )
    _write_setups(report, setups)
    _write_many(report, runs[:2], many)
    report.results |= {
        "runs_pairs_per_step": {r.name: r.summary() for r in many},
        "setups": {
            name: {k: v for k, v in setup.items() if k != "runs"}
            | {"runs": {rule: run.summary() for rule, run in _runs(setup).items()}}
            for name, setup in setups.items()
        },
    }
    return report.write()


def _runs(setup: dict[str, object]) -> dict[str, AttackRun]:
    return cast(dict[str, AttackRun], setup["runs"])


def _setups(
    ctx: RunContext,
    n_images: int | None,
    main: dict[str, tuple[torch.nn.Module, torch.Tensor, torch.Tensor, float]],
    main_runs: list[AttackRun],
) -> dict[str, dict[str, object]]:
    """Every rule on every set-up (``--quick``: the main one and the closest to the paper);
    the main set-up's JSMA runs are the main table's."""
    reuse = {RULES[0][0]: main_runs[1], RULES[3][0]: main_runs[0]}
    chosen = [SETUPS[0], SETUPS[-1]] if ctx.quick else SETUPS
    out: dict[str, dict[str, object]] = {}
    for name, architecture, strokes in chosen:
        x_test, y_test = load_digits_tensors(28, "test", strokes=strokes)
        if (architecture, strokes) == ("cnn", "smooth"):
            model, _, _, acc = main["smooth"]
        else:
            model = digits_classifier(28, seed=ctx.seed, architecture=architecture, strokes=strokes)
            acc = accuracy(model, x_test, y_test)
        xa, _, dst = all_other_targets(x_test[:n_images], y_test[:n_images])
        runs: dict[str, AttackRun] = {}
        for rule, variant, outputs in RULES:
            if (architecture, strokes) == ("cnn", "smooth") and rule in reuse:
                runs[rule] = reuse[rule]
                continue
            attack = SaliencyMapAttack(variant=variant, outputs=outputs, max_perturbation=UPSILON)
            runs[rule] = run_ours(
                f"{name}: {rule}", model, xa, dst, attack, progress=ctx.progress, epsilons=CURVE
            )
        out[name] = {
            "accuracy": acc,
            "mean_intensity": float(x_test.mean()),
            "zero_fraction": float((x_test == 0).float().mean()),
            "runs": runs,
        }
    return out


def _write_setups(report: Report, setups: dict[str, dict[str, object]]) -> None:
    """The set-ups that separate data, network and fallback; the variants beside JSMA."""
    runs = {name: _runs(setup) for name, setup in setups.items()}
    report.section("Why the paper's rule falls short here: data, network or fallback")
    report.text(
        "Three candidates could explain why the paper's rule (JSMA on logits) falls short of "
        "the paper's figure on the main set-up: the data (our digits are upsampled from 8x8, "
        "so they are blurry and fill the frame, with few pixels at exactly 0), the network "
        "(not the paper's LeNet), or the largest-alpha fallback. Sharp digits are the "
        "MNIST-like stand-in: each digit upsampled to a 20x20 box centred on a zero "
        "background, as MNIST lays its digits out, with values in [0.4, 0.7] stretched to "
        "[0, 1], so most pixels are exactly 0 and the strokes' cores saturate (MNIST's mean "
        f"intensity is {MNIST_MEAN}). LeNet is the paper's network as the variants paper's code "
        "defines it (two 5x5 convolutions of 20 and 50 maps, each followed by a ReLU and "
        "max-pooled, 500 ReLU units, 10 outputs: the Caffe LeNet's sizes), trained like our "
        "CNN."
    )
    report.table(
        ["set-up", "test accuracy", "mean intensity", "pixels at 0"],
        [
            [
                name,
                f"{cast(float, s['accuracy']):.2%}",
                f"{cast(float, s['mean_intensity']):.3f}",
                f"{cast(float, s['zero_fraction']):.1%}",
            ]
            for name, s in setups.items()
        ],
    )
    rows = [
        [
            "paper: LeNet, MNIST",
            RULES[0][0],
            f"{PAPER['success_rate']:.2%}",
            f"{PAPER['mean_l0_fraction']:.2%}",
            "-",
        ]
    ]
    for name, by_rule in runs.items():
        for rule, run in by_rule.items():
            rows.append([name, rule, f"{run.success_rate:.2%}", f"{run.mean_l0:.2%}", _share(run)])
    report.table(
        ["set-up", "rule", "success", "mean L0 (successful)", "fallback steps (samples)"], rows
    )
    paper_rule = RULES[0][0]
    share = max(r[paper_rule].fallback_share for r in runs.values())
    names = list(runs)
    closest = runs.get(CLOSEST, runs[names[-1]])[paper_rule]
    main = runs[names[0]][paper_rule]
    reproduced = (
        closest.success_rate >= PAPER["success_rate"] - 0.02
        and closest.mean_l0 <= PAPER["mean_l0_fraction"] + 0.01
    )
    findings = [
        f"The fallback: it chose at most {share:.1%} of the paper's rule's steps on any "
        "set-up, so it explains none of the gap.",
    ]
    if len(runs) == len(SETUPS):
        data = np.mean(
            [
                runs[s][paper_rule].success_rate - runs[m][paper_rule].success_rate
                for m, s in ((SETUPS[0][0], SETUPS[1][0]), (SETUPS[2][0], SETUPS[3][0]))
            ]
        )
        network = np.mean(
            [
                runs[lenet][paper_rule].success_rate - runs[cnn][paper_rule].success_rate
                for cnn, lenet in ((SETUPS[0][0], SETUPS[2][0]), (SETUPS[1][0], SETUPS[3][0]))
            ]
        )
        weighted = np.mean([r["WJSMA"].success_rate - r[paper_rule].success_rate
                            for r in runs.values()])  # fmt: skip
        findings.append(
            "Averaged over the other factor, sharp data changes the paper's rule's success by "
            f"{data * 100:+.1f} points and LeNet by {network * 100:+.1f} points; weighting "
            "the other classes by their probabilities (WJSMA) changes it by "
            f"{weighted * 100:+.1f} points on the same models."
        )
    findings.append(
        f"Where the set-up is closest to the paper's ({CLOSEST}) the paper's rule reaches "
        f"{closest.success_rate:.2%} at {closest.mean_l0:.2%} mean L0 (main set-up: "
        f"{main.success_rate:.2%} at {main.mean_l0:.2%}) against the paper's "
        f"{PAPER['success_rate']:.2%} at {PAPER['mean_l0_fraction']:.2%}: it "
        + ("reproduces the paper's figure." if reproduced else "does **not** reproduce it.")
    )
    report.text("\n".join(f"- {f}" for f in findings))
    report.section("The probabilistic variants: WJSMA and TJSMA")
    best = runs.get(CLOSEST, runs[names[-1]])
    report.text(
        "Loison, Combey and Hajri (2020, https://arxiv.org/abs/2007.06032) weight the other "
        "classes' logit derivatives by their softmax probabilities (WJSMA) and also each "
        "feature's derivatives by the change a step makes to it, 1 - x for theta = +1 "
        "(TJSMA); `SaliencyMapAttack(variant=...)`. Their set-up is the paper's (LeNet on "
        "MNIST, theta = +1, every other class as target; their code counts an attack "
        "successful within 114 changed pixels, about 14.5%); their tables were not "
        "available to this project offline, so the comparison is their claim, that both "
        "variants succeed more often with fewer changed features than JSMA, checked on the "
        f"same models. On {CLOSEST}: JSMA (logits) "
        f"{best[paper_rule].success_rate:.2%} at {best[paper_rule].mean_l0:.2%}, WJSMA "
        f"{best['WJSMA'].success_rate:.2%} at {best['WJSMA'].mean_l0:.2%}, TJSMA "
        f"{best['TJSMA'].success_rate:.2%} at {best['TJSMA'].mean_l0:.2%} (table above)."
    )
    curves = []
    for rule, run in best.items():
        assert run.curve is not None and run.epsilons is not None
        curves.append((rule, np.array(run.epsilons) / 784, run.curve.mean(1)))
    fig = _success_curves(
        curves,
        "paper (MNIST, JSMA): success at its mean L0",
        "L0 budget epsilon (% of the 784 features)",
    )
    report.figure(
        fig,
        "robustness_curve",
        f"Robustness curves on {CLOSEST}: each line is one call per batch with "
        f"epsilons={CURVE[:3]}...{CURVE[-1]} (foolbox's convention, each budget judged on "
        "its own).",
    )


def _write_many(report: Report, faithful: list[AttackRun], many: list[AttackRun]) -> None:
    """``pairs_per_step`` against the paper's one pair per derivative (full budget only)."""
    if not many:
        return
    report.section(f"Several pairs per derivative (pairs_per_step={PAIRS_PER_STEP})")
    report.table(
        ["attack", "success", "mean L0 (successful)", "images/s", "speed-up"],
        [
            [
                r.name,
                f"{r.success_rate:.2%}",
                f"{r.mean_l0:.2%}",
                f"{r.images_per_second:.1f}",
                f"{r.images_per_second / f.images_per_second:.2f}x" if r is not f else "1x",
            ]
            for f, m in zip(faithful, many, strict=True)
            for r in (f, m)
        ],
    )
    report.text(
        "The opt-in mode for large inputs changes up to that many disjoint pairs per forward "
        "derivative; on 784 features it trades a few changed features for speed. Images/s "
        "on this machine, one process; the 3x224x224 rows are in `paperports bench jsma`."
    )


def _success_curves(
    curves: list[tuple[str, np.ndarray, np.ndarray]], paper_label: str, xlabel: str
) -> Figure:
    """Success rate against the L0 budget, one line per ``(label, budgets, success)``
    (fractions), with the paper's success at its mean L0 as a star."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for label, budgets, success in curves:
        ax.plot(budgets * 100, success * 100, label=label)
    ax.scatter(
        [PAPER["mean_l0_fraction"] * 100],
        [PAPER["success_rate"] * 100],
        marker="*",
        s=120,
        color="black",
        zorder=5,
        label=paper_label,
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("success rate (%)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def _share(run: AttackRun) -> str:
    """The fallback's share of steps (and of samples), or "-" for ART."""
    if np.isnan(run.fallback_share):
        return "-"
    return f"{run.fallback_share:.1%} ({run.fallback_samples:.1%})"


def _per_pair(values: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    out = np.full((10, 10), np.nan)
    for s in range(10):
        for t in range(10):
            rows = (src == s) & (dst == t)
            if rows.any():
                out[s, t] = values[rows].mean()
    return out


def _heatmap(matrix: np.ndarray, title: str, fmt: str = "{:.2f}") -> Figure:
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    im = ax.imshow(matrix, cmap="viridis")
    ax.set_xlabel("target class t")
    ax.set_ylabel("source class s")
    ax.set_xticks(range(10))
    ax.set_yticks(range(10))
    for s in range(10):
        for t in range(10):
            if not np.isnan(matrix[s, t]):
                ax.text(
                    t,
                    s,
                    fmt.format(matrix[s, t]),
                    ha="center",
                    va="center",
                    fontsize=5.5,
                    color="white" if matrix[s, t] < np.nanmean(matrix) else "black",
                )
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.046)
    return fig


def _grid(run: AttackRun, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> Figure:
    """Row s, column t: the first image of class s attacked towards t (diagonal: original)."""
    fig, axes = plt.subplots(10, 10, figsize=(7.5, 7.5))
    for s in range(10):
        for t in range(10):
            ax = axes[s, t]
            ax.set_xticks([])
            ax.set_yticks([])
            if s == t:
                idx = torch.nonzero(src == s).flatten()
                img = x[idx[0]] if len(idx) else None
            else:
                idx = torch.nonzero((src == s) & (dst == t)).flatten()
                img = run.adversarial[idx[0]] if len(idx) else None
                if len(idx) and not run.success[int(idx[0])]:
                    for spine in ax.spines.values():
                        spine.set_color("red")
            if img is not None:
                ax.imshow(img[0].numpy(), cmap="gray", vmin=0, vmax=1)
            if s == 0:
                ax.set_title(str(t), fontsize=8)
            if t == 0:
                ax.set_ylabel(str(s), fontsize=8)
    fig.suptitle("rows: source class; columns: target (diagonal: original; red: failed)")
    return fig


def _write(
    report: Report,
    ctx: RunContext,
    acc: float,
    acc8: float,
    n_images: int,
    runs: list[AttackRun],
    art: AttackRun,
    runs8: list[AttackRun],
    art8: AttackRun,
    distance: Mapping[str, np.ndarray],
    hardness: np.ndarray,
    success_matrix: np.ndarray,
    default: AttackRun,
    xa: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
) -> None:
    budget = "quick (20 images per size)" if ctx.quick else "full (all 360 held-out images)"
    report.text(
        "The paper attacked a LeNet on MNIST (784 features) towards every other class with "
        "theta = +1 and a maximum distortion of Upsilon = 14.5%. The stand-in here is "
        "scikit-learn's 8x8 digits upsampled to 28x28 (784 features, values in [0, 1]) and a "
        f"small CNN trained on 80% of them. Budget: {budget}; seed {ctx.seed}."
    )
    report.section("Setup")
    report.table(
        ["", "ours", "paper"],
        [
            ["classifier test accuracy (28x28)", f"{acc:.2%}", "a LeNet on MNIST"],
            ["classifier test accuracy (raw 8x8)", f"{acc8:.2%}", "-"],
            ["images attacked x targets", f"{n_images} x 9 = {len(default.success)}", "MNIST x 9"],
            ["theta, Upsilon", "+1, 14.5% (56 pair steps)", "+1, 14.5%"],
        ],
    )
    report.section("Success and distortion (28x28)")
    budget28 = np.floor(784 * UPSILON) / 784
    rows = [
        [
            "paper (pairs, logits), MNIST",
            f"{PAPER['success_rate']:.2%}",
            "-",
            f"{PAPER['mean_l0_fraction']:.2%}",
            "-",
        ]
    ]
    for r in [*runs, art]:
        within = float(r.success_within(np.array([budget28]))[0])
        rows.append(
            [
                r.name,
                f"{r.success_rate:.2%}",
                f"{within:.2%}",
                f"{r.mean_l0:.2%}",
                _share(r),
                f"{r.images_per_second:.1f}",
            ]
        )
    report.table(
        [
            "attack",
            "success",
            "success within budget",
            "mean L0 (successful)",
            "fallback steps (samples)",
            "images/s",
        ],
        rows,
    )
    report.text(
        "Fallback: where no pair (feature) in the search domain meets the paper's rule "
        "(alpha > 0 and beta < 0), our attack takes the one with the largest alpha, as ART "
        "does; the paper's algorithm would stop the sample there. The column gives the share "
        "of all steps the fallback chose, and in brackets the share of samples where it chose "
        "at least one (`SaliencyMapAttack(fallback=False)` keeps the paper's rule alone)."
    )
    over = float((art.l0_fraction > np.floor(784 * UPSILON) / 784 + 1e-9).mean())
    report.results["art_over_budget_fraction"] = over
    report.text(
        f"ART checks its budget after a step, so {over:.1%} of its results change more than "
        f"floor(784 x 14.5%) = {int(np.floor(784 * UPSILON))} features (ours never do)."
    )
    report.text(
        "Mean L0 is the fraction of the 784 features changed, averaged over the successful "
        "samples, as the paper reports it. Images/s on this machine, one process "
        f"({torch.get_num_threads()} threads); `paperports bench jsma` gives controlled ratios."
    )

    d_prob = float(np.nanmean(distance["probabilities"]))
    d_logit = float(np.nanmean(distance["logits"]))
    report.section("Why differentiating the probabilities works better here")
    report.text(
        "The paper's rule needs beta = sum over the other classes' derivatives < 0. On logits "
        "that sum weighs all nine other classes equally, including classes that are far from "
        "winning, so features that would raise the target but also raise some irrelevant "
        "class are excluded, and the score rewards pushing down classes that do not matter. "
        "On softmax probabilities the other classes' derivatives sum to exactly minus the "
        "target's, so the rule becomes 'raise the target's probability most', and "
        "d p_t = p_t (d z_t - sum_j p_j d z_j) weighs each competitor by how likely it "
        "currently is. The paper's adversarial distance A(X, t) (the fraction of features "
        "with zero saliency) measures the first effect directly: averaged over all "
        f"source/target pairs it is {d_logit:.3f} with logits and {d_prob:.3f} with "
        "probabilities, i.e. the logit rule leaves "
        f"{1 - d_logit:.1%} of the features usable against {1 - d_prob:.1%}. "
        'The default is therefore `outputs="probabilities"`; `outputs="logits"` gives '
        "the paper's rule exactly."
    )
    report.section("Raw 8x8 digits (64 features: 14.5% allows 4 pair steps)")
    budget8 = np.floor(64 * UPSILON) / 64
    report.table(
        ["attack", "success", "success within budget", "mean L0 (successful)", "fallback steps"],
        [
            [
                r.name,
                f"{r.success_rate:.2%}",
                f"{float(r.success_within(np.array([budget8]))[0]):.2%}",
                f"{r.mean_l0:.2%}",
                _share(r),
            ]
            for r in [*runs8, art8]
        ],
    )
    report.text(
        f"The budget is floor(64 x 14.5%) = {int(np.floor(64 * UPSILON))} features; ART's "
        "check after the step lets it change one pair more, which is where its extra "
        "success on 8x8 comes from (compare the within-budget column)."
    )
    budgets = np.linspace(0.0, UPSILON, 30)
    fig = _success_curves(
        [(r.name, budgets, r.success_within(budgets)) for r in [*runs, art]],
        f"paper (MNIST): {PAPER['success_rate']:.2%} at {PAPER['mean_l0_fraction']:.2%} mean",
        "maximum distortion Upsilon (% of features)",
    )
    report.figure(
        fig,
        "success_vs_budget",
        "Success rate against the distortion budget "
        "(from each run at 14.5%; the greedy attack is the same up to any budget).",
    )
    report.section("Hardness and adversarial distance")
    report.figure(
        _heatmap(success_matrix, "success rate, pairs/probabilities"),
        "success",
        "Success rate per source/target pair (default attack).",
    )
    report.figure(
        _heatmap(hardness, "hardness H(s, t)", "{:.3f}"),
        "hardness",
        "Hardness: normalised area under the mean-distortion curve over "
        "Upsilon in [1%, 14.5%] (higher is harder), from the default attack.",
    )
    report.figure(
        _heatmap(distance["probabilities"], "adversarial distance A(X, t)"),
        "adversarial_distance",
        "Mean adversarial distance per source/target "
        "pair on the clean images (probabilities; higher is harder).",
    )
    report.figure(
        _grid(default, xa, src, dst),
        "grid",
        "Original and adversarial images for every source/target pair.",
    )
    report.section("Reading these numbers")
    best = runs[0]
    report.text(
        f"The default pair attack reaches {best.success_rate:.1%} success at "
        f"{best.mean_l0:.2%} mean distortion against the paper's "
        f"{PAPER['success_rate']:.2%} at {PAPER['mean_l0_fraction']:.2%} on MNIST. "
        f"The paper's rule (logits) reaches {runs[1].success_rate:.1%} at "
        f"{runs[1].mean_l0:.2%} here, the fallback choosing {_share(runs[1])} of its steps: "
        "on this model it does not reproduce the paper's figure. ART's simplified rule "
        "reaches "
        f"{art.success_rate:.1%} at {art.mean_l0:.2%}. The digits are a smaller, blurrier "
        "stand-in for MNIST (upsampled from 8x8), and our CNN is not the paper's LeNet, so "
        "the figures are comparable in kind, not in decimals."
    )
    paper = f"{PAPER['success_rate']:.2%} at {PAPER['mean_l0_fraction']:.2%} (MNIST)"
    for claim, run in (
        ("success at mean L0, default attack", runs[0]),
        ("success at mean L0, the paper's rule", runs[1]),
    ):
        report.finding(claim, f"{run.success_rate:.2%} at {run.mean_l0:.2%}", paper)
    report.results |= {
        "paper": PAPER,
        "classifier_accuracy_28": acc,
        "classifier_accuracy_8": acc8,
        "images": n_images,
        "runs_28": {r.name: r.summary() for r in [*runs, art]},
        "runs_8": {r.name: r.summary() for r in [*runs8, art8]},
        "mean_adversarial_distance": {"probabilities": d_prob, "logits": d_logit},
        "hardness": hardness.tolist(),
        "success_matrix": success_matrix.tolist(),
    }
