"""A straightforward JSMA, kept as the reference for tests and benchmarks.

Plain torch, written to be obviously the paper's Algorithm: the full Jacobian with one
backward pass per class, and all ``n x n`` feature pairs materialised at every step. It is
slow and its memory grows with ``n^2``; :class:`~paperports.integrations.foolbox.SaliencyMapAttack`
must choose the same pairs.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["dense_jsma", "dense_pair"]


def jacobian(model: nn.Module, x: torch.Tensor, outputs: str) -> torch.Tensor:
    """``(N, K, n)``: one backward pass per class."""
    x = x.detach().requires_grad_(True)
    f = model(x)
    if outputs == "probabilities":
        f = f.softmax(-1)
    rows = []
    for j in range(f.shape[1]):
        (g,) = torch.autograd.grad(f[:, j].sum(), x, retain_graph=True)
        rows.append(g.flatten(1))
    return torch.stack(rows, dim=1)


def dense_pair(
    a: torch.Tensor, b: torch.Tensor, domain: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The paper's pair rule over the dense ``(N, n, n)`` matrix; first maximum row-major."""
    n = a.shape[1]
    alpha = a[:, :, None] + a[:, None, :]
    beta = b[:, :, None] + b[:, None, :]
    upper = torch.ones(n, n, dtype=torch.bool, device=a.device).triu(1)
    valid = domain[:, :, None] & domain[:, None, :] & upper & (alpha > 0) & (beta < 0)
    score = torch.where(valid, alpha * -beta, torch.full_like(alpha, -math.inf))
    flat = score.flatten(1).argmax(-1)
    found = valid.flatten(1).any(-1)
    return flat // n, flat % n, found


@torch.no_grad()
def dense_jsma(
    model: nn.Module,
    x: torch.Tensor,
    targets: torch.Tensor,
    *,
    theta: float = 1.0,
    max_perturbation: float = 0.145,
    outputs: str = "logits",
    bounds: tuple[float, float] = (0.0, 1.0),
    fallback: bool = False,
    variant: str = "jsma",
) -> torch.Tensor:
    """The targeted pair attack of the paper, one step at a time; returns adversarial inputs.

    The paper's rule: an input whose domain holds no pair with alpha > 0 and beta < 0
    stops. With ``fallback=True`` it takes the pair with the largest alpha instead (ART's
    simplification), as ``SaliencyMapAttack``'s default does.

    ``variant="wjsma"`` (logits): the other classes' rows of the Jacobian weighted by their
    softmax probabilities; ``"tjsma"``: also every column times the change a step makes to
    that feature (``1 - x`` for theta = 1 on [0, 1]).
    """
    lo, hi = bounds
    shape = x.shape
    x0 = x.flatten(1)
    xs = x0.clone()
    n = xs.shape[1]
    sign = 1.0 if theta > 0 else -1.0
    domain = xs < hi if sign > 0 else xs > lo
    active = torch.ones(len(xs), dtype=torch.bool)
    rows = torch.arange(len(xs))
    budget = math.floor(n * max_perturbation)
    for _ in range(math.floor(n * max_perturbation / 2)):
        pred = model(xs.view(shape)).argmax(-1)
        room = (xs != x0).sum(-1) + 2 <= budget
        active &= (pred != targets) & room
        if not active.any():
            break
        with torch.enable_grad():
            jac = jacobian(model, xs.view(shape), outputs)
        a = jac[rows, targets]
        if variant == "jsma":
            b = jac.sum(1) - a
        else:
            p = model(xs.view(shape)).softmax(-1)
            p[rows, targets] = 0.0
            b = (p[:, :, None] * jac).sum(1)
        if variant == "tjsma":
            reach = hi - xs if sign > 0 else xs - lo
            step = reach.clamp(max=abs(theta) * (hi - lo))
            a, b = a * step, b * step
        a, b = sign * a, sign * b
        p, q, found = dense_pair(a, b, domain)
        # fallback: the largest alpha > 0 over the domain (ART's rule)
        am = torch.where(domain, a, torch.full_like(a, -math.inf))
        top, top_idx = am.topk(2, dim=-1)
        ok = found | (top.sum(-1) > 0) if fallback else found
        p = torch.where(found, p, top_idx[:, 0])
        q = torch.where(found, q, top_idx[:, 1])
        for i in torch.nonzero(active & ok).flatten().tolist():
            for f in (p[i], q[i]):
                xs[i, f] = (xs[i, f] + theta * (hi - lo)).clamp(lo, hi)
                if (sign > 0 and xs[i, f] >= hi) or (sign < 0 and xs[i, f] <= lo):
                    domain[i, f] = False
        active &= ok
    return xs.view(shape)
