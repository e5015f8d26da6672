"""SaliencyMapAttack: the paper's algorithm, foolbox's conventions, and clear errors."""

from __future__ import annotations

import math

import eagerpy as ep
import foolbox as fb
import pytest
import torch
from torch import nn

from paperports.experiments.jsma.reference import dense_jsma
from paperports.integrations.foolbox import JSMA, SaliencyMapAttack

from .conftest import fmodel, other_targets

Targeted = fb.criteria.TargetedMisclassification


def _l0(x: torch.Tensor, xp: torch.Tensor) -> torch.Tensor:
    return (x != xp).flatten(1).sum(1)


def test_alias_and_distance() -> None:
    assert JSMA is SaliencyMapAttack
    assert SaliencyMapAttack.distance is fb.distances.l0
    assert isinstance(SaliencyMapAttack(), fb.attacks.base.MinimizationAttack)


@pytest.mark.parametrize("fallback", [False, True])
def test_equals_the_dense_reference_step_for_step(digits8, fallback: bool) -> None:  # type: ignore[no-untyped-def]
    """The reference builds the full Jacobian and the dense pair matrix; without the
    fallback it is the paper's rule alone, which the attack must follow exactly."""
    model, x, y = digits8
    t = other_targets(y)
    attack = SaliencyMapAttack(outputs="logits", max_perturbation=0.4, fallback=fallback)
    ours, _, _ = attack(fmodel(model), x, Targeted(t), epsilons=None)
    ref = dense_jsma(model, x, t, outputs="logits", max_perturbation=0.4, fallback=fallback)
    assert torch.equal(ours, ref)
    assert (_l0(x, ours) > 0).sum() > 20, "the attack must have moved most images"
    stats = attack.last_statistics
    assert stats is not None and stats.steps.shape == (len(x),)
    assert (stats.steps * 2 >= _l0(x, ours).numpy()).all()  # a pair step changes <= 2
    if not fallback:
        assert stats.fallback_steps.sum() == 0


@pytest.mark.parametrize(
    ("variant", "theta", "fallback"),
    [
        ("wjsma", 1.0, False),
        ("wjsma", 1.0, True),
        ("tjsma", 1.0, False),
        ("tjsma", 0.5, True),
        ("tjsma", -1.0, True),
    ],
)
def test_variants_equal_the_dense_reference_step_for_step(  # type: ignore[no-untyped-def]
    digits8, variant: str, theta: float, fallback: bool
) -> None:
    """WJSMA and TJSMA against the reference that builds the full Jacobian and weights its
    rows by the probabilities (and its columns by each feature's step) explicitly."""
    model, x, y = digits8
    t = other_targets(y)
    attack = SaliencyMapAttack(
        variant=variant,  # type: ignore[arg-type]
        theta=theta,
        max_perturbation=0.4,
        fallback=fallback,
    )
    assert attack.outputs == "logits"
    ours, _, _ = attack(fmodel(model), x, Targeted(t), epsilons=None)
    ref = dense_jsma(
        model, x, t, theta=theta, max_perturbation=0.4, fallback=fallback, variant=variant
    )
    assert torch.equal(ours, ref)
    assert (_l0(x, ours) > 0).sum() > 20, "the attack must have moved most images"


def test_the_variants_choose_other_pairs_than_jsma(digits8) -> None:  # type: ignore[no-untyped-def]
    """The weights matter: on the same inputs the three rules take different paths."""
    model, x, y = digits8
    t = other_targets(y)
    runs = {
        v: SaliencyMapAttack(variant=v, outputs="logits", max_perturbation=0.4)(  # type: ignore[arg-type]
            fmodel(model), x, Targeted(t), epsilons=None
        )[0]
        for v in ("jsma", "wjsma", "tjsma")
    }
    for one, other in [("jsma", "wjsma"), ("jsma", "tjsma"), ("wjsma", "tjsma")]:
        differ = (runs[one] != runs[other]).flatten(1).any(1)
        assert differ.sum() >= 5, (one, other)


def test_weighted_gradients_are_the_probability_weighted_jacobian(tiny) -> None:  # type: ignore[no-untyped-def]
    import eagerpy as ep

    from paperports.integrations.foolbox import forward_derivative
    from paperports.integrations.foolbox.saliency import outputs_and_gradients

    x = torch.rand(5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    t = torch.tensor([0, 1, 2, 3, 1])
    fm = fmodel(tiny, bounds=(-1.0, 2.0))
    _, _, a, b = outputs_and_gradients(fm, ep.astensor(x), lambda z: ep.astensor(t), "logits",
                                       weighted=True)  # fmt: skip
    jac = forward_derivative(fm, x, outputs="logits")  # (N, K, n)
    p = tiny(x).softmax(-1).detach()
    p[torch.arange(5), t] = 0.0
    torch.testing.assert_close(a.raw, jac[torch.arange(5), t])
    torch.testing.assert_close(b.raw, (p[:, :, None] * jac).sum(1))
    with pytest.raises(ValueError, match="weighted=True"):
        outputs_and_gradients(fm, ep.astensor(x), lambda z: ep.astensor(t), "probabilities",
                              weighted=True)  # fmt: skip


def test_the_fallback_fires_only_where_no_strict_pair_exists(digits8) -> None:  # type: ignore[no-untyped-def]
    """Where the paper's rule finds a pair at every step, both modes take the same steps;
    the statistics count the fallback's steps."""
    model, x, y = digits8
    t = other_targets(y)
    strict = SaliencyMapAttack(outputs="logits", max_perturbation=0.4, fallback=False)
    loose = SaliencyMapAttack(outputs="logits", max_perturbation=0.4)
    a, _, _ = strict(fmodel(model), x, Targeted(t), epsilons=None)
    b, _, _ = loose(fmodel(model), x, Targeted(t), epsilons=None)
    assert loose.last_statistics is not None and strict.last_statistics is not None
    never = loose.last_statistics.fallback_steps == 0
    assert never.any()
    assert torch.equal(a[torch.as_tensor(never)], b[torch.as_tensor(never)])


@pytest.mark.parametrize("pairwise", [True, False])
@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
def test_batch_equals_one_by_one(digits8, pairwise: bool, outputs: str) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    x, t = x[:8], other_targets(y[:8])
    attack = SaliencyMapAttack(pairwise=pairwise, outputs=outputs, max_perturbation=0.3)
    batch, _, succ = attack(fmodel(model), x, Targeted(t), epsilons=None)
    for i in range(len(x)):
        one, _, s1 = attack(fmodel(model), x[i : i + 1], Targeted(t[i : i + 1]), epsilons=None)
        assert torch.equal(one[0], batch[i])
        assert bool(s1[0]) == bool(succ[i])


def test_targeted_success_means_the_target_is_predicted(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    t = other_targets(y, seed=1)
    adv, _, succ = SaliencyMapAttack(max_perturbation=0.4)(
        fmodel(model), x, Targeted(t), epsilons=None
    )
    pred = model(adv).argmax(1)
    assert torch.equal(succ, pred == t)
    assert succ.float().mean() > 0.7


def test_untargeted_moves_away_from_the_label(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    clean = model(x).argmax(1) == y
    adv, _, succ = SaliencyMapAttack(max_perturbation=0.3)(
        fmodel(model), x[clean], y[clean], epsilons=None
    )
    assert torch.equal(succ, model(adv).argmax(1) != y[clean])
    assert succ.float().mean() > 0.9
    # any other class will do, so it is easier than aiming at a given one: as often a
    # success, and no image needs more features than the targeted attack on it
    targeted, _, targeted_succ = SaliencyMapAttack(max_perturbation=0.3)(
        fmodel(model), x[clean], Targeted(other_targets(y[clean])), epsilons=None
    )
    assert succ.float().mean() >= targeted_succ.float().mean()
    assert (_l0(x[clean], adv) <= _l0(x[clean], targeted)).all()


def test_already_at_target_is_success_with_zero_distortion(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, _ = digits8
    pred = model(x).argmax(1)
    adv, _, succ = SaliencyMapAttack()(fmodel(model), x, Targeted(pred), epsilons=None)
    assert succ.all() and torch.equal(adv, x)


@pytest.mark.parametrize("pairwise", [True, False])
def test_budget_caps_the_fraction_of_features_changed(digits8, pairwise: bool) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    t = other_targets(y, seed=2)
    upsilon = 0.1
    adv, _, _ = SaliencyMapAttack(max_perturbation=upsilon, pairwise=pairwise)(
        fmodel(model), x, Targeted(t), epsilons=None
    )
    assert _l0(x, adv).max() <= math.floor(64 * upsilon)
    assert SaliencyMapAttack(max_perturbation=0.145).max_steps(784) == 56  # the paper's MNIST


def test_each_epsilon_is_judged_on_its_own_as_a_run_with_that_budget(digits8) -> None:  # type: ignore[no-untyped-def]
    """epsilons=[5, 20] once gave both rows the 5-feature result; [5, None] raised."""
    model, x, y = digits8
    t = Targeted(other_targets(y, seed=3))
    attack = SaliencyMapAttack(max_perturbation=0.5)
    fm = fmodel(model)
    raws, clipped, succ = attack(fm, x, t, epsilons=[4, 10, None])
    assert succ.shape == (3, len(x)) and len(raws) == len(clipped) == 3
    for k, eps in enumerate([4, 10]):
        _, alone_clipped, alone_succ = attack(fm, x, t, epsilons=eps)
        assert torch.equal(clipped[k], alone_clipped) and torch.equal(succ[k], alone_succ)
        assert _l0(x, clipped[k]).max() <= eps
    unbounded = attack(fm, x, t, epsilons=None)
    assert torch.equal(clipped[2], unbounded[1]) and torch.equal(succ[2], unbounded[2])
    assert all(torch.equal(r, unbounded[0]) for r in raws)  # raw: the longest run, as foolbox's
    assert (succ[1] >= succ[0]).all() and (succ[2] >= succ[1]).all()
    assert succ[1].sum() > succ[0].sum()  # a larger budget wins more here
    # the same budget as a fraction of the 64 features: 10 / 64 < 0.16
    _, frac_clipped, frac_succ = attack(fm, x, t, epsilons=[0.16])
    assert torch.equal(frac_clipped[0], clipped[1]) and torch.equal(frac_succ[0], succ[1])


@pytest.mark.parametrize(
    ("epsilons", "error", "match"),
    [
        ([5, 0.1], ValueError, "mix counts of features and fractions"),
        ([-1], ValueError, "must be >= 0"),
        ([float("nan")], ValueError, "must be >= 0"),
        (1.0, ValueError, "1.0 is ambiguous"),
        ([2.5], ValueError, "whole count of features or a fraction"),
        (["5"], TypeError, "must be None, a count of features or a fraction"),
    ],
)
def test_ambiguous_or_impossible_epsilons_are_refused(  # type: ignore[no-untyped-def]
    digits8, epsilons: object, error: type, match: str
) -> None:
    model, x, y = digits8
    with pytest.raises(error, match=match):
        SaliencyMapAttack()(fmodel(model), x[:2], Targeted(other_targets(y[:2])), epsilons=epsilons)


def _same_layout(ours: object, theirs: object) -> None:
    for a, b in zip(ours, theirs, strict=True):  # type: ignore[call-overload]
        assert type(a) is type(b)
        if isinstance(a, list):
            assert [e.shape for e in a] == [e.shape for e in b]
        else:
            assert a.shape == b.shape and a.dtype == b.dtype


def test_results_have_the_layout_of_foolboxs_own_l0_attack(digits8) -> None:  # type: ignore[no-untyped-def]
    """foolbox's own L0 attack (``PointwiseAttack``, a ``MinimizationAttack``) on the same
    call gives the same layout. For finite epsilons foolbox's L0 attacks cannot be run (its
    L0 distance cannot reduce a perturbation to a budget), where ours judges each epsilon
    as a run with that budget, in the layout ``MinimizationAttack`` gives (which _NoInit,
    never perturbing, lets foolbox build for any epsilon). (foolbox's other L0 attack,
    Brendel-Bethge, shares that layout: it is built by the same base class, and costs its
    numba compilation, about 40 s, to show it.)"""
    model, x, y = digits8
    x, labels = x[:3], fb.criteria.Misclassification(y[:3])
    fm = fmodel(model)
    pointwise = fb.attacks.PointwiseAttack()
    for epsilons in (None, [None], [None, None]):
        ours = SaliencyMapAttack(steps=3)(fm, x, labels, epsilons=epsilons)
        _same_layout(ours, pointwise(fm, x, labels, epsilons=epsilons))
    with pytest.raises(NotImplementedError, match="reducing L0 norms"):
        fb.distances.l0.clip_perturbation(ep.astensor(x), ep.astensor(1.0 - x), 8.0)
    for epsilons in ([2, 8, None], [5], 8):
        ours = SaliencyMapAttack(steps=3)(fm, x, labels, epsilons=epsilons)
        _same_layout(ours, _NoInit()(fm, x, labels, epsilons=epsilons))


class _NoInit(fb.attacks.base.MinimizationAttack):
    """An initialisation that returns the inputs: enough for foolbox to build its results."""

    distance = fb.distances.l0

    def run(self, model, inputs, criterion, *, early_stop=None, **kwargs):  # type: ignore[no-untyped-def]
        return inputs


def test_features_stay_in_bounds_and_move_only_in_thetas_direction() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3)).double().eval()
    x = torch.rand(6, 1, 4, 4, dtype=torch.float64) * 2 - 1
    fm = fmodel(model, bounds=(-1.0, 1.0))
    y = model(x).argmax(1)
    for theta in (0.3, -0.3):
        adv, _, _ = SaliencyMapAttack(theta=theta, max_perturbation=0.5)(fm, x, y, epsilons=None)
        d = adv - x
        assert adv.min() >= -1 and adv.max() <= 1
        assert ((d >= 0) if theta > 0 else (d <= 0)).all()
        assert (d != 0).any()


class MeanModel(nn.Module):
    """foolbox's test model: the class scores are the per-channel means."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


def test_no_strict_pair_falls_back_to_the_largest_alpha() -> None:
    # every feature raises exactly one class: beta >= 0 everywhere, no strict pair exists
    x = torch.full((2, 3, 4, 4), 0.5)
    x[:, 0] = 0.6  # class 0 predicted; class 1 needs a few features raised
    adv, _, succ = SaliencyMapAttack(max_perturbation=0.5)(
        fmodel(MeanModel().eval()), x, Targeted(torch.tensor([1, 1])), epsilons=None
    )
    assert succ.all()
    changed = adv != x
    assert changed[:, 1].any() and not changed[:, [0, 2]].any()  # only the target's channel


def test_large_inputs_need_no_pair_matrix() -> None:
    # 3x224x224 = 150,528 features: a dense pair matrix would be ~84 GiB per image
    x = torch.full((1, 3, 224, 224), 0.5)
    x[:, 0] = 0.5001
    attack = SaliencyMapAttack(steps=3)
    adv, _, _ = attack(fmodel(MeanModel().eval()), x, Targeted(torch.tensor([2])), epsilons=None)
    assert _l0(x, adv).item() == 6


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"theta": 0}, "theta"),
        ({"theta": 1.5}, "theta"),
        ({"max_perturbation": 0.0}, "max_perturbation"),
        ({"max_perturbation": 1.2}, "max_perturbation"),
        ({"steps": 0}, "steps"),
        ({"outputs": "softmax"}, "outputs"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"variant": "ejsma"}, "variant"),
        ({"variant": "wjsma", "outputs": "probabilities"}, "variant='wjsma'.*outputs='logits'"),
        ({"variant": "tjsma", "outputs": "probabilities"}, "variant='tjsma'"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SaliencyMapAttack(**kwargs)  # type: ignore[arg-type]


def test_inputs_outside_the_bounds_are_rejected(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    with pytest.raises(ValueError, match=r"within the model's bounds \[0.0, 1.0\]"):
        SaliencyMapAttack()(fmodel(model), x * 2, y, epsilons=None)


def test_bad_criteria_are_rejected(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    fm = fmodel(model)
    with pytest.raises(ValueError, match="unsupported criterion"):
        both = fb.criteria.Misclassification(y) & Targeted(other_targets(y))
        SaliencyMapAttack()(fm, x, both, epsilons=None)
    with pytest.raises(ValueError, match="shape"):
        SaliencyMapAttack()(fm, x, Targeted(y[:3]), epsilons=None)
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        SaliencyMapAttack()(fm, x, Targeted(torch.full_like(y, 10)), epsilons=None)


def test_models_that_do_not_return_class_scores_are_rejected() -> None:
    model = nn.Flatten().eval()  # returns (N, 16): fine; (N,) is not
    squeezed = nn.Sequential(nn.Flatten(), nn.Linear(16, 1), nn.Flatten(0)).eval()
    x = torch.rand(4, 1, 4, 4)
    SaliencyMapAttack(steps=1)(fmodel(model), x, torch.zeros(4, dtype=torch.long), epsilons=None)
    with pytest.raises(ValueError, match="batch of class scores"):
        SaliencyMapAttack()(fmodel(squeezed), x, torch.zeros(4, dtype=torch.long), epsilons=None)


def test_reaches_the_papers_regime_on_the_digits_mnist_stand_in(digits28) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits28
    x, y = x[:48], y[:48]
    t = other_targets(y, seed=4)
    adv, _, succ = SaliencyMapAttack()(fmodel(model), x, Targeted(t), epsilons=None)
    l0 = _l0(x, adv).float() / 784
    assert succ.float().mean() >= 0.85  # the paper: 97.1% on MNIST
    assert l0[succ].mean() <= 0.08  # the paper: 4.02% of the features
    assert l0.max() <= 0.145


@pytest.mark.parametrize("pairwise", [True, False])
def test_far_targets_do_not_underflow_in_float32(digits8, pairwise: bool) -> None:  # type: ignore[no-untyped-def]
    # logits x 40: target probabilities ~1e-30, so dp_t products underflow float32 to 0;
    # the attack must still choose what it chooses in float64
    model64, x, y = digits8
    sharp64 = nn.Sequential(model64, _Scale(40.0)).eval()
    sharp32 = nn.Sequential(type(model64)(8).float().eval(), _Scale(40.0))
    sharp32[0].load_state_dict({k: v.float() for k, v in model64.state_dict().items()})
    t = other_targets(y, seed=5)
    attack = SaliencyMapAttack(pairwise=pairwise, max_perturbation=0.3)
    adv64, _, _ = attack(fmodel(sharp64), x, Targeted(t), epsilons=None)
    adv32, _, _ = attack(fmodel(sharp32.eval()), x.float(), Targeted(t), epsilons=None)
    same = ((adv64.float() != x.float()) == (adv32 != x.float())).flatten(1).all(1)
    assert same.float().mean() >= 0.9


class _Scale(nn.Module):
    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = c

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.c


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_infinite_inputs_are_refused_with_a_message(digits8, bad: float) -> None:  # type: ignore[no-untyped-def]
    """NaN passed our bounds check and failed at foolbox's bare assert, with no message."""
    model, x, y = digits8
    x = x.clone()
    x[1, 0, 2, 2] = bad
    with pytest.raises(ValueError, match="inputs hold NaN or infinite values"):
        SaliencyMapAttack()(fmodel(model), x, Targeted(other_targets(y)), epsilons=None)


def test_inputs_of_another_dtype_than_the_model_are_refused(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8  # a float64 model
    with pytest.raises(TypeError, match=r"could not run on the inputs \(.*dtype torch.float32\)"):
        SaliencyMapAttack()(fmodel(model), x.float(), Targeted(other_targets(y)), epsilons=None)


def test_an_empty_batch_gives_empty_results(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    raw, _, success = SaliencyMapAttack()(fmodel(model), x[:0], Targeted(y[:0]), epsilons=None)
    assert raw.shape == x[:0].shape and success.shape == (0,)


class _Counting(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.inner(x)  # type: ignore[no-any-return]


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_pairs_per_step_takes_the_papers_next_k_pairs_of_one_derivative(
    k: int, outputs: str
) -> None:
    """A linear model's logits have one derivative everywhere, so k pairs per derivative
    are the paper's pairs; success is checked once per derivative, so an input runs on to
    the next multiple of k (within the budget), and the model runs about k times less."""
    torch.manual_seed(1)
    linear = nn.Sequential(nn.Flatten(), nn.Linear(36, 4)).double().eval()
    x = torch.rand(12, 1, 6, 6, dtype=torch.float64) * 0.9
    t = Targeted((linear(x).argmax(1) + 1) % 4)
    paper = SaliencyMapAttack(outputs="logits", max_perturbation=0.6)
    counted = _Counting(linear)
    many = SaliencyMapAttack(outputs="logits", max_perturbation=0.6, pairs_per_step=k)
    adv_p, _, ok_p = paper(fmodel(linear), x, t, epsilons=None)
    adv_k, _, ok_k = many(fmodel(counted), x, t, epsilons=None)
    assert paper.last_statistics is not None and many.last_statistics is not None
    s_p, s_k = paper.last_statistics.steps, many.last_statistics.steps
    cap = paper.max_steps(36)
    expected = [
        min(cap, -(-s // k) * k) if ok else s for s, ok in zip(s_p, ok_p.tolist(), strict=True)
    ]
    assert s_k.tolist() == expected and ok_p.any()
    assert torch.equal(ok_k, ok_p)
    assert ((adv_k != x) | (adv_p == x)).all()  # every feature the paper changed, and more
    # the first look at the classes, a derivative per k pairs and one that finds the
    # inputs done, and foolbox's final check
    assert counted.calls <= 1 + (max(s_k) // k + 1) + 1
    if outputs == "probabilities":  # the largest-a path: its own derivative, still k pairs
        prob = SaliencyMapAttack(outputs="probabilities", max_perturbation=0.6)
        prob_k = SaliencyMapAttack(outputs="probabilities", max_perturbation=0.6, pairs_per_step=k)
        _, _, ok1 = prob(fmodel(linear), x, t, epsilons=None)
        _, _, okk = prob_k(fmodel(linear), x, t, epsilons=None)
        assert prob_k.last_statistics is not None
        assert okk.sum() >= ok1.sum() - 1


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
def test_pairs_per_step_judges_each_epsilon_as_its_own_run(digits8, outputs: str) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    t = Targeted(other_targets(y[:16], seed=4))
    attack = SaliencyMapAttack(max_perturbation=0.5, pairs_per_step=4, outputs=outputs)  # type: ignore[arg-type]
    fm = fmodel(model)
    _, clipped, succ = attack(fm, x[:16], t, epsilons=[3, 7, 12, None])
    for k, eps in enumerate([3, 7, 12]):
        _, alone, alone_succ = attack(fm, x[:16], t, epsilons=eps)
        assert torch.equal(clipped[k], alone) and torch.equal(succ[k], alone_succ)
        assert _l0(x[:16], clipped[k]).max() <= eps
    assert succ[2].sum() > succ[0].sum()


def test_pairs_per_step_one_is_the_papers_attack(digits8) -> None:  # type: ignore[no-untyped-def]
    model, x, y = digits8
    t = Targeted(other_targets(y[:10]))
    a = SaliencyMapAttack()(fmodel(model), x[:10], t, epsilons=None)
    b = SaliencyMapAttack(pairs_per_step=1)(fmodel(model), x[:10], t, epsilons=None)
    assert torch.equal(a[0], b[0]) and torch.equal(a[2], b[2])


def test_pairs_per_step_changes_the_largest_a_two_by_two_on_foolboxs_mean_model() -> None:
    """With probabilities (or where only the fallback applies), the pairs of a step are the
    largest a two by two: one top-k per derivative."""
    torch.manual_seed(0)
    x = torch.rand(3, 3, 8, 8, dtype=torch.float64) * 0.8
    fm = fmodel(MeanModel())
    y = MeanModel()(x).argmax(1)
    for outputs in ("probabilities", "logits"):
        one = SaliencyMapAttack(outputs=outputs, max_perturbation=0.5)  # type: ignore[arg-type]
        many = SaliencyMapAttack(outputs=outputs, max_perturbation=0.5, pairs_per_step=6)  # type: ignore[arg-type]
        _, adv1, ok1 = one(fm, x, y, epsilons=None)
        _, advk, okk = many(fm, x, y, epsilons=None)
        assert torch.equal(ok1, okk) and ok1.all()
        assert many.last_statistics is not None and one.last_statistics is not None
        s1, sk = one.last_statistics.steps, many.last_statistics.steps
        assert ((sk >= s1) & (sk < s1 + 6)).all()
        # the same channel, raised to the bound: the runner-up's
        d1, dk = (adv1 != x).flatten(2).sum(2), (advk != x).flatten(2).sum(2)
        assert torch.equal(d1 > 0, dk > 0)
        if outputs == "logits":
            assert (many.last_statistics.fallback_steps == sk).all()


class _Colour(nn.Module):
    """A small CNN on 3-channel images."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.net = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5)
        ).double()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]


class _Grey(nn.Module):
    """The colour model on grey images: the one channel repeated on all three."""

    def __init__(self, colour: nn.Module) -> None:
        super().__init__()
        self.colour = colour

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.colour(y.expand(-1, 3, -1, -1))  # type: ignore[no-any-return]


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
@pytest.mark.parametrize("pairs_per_step", [1, 3])
def test_per_pixel_is_the_attack_on_pixels(outputs: str, pairs_per_step: int) -> None:
    """On a grey image in a colour model, a pixel's a and b are the sums over its channels,
    exactly the attack on the grey image through a model that repeats it on three channels;
    every channel of a chosen pixel changes, and the L0 counts features (3 per pixel)."""
    colour = _Colour().eval()
    y = torch.rand(6, 1, 6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = y.expand(-1, 3, -1, -1).clone()
    with torch.no_grad():
        target = Targeted(colour(x).argsort(1)[:, -2])  # the runner-up
    kwargs = dict(outputs=outputs, max_perturbation=0.6, pairs_per_step=pairs_per_step)
    pixel = SaliencyMapAttack(per_pixel=True, **kwargs)  # type: ignore[arg-type]
    grey = SaliencyMapAttack(**kwargs)  # type: ignore[arg-type]
    adv_c, _, ok_c = pixel(fmodel(colour), x, target, epsilons=None)
    adv_g, _, ok_g = grey(fmodel(_Grey(colour).eval()), y, target, epsilons=None)
    assert torch.equal(ok_c, ok_g) and ok_c.any()
    assert torch.equal(adv_c, adv_g.expand(-1, 3, -1, -1))
    assert pixel.last_statistics is not None and grey.last_statistics is not None
    assert (pixel.last_statistics.steps == grey.last_statistics.steps).all()
    assert torch.equal(_l0(x, adv_c), 3 * _l0(y, adv_g))
    # each epsilon, in features, is a run with that budget
    _, clipped, succ = pixel(fmodel(colour), x, target, epsilons=[6, 12, None])
    for k, eps in enumerate([6, 12]):
        _, alone, alone_succ = pixel(fmodel(colour), x, target, epsilons=eps)
        assert torch.equal(clipped[k], alone) and torch.equal(succ[k], alone_succ)
        assert _l0(x, clipped[k]).max() <= eps


def test_per_pixel_reads_the_channel_axis_from_the_data_format() -> None:
    import eagerpy as ep

    from paperports.integrations.foolbox.saliency_map_attack import _features, _pixels

    x = torch.arange(2 * 3 * 4).reshape(2, 3, 4)  # channels first: (N, C, P)
    first = _pixels(ep.astensor(x.reshape(2, -1)), 3, last=False).raw
    assert torch.equal(first, x.sum(1))
    last = _pixels(ep.astensor(x.transpose(1, 2).reshape(2, -1)), 3, last=True).raw
    assert torch.equal(last, x.sum(1))
    back = _features(ep.astensor(first), 3, last=False).raw.reshape(2, 3, 4)
    assert torch.equal(back, first[:, None, :].expand(-1, 3, -1))
    back = _features(ep.astensor(first), 3, last=True).raw.reshape(2, 4, 3)
    assert torch.equal(back, first[:, :, None].expand(-1, -1, 3))


def test_per_pixel_needs_a_channel_axis() -> None:
    model = nn.Sequential(nn.Linear(16, 3)).double().eval()
    x = torch.rand(4, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match="per_pixel=True needs inputs with a channel axis"):
        SaliencyMapAttack(per_pixel=True)(fmodel(model), x, model(x).argmax(1), epsilons=None)
    with pytest.raises(TypeError, match="per_pixel"):
        SaliencyMapAttack(per_pixel="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
@pytest.mark.parametrize("per_pixel", [False, True])
def test_a_channels_last_batch_is_attacked_channels_last(outputs: str, per_pixel: bool) -> None:
    """foolbox's `samples` and many image pipelines give channels-last batches, on which
    convolutions run other (often faster) kernels: the model sees the caller's layout at
    every step, and the result keeps it, with the values of the attack on the default
    layout."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)
    ).double()
    x = torch.rand(4, 3, 8, 8, dtype=torch.float64)
    last = x.contiguous(memory_format=torch.channels_last)
    assert not last.is_contiguous()
    seen: list[bool] = []
    model.register_forward_pre_hook(
        lambda _, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last))
    )
    with torch.no_grad():
        target = Targeted(model(x).argsort(1)[:, 1])
    attack = SaliencyMapAttack(outputs=outputs, per_pixel=per_pixel, max_perturbation=0.3)
    adv, clipped, ok = attack(fmodel(model.eval()), x, target, epsilons=[20])
    seen.clear()
    adv_last, clipped_last, ok_last = attack(fmodel(model), last, target, epsilons=[20])
    assert seen and all(seen)  # every forward pass, on the caller's layout
    assert adv_last[0].is_contiguous(memory_format=torch.channels_last)
    assert clipped_last[0].is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(adv_last[0], adv[0]) and torch.equal(clipped_last[0], clipped[0])
    assert torch.equal(ok_last, ok) and bool((adv[0] != x).any())
