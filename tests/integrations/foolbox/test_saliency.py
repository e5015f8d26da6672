"""The forward derivative, the saliency map and the pair search against direct computations."""

from __future__ import annotations

import eagerpy as ep
import pytest
import torch
from torch.autograd.functional import jacobian

from paperports.experiments.jsma.reference import dense_pair
from paperports.integrations.foolbox import saliency
from paperports.integrations.foolbox.saliency import (
    _compact,
    _front,
    best_aligned_pairs,
    best_features,
    best_pairs,
    forward_derivative,
    saliency_map,
    target_gradients,
)

from .conftest import TinyNet, fmodel


def _direct_jacobian(model: TinyNet, x: torch.Tensor, outputs: str) -> torch.Tensor:
    def f(xi: torch.Tensor) -> torch.Tensor:
        z = model(xi[None])[0]
        return z.softmax(-1) if outputs == "probabilities" else z

    return torch.stack([jacobian(f, xi) for xi in x])  # (N, K, n)


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
def test_forward_derivative_is_the_jacobian(tiny: TinyNet, outputs: str) -> None:
    x = torch.rand(5, 6, dtype=torch.float64)
    ours = forward_derivative(fmodel(tiny), x, outputs=outputs)
    assert ours.shape == (5, 4, 6)
    torch.testing.assert_close(ours, _direct_jacobian(tiny, x, outputs))


@pytest.mark.parametrize("outputs", ["logits", "probabilities"])
@pytest.mark.parametrize("increase", [True, False])
def test_saliency_map_matches_per_class_computation(
    tiny: TinyNet, outputs: str, increase: bool
) -> None:
    x = torch.rand(5, 6, dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 3, 0])
    jac = _direct_jacobian(tiny, x, outputs)
    rows = torch.arange(5)
    a = jac[rows, t]
    b = jac.sum(1) - a  # sum over the other classes, one class at a time
    if not increase:
        a, b = -a, -b
    expected = torch.where((a >= 0) & (b <= 0), a * b.abs(), torch.zeros_like(a))
    ours = saliency_map(fmodel(tiny), x, t, increase=increase, outputs=outputs)
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=1e-9)
    assert (ours > 0).any(), "a degenerate map would make this test vacuous"


def test_probability_gradients_of_the_others_are_minus_the_targets(tiny: TinyNet) -> None:
    x = torch.rand(3, 6, dtype=torch.float64)
    t = torch.tensor([1, 2, 3])
    a, b = target_gradients(fmodel(tiny), x, t, outputs="probabilities")
    jac = _direct_jacobian(tiny, x, "probabilities")
    torch.testing.assert_close(b, jac.sum(1) - jac[torch.arange(3), t], atol=1e-12, rtol=0)
    torch.testing.assert_close(a, -b)


def _random_case(seed: int, n_rows: int, n: int, integer: bool):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    if integer:  # many exact ties
        a = torch.randint(-3, 4, (n_rows, n), generator=g).double()
        b = torch.randint(-3, 4, (n_rows, n), generator=g).double()
    else:
        a = torch.randn(n_rows, n, generator=g, dtype=torch.float64)
        b = torch.randn(n_rows, n, generator=g, dtype=torch.float64) + 0.3
    domain = torch.rand(n_rows, n, generator=g) < 0.8
    return a, b, domain


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("chunk_size", [1, 37, 1 << 22])
def test_pair_search_equals_dense_brute_force(seed: int, chunk_size: int) -> None:
    n = [2, 3, 9, 40, 120, 300, 400][seed % 7]
    a, b, domain = _random_case(seed, 7, n, integer=seed % 2 == 0)
    p, q, found = best_pairs(
        ep.astensor(a), ep.astensor(b), ep.astensor(domain), chunk_size=chunk_size
    )
    rp, rq, rfound = dense_pair(a, b, domain)
    assert torch.equal(found.raw, rfound)
    assert torch.equal(p.raw[rfound], rp[rfound]) and torch.equal(q.raw[rfound], rq[rfound])


@pytest.mark.parametrize("seed", range(6))
def test_pair_search_filtering_from_a_sample_of_the_features_stays_exact(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large inputs draw the front filter's leading features from every k-th feature (k
    about n / 4,096); any leading set keeps the filter valid. Here k is 18 to 62."""
    monkeypatch.setattr(saliency, "LEAD_SAMPLE", 16)
    n = [300, 1000][seed % 2]
    a, b, domain = _random_case(seed, 7, n, integer=seed % 3 == 0)
    values, at = saliency._leads(ep.astensor(a))
    assert torch.equal(a.gather(1, at.raw), values.raw)  # the leading features themselves
    assert bool((at.raw % (n // 16) == 0).all())  # drawn from every (n // 16)-th feature
    p, q, found = best_pairs(ep.astensor(a), ep.astensor(b), ep.astensor(domain))
    rp, rq, rfound = dense_pair(a, b, domain)
    assert torch.equal(found.raw, rfound)
    assert torch.equal(p.raw[rfound], rp[rfound]) and torch.equal(q.raw[rfound], rq[rfound])


@pytest.mark.parametrize("seed", range(8))
def test_pair_search_with_b_equal_to_minus_a_equals_dense_brute_force(seed: int) -> None:
    """Softmax probabilities give b = -a exactly: the two largest a, ties by index."""
    a, _, domain = _random_case(seed, 6, [2, 5, 40, 300][seed % 4], integer=seed % 2 == 0)
    rp, rq, rfound = dense_pair(a, -a, domain)
    for p, q, found in (
        best_pairs(ep.astensor(a), ep.astensor(-a), ep.astensor(domain)),
        best_aligned_pairs(ep.astensor(a), ep.astensor(domain)),
    ):
        assert torch.equal(found.raw, rfound)
        assert torch.equal(p.raw[rfound], rp[rfound]) and torch.equal(q.raw[rfound], rq[rfound])


@pytest.mark.parametrize("seed", range(6))
def test_pair_search_over_a_large_front_equals_dense_brute_force(seed: int) -> None:
    """Past tie_candidates features on the front, the bound-ordered search takes over."""
    a, b, domain = _random_case(seed, 5, 200, integer=False)
    b = -a + 1e-3 * b  # nearly aligned: a long front
    p, q, found = best_pairs(ep.astensor(a), ep.astensor(b), ep.astensor(domain), tie_candidates=2)
    rp, rq, rfound = dense_pair(a, b, domain)
    assert torch.equal(found.raw, rfound)
    assert torch.equal(p.raw[rfound], rp[rfound]) and torch.equal(q.raw[rfound], rq[rfound])


def _in(module: str, t: torch.Tensor) -> ep.Tensor:
    """``t`` as an eagerpy tensor of ``module`` ("torch", "numpy" or "jax"); NumPy's shares
    ``t``'s memory."""
    if module == "numpy":
        return ep.astensor(t.numpy())
    if module == "jax":
        return ep.astensor(pytest.importorskip("jax").numpy.asarray(t.numpy()))
    return ep.astensor(t)


@pytest.mark.parametrize("module", ["torch", "numpy", "jax"])
def test_the_front_holds_the_best_pair_and_is_small(module: str) -> None:
    """The features at most one other dominates: a few dozen of 3,000 gradients, the same
    in every framework (the running maximum is each framework's own; NumPy's top-k is ours,
    since eagerpy's is not one and what it returns depends on the machine's CPU)."""
    a, b, domain = _random_case(5, 4, 3_000, integer=False)
    a_, b_, d_ = (_in(module, t) for t in (a, b, domain))
    idx, member = _front(a_, -b_, d_)
    members = torch.as_tensor(ep.where(member, idx, -1 * ep.ones_like(idx)).numpy())
    assert 0 < (members >= 0).sum(1).max() < 60
    rp, rq, rfound = dense_pair(a, b, domain)
    assert rfound.all()
    for row in range(4):
        assert {int(rp[row]), int(rq[row])} <= set(members[row].tolist())
    p, q, _ = best_pairs(a_, b_, d_)
    assert torch.equal(torch.as_tensor(p.numpy()), rp)
    assert torch.equal(torch.as_tensor(q.numpy()), rq)


@pytest.mark.parametrize("module", ["torch", "jax"])
def test_compacting_keeps_each_rows_entries_first_and_in_order(module: str) -> None:
    """Each row's kept entries, first and in order; in JAX the width is a power of two
    (padded with entries not kept), so the shapes that JAX compiles for recur."""
    keep = torch.zeros(3, 40, dtype=torch.bool)
    keep[0, [3, 17, 30]] = True
    keep[1, [0, 1, 2, 5, 39]] = True
    idx = torch.arange(40).repeat(3, 1) * 10
    out, kept = _compact(_in(module, idx), _in(module, keep))
    out, kept = torch.as_tensor(out.numpy()), torch.as_tensor(kept.numpy())
    assert out.shape[1] == (8 if module == "jax" else 5)
    assert kept.sum(1).tolist() == [3, 5, 0]
    assert out[0, :3].tolist() == [30, 170, 300]
    assert out[1, :5].tolist() == [0, 10, 20, 50, 390]
    assert not kept[:, 5:].any() and kept[1, :5].all() and kept[0, :3].all()
    # never wider than the input: six of six kept stay six, not eight
    full = torch.ones(2, 6, dtype=torch.bool)
    assert _compact(_in(module, torch.arange(6).repeat(2, 1)), _in(module, full))[0].shape == (2, 6)


def test_pair_search_finds_pairs_away_from_the_largest_gradients() -> None:
    # the features with the largest u have v << 0: the best pair is two middling features
    a = torch.tensor([[5.0, 5.0, 1.0, 1.0, 0.1]], dtype=torch.float64)
    b = torch.tensor([[9.0, 9.0, -1.0, -1.0, 0.0]], dtype=torch.float64)
    domain = torch.ones(1, 5, dtype=torch.bool)
    p, q, found = best_pairs(ep.astensor(a), ep.astensor(b), ep.astensor(domain))
    assert bool(found.raw[0]) and (int(p.raw[0]), int(q.raw[0])) == (2, 3)


def test_pair_search_reports_when_no_pair_is_valid() -> None:
    a = torch.ones(2, 10, dtype=torch.float64)
    b = torch.ones(2, 10, dtype=torch.float64)  # beta > 0 for every pair
    _, _, found = best_pairs(ep.astensor(a), ep.astensor(b), ep.astensor(torch.ones(2, 10).bool()))
    assert not found.raw.any()


@pytest.mark.parametrize("seed", range(6))
def test_single_feature_choice_is_the_saliency_argmax(seed: int) -> None:
    a, b, domain = _random_case(seed, 5, 50, integer=False)
    p, found = best_features(ep.astensor(a), ep.astensor(b), ep.astensor(domain))
    s = torch.where(domain & (a > 0) & (b < 0), a * -b, torch.full_like(a, -1.0))
    assert torch.equal(found.raw, (s > -1).any(1))
    assert torch.equal(p.raw[found.raw], s.argmax(1)[found.raw])


@pytest.mark.parametrize("framework", ["torch", "numpy", "jax"])
def test_scatter_rows_writes_each_rows_values_at_its_indices(framework: str) -> None:
    import numpy as np

    from paperports.integrations.foolbox.saliency import scatter_rows

    full = np.zeros((3, 5), dtype=np.float32)
    idx = np.array([[0, 2], [1, 1], [4, 3]])
    values = np.array([[1, 2], [3, 3], [5, 6]], dtype=np.float32)
    out = scatter_rows(*(_in(framework, torch.as_tensor(t)) for t in (full, idx, values)))
    expected = np.array([[1, 0, 2, 0, 0], [0, 3, 0, 0, 0], [0, 0, 0, 6, 5]], dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(out.numpy()), expected)
    np.testing.assert_array_equal(full, 0)  # the input is left as it was
