"""The attack is written in eagerpy: the same network in JAX gives the same adversarials."""

from __future__ import annotations

from typing import Any

import foolbox as fb
import numpy as np
import pytest
import torch

from paperports.integrations.foolbox import SaliencyMapAttack, adversarial_distance

jax = pytest.importorskip("jax")  # installed with paperports[test]
jnp = jax.numpy


def _jax_twin(model: torch.nn.Module) -> Any:
    """The digits CNN (conv-relu-pool x2, linear-relu-linear) in jax.lax, same weights."""
    w = {k: jnp.asarray(v.numpy()) for k, v in model.state_dict().items()}

    def conv(h: Any, k: str) -> Any:
        out = jax.lax.conv_general_dilated(
            h, w[f"{k}.weight"], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return out + w[f"{k}.bias"][None, :, None, None]

    def pool(h: Any) -> Any:
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def forward(x: Any) -> Any:
        h = pool(jax.nn.relu(conv(x, "features.0")))
        h = pool(jax.nn.relu(conv(h, "features.3"))).reshape(x.shape[0], -1)
        h = jax.nn.relu(h @ w["classifier.1.weight"].T + w["classifier.1.bias"])
        return h @ w["classifier.3.weight"].T + w["classifier.3.bias"]

    return forward


@pytest.fixture(scope="module")
def x64() -> Any:
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


# both rules, both outputs and the variants (their stop-gradient is JAX's own), in three
# runs (JAX compiles every op for each new batch shape)
@pytest.mark.parametrize(
    ("pairwise", "outputs", "variant"),
    [(True, "probabilities", "jsma"), (False, "logits", "jsma"), (True, "logits", "tjsma")],
)
def test_jax_model_gives_the_same_adversarials_as_torch(
    digits8: Any, x64: None, pairwise: bool, outputs: str, variant: str
) -> None:
    model, x, y = digits8
    x, t = x[:3], (y[:3] + 1) % 10
    twin = _jax_twin(model)
    xj, tj = jnp.asarray(x.numpy()), jnp.asarray(t.numpy())
    np.testing.assert_allclose(np.asarray(twin(xj)), model(x).detach().numpy(), atol=1e-9)

    attack = SaliencyMapAttack(
        pairwise=pairwise,
        outputs=outputs,  # type: ignore[arg-type]
        variant=variant,  # type: ignore[arg-type]
        max_perturbation=0.4,
    )
    crit_t = fb.criteria.TargetedMisclassification(t)
    crit_j = fb.criteria.TargetedMisclassification(tj)
    adv_t, _, ok_t = attack(
        fb.PyTorchModel(model, bounds=(0, 1), device="cpu"), x, crit_t, epsilons=None
    )
    adv_j, _, ok_j = attack(fb.JAXModel(twin, bounds=(0, 1)), xj, crit_j, epsilons=None)
    assert isinstance(adv_j, jax.Array)
    np.testing.assert_array_equal(np.asarray(adv_j), adv_t.numpy())
    np.testing.assert_array_equal(np.asarray(ok_j), ok_t.numpy())
    assert ok_t.any() and (adv_t != x).any()


def test_jax_adversarial_distance_matches_torch(digits8: Any, x64: None) -> None:
    model, x, y = digits8
    t = (y + 3) % 10
    a_t = adversarial_distance(fb.PyTorchModel(model, bounds=(0, 1), device="cpu"), x, t)
    twin = fb.JAXModel(_jax_twin(model), bounds=(0, 1))
    a_j = adversarial_distance(twin, jnp.asarray(x.numpy()), jnp.asarray(t.numpy()))
    np.testing.assert_allclose(np.asarray(a_j), a_t.numpy())
