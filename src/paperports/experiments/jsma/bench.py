"""``paperports bench jsma``: throughput, success and L0 against ART and the dense reference,
and the cost of a pair step on 3x224x224 inputs against its floor.

64 targeted images of the 28x28 digits, same model, same thread count, one process. Times
are medians of repeated runs; ratios are ours / anchor. Large inputs: foolbox's 8 ImageNet
samples and a small random CNN (two strided 5x5 convolutions, 16 and 32 channels, pooled
to 4x4, a linear layer to 10 classes), targeted at each image's least likely class so that
every input takes every step; the floor is one forward and one backward pass of the model
for the outputs the rule needs, on the same batch. Colour: foolbox's 20 CIFAR-10 samples,
each towards the 9 classes other than the prediction of a random CNN (the digits' CNN on
three channels: two 3x3 convolutions with 16 and 32 channels, each with max pooling, 100
hidden units, 10 classes); peak memory of each attack in a fresh process.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable

import eagerpy as ep
import foolbox as fb
import torch
from torch import nn

from paperports.adapters.digits import DigitsCNN, digits_classifier, load_digits_tensors
from paperports.benchmarking import (
    BenchResult,
    BenchRow,
    median_time,
    paired_median_times,
    peak_memory_mb,
)
from paperports.experiments.jsma.common import AttackRun, all_other_targets, run_art, run_ours
from paperports.experiments.jsma.reference import dense_jsma
from paperports.integrations.foolbox import SaliencyMapAttack
from paperports.integrations.foolbox.saliency import (
    DEFAULT_CHUNK_SIZE,
    Outputs,
    best_pairs,
    outputs_and_gradients,
)
from paperports.registry import RunContext

N_IMAGES = 64
REPEATS = 3
LARGE_STEPS = 20
MANY = 8  # pairs_per_step of the large-input mode
FIXTURE_PAIRS = 64  # ... on foolbox's test fixture, as our copy of its attack tests runs it


def _median_run(make: object, repeats: int = REPEATS) -> AttackRun:
    runs = [make() for _ in range(repeats)]  # type: ignore[operator]
    return sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]  # type: ignore[no-any-return]


def bench(ctx: RunContext) -> BenchResult:
    model = digits_classifier(28, seed=ctx.seed)
    x, y = load_digits_tensors(28, "test")
    x, y = x[:N_IMAGES], y[:N_IMAGES]
    g = torch.Generator().manual_seed(ctx.seed)
    t = (y + 1 + torch.randint(0, 9, y.shape, generator=g)) % 10

    run_art(model, x[:8], t[:8])  # warm-up (imports, allocator)
    art = _median_run(lambda: run_art(model, x, t))
    rows: list[BenchRow] = []
    ours: dict[str, AttackRun] = {}
    for name, pairwise, outputs, goal in [
        (
            "pairs, probabilities (default)",
            True,
            "probabilities",
            ">= 1.0 (and success/L0 >= ART's)",
        ),
        ("pairs, logits (paper)", True, "logits", "-"),
        ("single, probabilities", False, "probabilities", ">= 3.0"),
        ("single, logits", False, "logits", "-"),
    ]:
        attack = SaliencyMapAttack(pairwise=pairwise, outputs=outputs)  # type: ignore[arg-type]
        run = _median_run(lambda a=attack, n=name: run_ours(n, model, x, t, a))
        ours[name] = run
        rows.append(
            BenchRow(
                f"throughput vs ART: {name}",
                run.images_per_second,
                art.images_per_second,
                "images/s",
                goal,
                higher_is_better=True,
                extra=run.against(art),
            )
        )
        ctx.log(
            f"  {name}: {run.images_per_second:.1f} img/s, success {run.success_rate:.1%}, "
            f"L0 {run.mean_l0:.2%}  (ART {art.images_per_second:.1f} img/s, "
            f"{art.success_rate:.1%}, {art.mean_l0:.2%})"
        )

    # the dense reference: one backward pass per class, all n^2 pairs every step
    start = time.perf_counter()
    ref = dense_jsma(model, x, t, outputs="logits")
    ref_sec = time.perf_counter() - start
    paper = ours["pairs, logits (paper)"]
    same = (ref == paper.adversarial).flatten(1).all(1).float().mean().item()
    n = x[0].numel()
    rows.append(
        BenchRow(
            "throughput vs dense reference: pairs, logits",
            paper.images_per_second,
            N_IMAGES / ref_sec,
            "images/s",
            ">= 5.0",
            higher_is_better=True,
            extra={
                "same_adversarials": same,
                "dense_pair_entries_per_step": N_IMAGES * n * n,
                "ours_max_pair_entries_per_block": DEFAULT_CHUNK_SIZE,
            },
        )
    )
    ctx.log(
        f"  dense reference: {N_IMAGES / ref_sec:.2f} img/s; identical adversarials: {same:.1%}"
    )
    rows += _many_pairs_on_digits(ctx, model, x, t, ours["pairs, probabilities (default)"])
    rows += _colour(ctx)
    rows += _chunk_memory(ctx)
    rows += _large_inputs(ctx)
    rows.append(_foolbox_fixture(ctx))
    return BenchResult("jsma", "ART SaliencyMapMethod and a dense pair search", rows)


def _many_pairs_on_digits(
    ctx: RunContext, model: nn.Module, x: torch.Tensor, t: torch.Tensor, paper: AttackRun
) -> list[BenchRow]:
    """The large-input mode where the paper's mode is cheap: what it costs in success and L0."""
    attack = SaliencyMapAttack(pairs_per_step=MANY)
    name = f"pairs_per_step={MANY}"
    run = _median_run(lambda: run_ours(name, model, x, t, attack))
    ctx.log(
        f"  digits, {name}: {run.images_per_second:.1f} img/s, success {run.success_rate:.1%}, "
        f"L0 {run.mean_l0:.2%} (every step: {paper.success_rate:.1%}, {paper.mean_l0:.2%})"
    )
    return [
        BenchRow(
            f"throughput vs every step a derivative: {name}, 28x28 digits",
            run.images_per_second,
            paper.images_per_second,
            "images/s",
            "-",
            higher_is_better=True,
            extra={
                "success": run.success_rate,
                "mean_l0": run.mean_l0,
                "paper_mode_success": paper.success_rate,
                "paper_mode_mean_l0": paper.mean_l0,
            },
        )
    ]


def _cifar(seed: int) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The random colour CNN and the attacks: foolbox's 20 CIFAR-10 samples, each towards
    the 9 classes other than the CNN's prediction."""
    torch.manual_seed(seed)
    model = DigitsCNN(32, channels=3).eval()
    fmodel = fb.PyTorchModel(model, bounds=(0.0, 1.0), device="cpu")
    images, _ = fb.samples(fmodel, dataset="cifar10", batchsize=20)
    with torch.no_grad():
        predicted = model(images).argmax(-1)
    x, _, t = all_other_targets(images, predicted)
    return model, x, t


def _colour_attack(kind: str, seed: int) -> Callable[[], object]:
    """One colour attack over all the CIFAR attacks, for :func:`peak_memory_mb`, after a
    warm-up on one image (imports, allocator, thread pools)."""
    torch.set_num_threads(2)
    model, x, t = _cifar(seed)
    if kind == "art":
        run_art(model, x[:1], t[:1])
        return lambda: run_art(model, x, t)
    attack = SaliencyMapAttack(per_pixel=kind == "per pixel")
    run_ours(kind, model, x[:1], t[:1], attack)
    return lambda: run_ours(kind, model, x, t, attack)


def _colour(ctx: RunContext) -> list[BenchRow]:
    """CIFAR-sized inputs: foolbox's 20 CIFAR-10 samples, each towards the 9 classes other
    than the random CNN's prediction, per value (ours and ART) and per pixel (ours)."""
    model, x, t = _cifar(ctx.seed)
    art = _median_run(lambda: run_art(model, x, t))
    art_mb = peak_memory_mb(_colour_attack, "art", ctx.seed)
    rows = []
    for name, attack in (
        ("per value (default)", SaliencyMapAttack()),
        ("per pixel", SaliencyMapAttack(per_pixel=True)),
    ):
        run = _median_run(lambda a=attack, n=name: run_ours(n, model, x, t, a))
        mb = peak_memory_mb(_colour_attack, "per pixel" if attack.per_pixel else "per value",
                            ctx.seed)  # fmt: skip
        ctx.log(f"  3x32x32, {name}: peak memory {mb:.1f} MB (ART {art_mb:.1f} MB)")
        ctx.log(
            f"  3x32x32, {name}: {run.images_per_second:.1f} img/s, success "
            f"{run.success_rate:.1%}, L0 {run.mean_l0:.2%} (ART {art.images_per_second:.1f} "
            f"img/s, {art.success_rate:.1%}, {art.mean_l0:.2%})"
        )
        rows.append(
            BenchRow(
                f"throughput vs ART, 3x32x32: {name}",
                run.images_per_second,
                art.images_per_second,
                "images/s",
                ">= 1.0 (and success/L0 >= ART's)",
                higher_is_better=True,
                extra={"attacks": len(x), **run.against(art)},
            )
        )
        rows.append(
            BenchRow(
                f"peak memory vs ART, 3x32x32: {name}",
                mb,
                art_mb,
                "MB",
                "report (the pair search's blocks: at most chunk_size entries)",
                extra={
                    "attacks": len(x),
                    "batch": 128,
                    "chunk_size": attack.chunk_size,
                    "chunk_mb": attack.chunk_size * 4 / 2**20,
                },
            )
        )
    return rows


FRONT = 4096
CHUNK_SIZES = (1 << 16, 1 << 18, 1 << 20, DEFAULT_CHUNK_SIZE, 1 << 24)


def _whole_front_search(chunk_size: int, n: int) -> Callable[[], object]:
    """The pair search's worst case for :func:`peak_memory_mb`: two rows of ``n`` features
    that are all on the Pareto front (``v = 1 - u``), so every one of the ``n^2`` pairs is
    scored, in blocks of at most ``chunk_size`` entries."""
    torch.set_num_threads(2)
    u = torch.arange(n, dtype=torch.float32) / n
    a, b = ep.astensor(u[None].repeat(2, 1)), ep.astensor(-(1 - u)[None].repeat(2, 1))
    domain = ep.astensor(torch.ones(2, n, dtype=torch.bool))
    best_pairs(a[:, :64], b[:, :64], domain[:, :64], chunk_size=chunk_size)  # warm-up
    return lambda: best_pairs(a, b, domain, chunk_size=chunk_size)


def _chunk_memory(ctx: RunContext) -> list[BenchRow]:
    """The pair search's peak memory against ``chunk_size`` where it must score every pair
    (see :func:`_whole_front_search`), beside the float32 pair matrix that a dense search
    (cleverhans, advertorch, torchattacks) builds for the same rows."""
    dense_mb = 2 * FRONT * FRONT * 4 / 2**20
    rows = []
    for chunk in CHUNK_SIZES:
        mb = peak_memory_mb(_whole_front_search, chunk, FRONT)
        ctx.log(f"  pair search over a {FRONT}-feature front, chunk_size {chunk}: {mb:.1f} MB")
        power = chunk.bit_length() - 1
        rows.append(
            BenchRow(
                f"pair search peak memory vs the dense pair matrix: chunk_size 2^{power}",
                mb,
                dense_mb,
                "MB",
                "grows with chunk_size, not with n^2",
                extra={
                    "features": FRONT,
                    "rows": 2,
                    "chunk_size": chunk,
                    "bytes_per_chunk_entry": mb * 2**20 / chunk,
                    "default": chunk == DEFAULT_CHUNK_SIZE,
                },
            )
        )
    return rows


class _ChannelMeans(nn.Module):
    """foolbox's test fixture model: the class scores are the three channels' means."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(3).mean(2)


def _foolbox_fixture(ctx: RunContext) -> BenchRow:
    """One untargeted call as foolbox's attack tests make it on their fixture model, with
    the large-input mode and the paper's (one run each: the paper's takes minutes)."""
    fmodel = fb.PyTorchModel(_ChannelMeans().eval(), bounds=(0.0, 1.0), device="cpu")
    x, _ = fb.samples(fmodel, dataset="imagenet", batchsize=8)
    labels = fmodel(x).argmax(-1)
    seconds, success = {}, {}
    for many in (FIXTURE_PAIRS, 1):
        attack = SaliencyMapAttack(pairs_per_step=many)
        start = time.perf_counter()
        _, _, ok = attack(fmodel, x, labels, epsilons=None)
        seconds[many] = time.perf_counter() - start
        success[many] = float(ok.float().mean())
    ctx.log(
        f"  foolbox's fixture model, untargeted: {seconds[FIXTURE_PAIRS]:.1f} s with "
        f"pairs_per_step={FIXTURE_PAIRS}, {seconds[1]:.1f} s with 1"
    )
    return BenchRow(
        f"foolbox's channel-mean fixture, 8 x 3x224x224, untargeted: pairs_per_step="
        f"{FIXTURE_PAIRS} vs 1",
        seconds[FIXTURE_PAIRS],
        seconds[1],
        "s",
        "<= 60 s (ours)",
        higher_is_better=False,
        extra={"success": success[FIXTURE_PAIRS], "paper_mode_success": success[1]},
    )


def _cnn224(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=2),
        nn.ReLU(),
        nn.Conv2d(16, 32, 5, stride=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(512, 10),
    ).eval()


def _derivative_share(attack_once: Callable[[], object]) -> tuple[float, float]:
    """``(the attack's steps, the derivatives among them)``, in seconds, from one profiled
    run: the floor measured inside the same run, so the machine's drift between two
    measurements cannot move the ratio. (The profiler slows the Python-level bookkeeping
    more than the derivative's kernels, so the ratio errs high.)"""
    profile = cProfile.Profile()
    profile.enable()
    attack_once()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    seconds = {name: 0.0 for name in ("_attack", "outputs_and_gradients")}
    for (_, _, name), (_, _, _, cumulative, _) in stats.items():
        if name in seconds:
            seconds[name] += cumulative
    return seconds["_attack"], seconds["outputs_and_gradients"]


def _large_inputs(ctx: RunContext) -> list[BenchRow]:
    model = _cnn224(ctx.seed)
    fmodel = fb.PyTorchModel(model, bounds=(0.0, 1.0), device="cpu")
    x, _ = fb.samples(fmodel, dataset="imagenet", batchsize=8)
    with torch.no_grad():
        far = model(x).argmin(-1)
    criterion = fb.criteria.TargetedMisclassification(far)
    xe, targets = ep.astensor(x), ep.astensor(far)
    rows: list[BenchRow] = []
    per_step: dict[tuple[str, int], float] = {}
    outputs: Outputs
    for outputs in ("probabilities", "logits"):

        def derivative(o: Outputs = outputs) -> object:
            return outputs_and_gradients(fmodel, xe, lambda z: targets, o)

        def derivatives(o: Outputs = outputs) -> object:
            """As many derivatives as the attack takes steps: the floor over the same span
            of time (one ~30 ms call at a time drifts with the machine)."""
            return [derivative(o) for _ in range(LARGE_STEPS)]

        for many in (1, MANY):
            attack = SaliencyMapAttack(outputs=outputs, steps=LARGE_STEPS, pairs_per_step=many)

            def attack_once(a: SaliencyMapAttack = attack) -> object:
                return a(fmodel, x, criterion, epsilons=None)

            if many == 1:  # the step and its floor timed alternately: drift hits both
                sec, floor = paired_median_times(attack_once, derivatives, repeats=REPEATS)
                floor /= LARGE_STEPS
            else:
                sec = median_time(attack_once, repeats=REPEATS, warmup=0)
            assert attack.last_statistics is not None
            pairs = attack.last_statistics.steps
            if int(pairs.min()) != LARGE_STEPS * many:
                ctx.log(f"  warning: an input stopped after {int(pairs.min())} pairs")
            per_step[outputs, many] = sec / float(pairs.mean())
            if many == 1:
                in_run = _derivative_share(attack_once)
        ctx.log(
            f"  3x224x224, {outputs}: {per_step[outputs, 1] * 1e3:.1f} ms per pair step, floor "
            f"{floor * 1e3:.1f} ms; {MANY} pairs per derivative: "
            f"{per_step[outputs, MANY] * 1e3:.1f} ms per pair; in one profiled run the steps "
            f"take {in_run[0] / in_run[1]:.2f}x their derivatives"
        )
        rows.append(
            BenchRow(
                f"3x224x224 pair step vs its floor (forward + backward): {outputs}",
                per_step[outputs, 1],
                floor,
                "s/step",
                "<= 1.5",
                higher_is_better=False,
                extra={"batch": len(x), "features": x[0].numel(), "steps": LARGE_STEPS},
            )
        )
        rows.append(
            BenchRow(
                f"3x224x224 pair step vs its derivative in the same run: {outputs}",
                in_run[0],
                in_run[1],
                "s",
                "<= 1.5",
                higher_is_better=False,
                extra={"steps": LARGE_STEPS, "profiled": "cProfile"},
            )
        )
        rows.append(
            BenchRow(
                f"3x224x224 time per pair, pairs_per_step={MANY} vs 1: {outputs}",
                per_step[outputs, MANY],
                per_step[outputs, 1],
                "s/pair",
                "-",
                higher_is_better=False,
            )
        )
    return rows
