"""The plugins on a CUDA device: the same numbers as on the CPU, from the same weights.

CI has no GPU, so these are skipped there; on a machine with one, ``pytest -m cuda`` runs
them. Each builds a model on the CPU, copies it to the GPU, and compares outputs and
gradients (in float64 where the ecosystem allows it, so that the tolerances stay tight).
``PAPERPORTS_TEST_DEVICE=cpu`` runs the same comparisons CPU against CPU, to check the
tests themselves where there is no GPU.
"""

from __future__ import annotations

import copy
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

DEVICE = torch.device(os.environ.get("PAPERPORTS_TEST_DEVICE", "cuda"))

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        DEVICE.type == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA device"
    ),
]


def _grads(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().cpu() for n, p in module.named_parameters() if p.grad is not None}


def _assert_same_grads(cpu: torch.nn.Module, gpu: torch.nn.Module, **tol: float) -> None:
    expected, got = _grads(cpu), _grads(gpu)
    assert expected and expected.keys() == got.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, **tol, msg=name)


def test_ggnn_and_ggsnn_on_the_gpu() -> None:
    from torch_geometric.data import Batch, Data

    from paperports.integrations.pyg import GGNN, GGSNN

    g = torch.Generator().manual_seed(0)
    graphs = []
    for n in (5, 7, 4):
        edge_index = torch.randint(0, n, (2, 2 * n), generator=g)
        edge_type = torch.randint(0, 3, (2 * n,), generator=g)
        x = torch.rand(n, 2, generator=g, dtype=torch.float64)
        graphs.append(Data(x=x, edge_index=edge_index, edge_type=edge_type))
    batch = Batch.from_data_list(graphs)
    gpu_batch = batch.clone().to(DEVICE)  # PyG's ``to`` moves the batch itself
    torch.manual_seed(0)
    for cpu in (
        GGNN(2, 8, 3, num_edge_types=3, task="graph", out_channels=4).double(),
        GGNN(2, 8, 3, num_edge_types=3, task="node_selection").double(),
    ):
        gpu = copy.deepcopy(cpu).to(DEVICE)
        out_cpu, out_gpu = cpu(batch), gpu(gpu_batch)
        assert out_gpu.device.type == DEVICE.type
        torch.testing.assert_close(out_gpu.cpu(), out_cpu)
        out_cpu.square().sum().backward()
        out_gpu.square().sum().backward()
        _assert_same_grads(cpu, gpu)
    cpu_seq = GGSNN(2, 8, 2, num_edge_types=3, task="node_selection").double()
    gpu_seq = copy.deepcopy(cpu_seq).to(DEVICE)
    outputs_cpu, annotations_cpu = cpu_seq(batch, num_steps=3)
    outputs_gpu, annotations_gpu = gpu_seq(gpu_batch, num_steps=3)
    for a, b in zip(outputs_gpu + annotations_gpu, outputs_cpu + annotations_cpu, strict=True):
        torch.testing.assert_close(a.cpu(), b)


def test_bn_lstm_on_the_gpu_in_training_and_evaluation() -> None:
    from paperports.integrations.torch import BNLSTM

    torch.manual_seed(0)
    cpu = BNLSTM(5, 7, num_layers=2, bidirectional=True, t_max=20).double()
    gpu = copy.deepcopy(cpu).to(DEVICE)
    x = torch.randn(9, 4, 5, dtype=torch.float64)
    for train in (True, False):  # batch statistics, then the population's
        cpu.train(train)
        gpu.train(train)
        (out_cpu, (h_cpu, c_cpu)), (out_gpu, (h_gpu, c_gpu)) = cpu(x), gpu(x.to(DEVICE))
        torch.testing.assert_close(out_gpu.cpu(), out_cpu)
        torch.testing.assert_close(h_gpu.cpu(), h_cpu)
        torch.testing.assert_close(c_gpu.cpu(), c_cpu)
        if train:
            out_cpu.square().sum().backward()
            out_gpu.square().sum().backward()
            _assert_same_grads(cpu, gpu)
    for (name, a), (_, b) in zip(gpu.named_buffers(), cpu.named_buffers(), strict=True):
        torch.testing.assert_close(a.cpu(), b, msg=name)  # running statistics too


def test_transformers_models_on_the_gpu() -> None:
    # the BERT tests' tiny config (tests/ is on the path: pytest's rootdir-relative imports)
    from integrations.transformers.bert.test_modeling_bert import tiny
    from paperports.integrations.transformers import (
        BertForPreTraining,
        BnLstmConfig,
        BnLstmForCausalLM,
    )

    torch.manual_seed(0)
    config = tiny()
    ids = torch.randint(1, 99, (3, 11), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0  # padding in one row
    labels = torch.where(torch.rand(ids.shape) < 0.3, ids, torch.full_like(ids, -100))
    nsp = torch.tensor([0, 1, 0])
    bn_config = BnLstmConfig(vocab_size=99, hidden_size=16, num_hidden_layers=2, t_max=12)
    for cpu, kwargs in (
        (
            BertForPreTraining(config).double(),
            {"attention_mask": mask, "labels": labels, "next_sentence_label": nsp},
        ),
        (BnLstmForCausalLM(bn_config).double(), {"labels": ids}),
    ):
        gpu = copy.deepcopy(cpu).to(DEVICE)
        out_cpu = cpu(input_ids=ids, **kwargs)
        out_gpu = gpu(input_ids=ids.to(DEVICE), **{k: v.to(DEVICE) for k, v in kwargs.items()})
        torch.testing.assert_close(out_gpu.loss.cpu(), out_cpu.loss)
        out_cpu.loss.backward()
        out_gpu.loss.backward()
        _assert_same_grads(cpu, gpu)


def test_jsma_on_a_gpu_model() -> None:
    import foolbox as fb

    from paperports.adapters.digits import digits_classifier, load_digits_tensors
    from paperports.integrations.foolbox import SaliencyMapAttack

    model = digits_classifier(8).double().eval()
    x, y = load_digits_tensors(8, "test")
    x, y = x[:20].double(), y[:20]
    target = (y + 1 + torch.randint(0, 9, y.shape, generator=torch.Generator().manual_seed(0))) % 10
    attack = SaliencyMapAttack(max_perturbation=0.4)
    adv_cpu, _, success_cpu = attack(
        fb.PyTorchModel(model, bounds=(0, 1), device="cpu"),  # foolbox's default: a GPU
        x,
        fb.criteria.TargetedMisclassification(target),
        epsilons=None,
    )
    gpu_model = fb.PyTorchModel(copy.deepcopy(model).to(DEVICE), bounds=(0, 1), device=DEVICE)
    adv_gpu, _, success_gpu = attack(
        gpu_model,
        x.to(DEVICE),
        fb.criteria.TargetedMisclassification(target.to(DEVICE)),
        epsilons=None,
    )
    assert adv_gpu.device.type == DEVICE.type
    assert success_cpu.sum() > 10
    # The attack picks pixels by arg-max of saliency: a near tie can fall the other way on
    # another device, so most images, not all, must come out the same.
    same = (adv_gpu.cpu() == adv_cpu).flatten(1).all(1)
    assert same.float().mean() >= 0.9
    assert torch.equal(success_gpu.cpu()[same], success_cpu[same])
    predicted = model(adv_gpu.cpu()).argmax(1)
    assert torch.equal(success_gpu.cpu(), predicted == target)


def test_observational_dropout_policy_trains_on_the_gpu_and_its_m_dreams() -> None:
    from sb3_contrib import RecurrentPPO

    from paperports.integrations.sb3 import (
        ObservationalDropoutPolicy,
        ObservationalDropoutWrapper,
        WorldModelEnv,
    )

    def wrapped() -> ObservationalDropoutWrapper:
        env = gym.make("paperports/CartPoleSwingUpHarder-v0")
        return ObservationalDropoutWrapper(env, 0.2, expose_true_obs=True)

    settings = {"n_steps": 64, "batch_size": 32, "n_epochs": 2, "seed": 0}
    kwargs = {"world_model": "cartpole", "privileged_critic": True, "critic_reads_belief": True}
    agent = RecurrentPPO(
        ObservationalDropoutPolicy, wrapped(), policy_kwargs=kwargs, device=DEVICE, **settings
    )
    before = [p.detach().clone() for p in agent.policy.world_model.parameters()]
    agent.learn(256)
    model = agent.policy.world_model
    assert all(p.device.type == DEVICE.type for p in model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), before, strict=True))
    env = wrapped()
    obs, _ = env.reset(seed=1)
    action, state = agent.predict(obs, episode_start=np.array([True]), deterministic=True)
    assert action.shape == (1,) and state is not None

    cpu_policy = copy.deepcopy(agent.policy).to("cpu")
    batch = torch.as_tensor(np.stack([wrapped().reset(seed=s)[0] for s in range(4)]))
    states = (torch.zeros(1, 4, 5), torch.zeros(1, 4, 5))
    starts = torch.ones(4)
    with torch.no_grad():
        values_cpu = cpu_policy.predict_values(batch, states, starts)
        values_gpu = agent.policy.predict_values(
            batch.to(DEVICE), tuple(s.to(DEVICE) for s in states), starts.to(DEVICE)
        )
    torch.testing.assert_close(values_gpu.cpu(), values_cpu, rtol=1e-4, atol=1e-5)

    dream = WorldModelEnv(model, gym.make("paperports/CartPoleSwingUpHarder-v0"))
    obs, _ = dream.reset(seed=0)
    for _ in range(5):
        obs, reward, *_ = dream.step(dream.action_space.sample())
    assert obs.shape == (5,) and np.isfinite(obs).all() and 0.0 <= reward <= 1.0
