"""The running statistics grow with the steps trained, not ``t_max`` from the start
(issue 24, item 3): state dicts the size of what was trained, loading of any size up to
``t_max``, growth that holders of the buffers (a scripted twin, DDP) see."""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
import torch
from torch import nn

from paperports.integrations.torch import BNLSTM, RecurrentBatchNorm


def _saved_bytes(module: nn.Module) -> int:
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.tell()


def _trained(steps: int, t_max: int = 1000, **kw: object) -> BNLSTM:
    torch.manual_seed(0)
    model = BNLSTM(3, 8, t_max=t_max, **kw)  # type: ignore[arg-type]
    model(torch.randn(steps, 4, 3) * 2 + 1)
    return model


def _norms(model: nn.Module) -> list[RecurrentBatchNorm]:
    return [m for m in model.modules() if isinstance(m, RecurrentBatchNorm)]


def test_a_new_module_holds_one_step_and_training_grows_it_to_the_steps_reached() -> None:
    model = BNLSTM(3, 8, t_max=1000, num_layers=2, bidirectional=True)
    assert {n.allocated_steps for n in _norms(model)} == {1}
    model(torch.randn(30, 4, 3))
    assert {n.allocated_steps for n in _norms(model)} == {30}
    model(torch.randn(10, 4, 3))  # shorter: nothing shrinks
    assert {n.allocated_steps for n in _norms(model)} == {30}
    model(torch.randn(1200, 2, 3))  # past t_max: t_max steps, no more
    assert {n.allocated_steps for n in _norms(model)} == {1000}
    assert {int(n.steps_tracked) for n in _norms(model)} == {1000}


def test_the_state_dict_is_the_size_of_the_steps_trained() -> None:
    """The issue's case: a 64 -> 256 layer with t_max = 1000 saved 19.8 MB (nn.LSTM: 1.3 MB)
    before training anything; trained at T = 100 it now saves its weights and 100 steps."""
    torch.manual_seed(0)
    model = BNLSTM(64, 256, t_max=1000)
    model(torch.randn(100, 4, 64))
    lstm_bytes = _saved_bytes(nn.LSTM(64, 256))
    ours = _saved_bytes(model)
    floats_per_step = 2 * (4 * 256 + 4 * 256 + 256)  # mean and variance of the three norms
    longs_per_step = 3  # batches_tracked
    statistics = 100 * (4 * floats_per_step + 8 * longs_per_step)
    assert ours < 1.05 * (lstm_bytes + statistics)
    assert ours < 0.3 * 19.8e6


def test_a_state_dict_of_fewer_steps_loads_exactly() -> None:
    trained = _trained(12)
    fresh = BNLSTM(3, 8, t_max=1000)
    fresh.load_state_dict(trained.state_dict())
    for (k, v), (k2, v2) in zip(
        trained.state_dict().items(), fresh.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(v, v2), k
    x = torch.randn(40, 3, 3)  # longer than trained
    torch.testing.assert_close(fresh.eval()(x)[0], trained.eval()(x)[0], rtol=0, atol=0)


def test_a_state_dict_of_t_max_steps_loads_and_a_longer_one_is_refused() -> None:
    """Checkpoints saved before the statistics grew held ``t_max`` steps: they load (and
    shrink a module that had grown past them). More steps than ``t_max`` is refused,
    naming ``t_max``."""
    trained = _trained(12, t_max=20)
    full = BNLSTM(3, 8, t_max=20)
    full.reserve_steps(20)
    full.load_state_dict(trained.state_dict())  # 12 steps into 20: resized to 12
    assert full.bn_ih_l0.allocated_steps == 12
    trained.reserve_steps(20)  # the old layout: t_max rows, the untrained at 0 and 1
    fresh = BNLSTM(3, 8, t_max=20)
    fresh.load_state_dict(trained.state_dict())
    assert fresh.bn_ih_l0.allocated_steps == 20
    x = torch.randn(30, 3, 3)
    torch.testing.assert_close(fresh.eval()(x)[0], trained.eval()(x)[0], rtol=0, atol=0)
    short = BNLSTM(3, 8, t_max=10)
    with pytest.raises(RuntimeError, match=r"holds the statistics of 20 steps.*t_max=10"):
        short.load_state_dict(trained.state_dict())


def test_growth_is_in_place_for_whoever_holds_the_buffers() -> None:
    """DistributedDataParallel keeps the list of buffers it broadcasts, and a scripted twin
    registers the module's own tensors: both must see the grown statistics."""
    model = BNLSTM(3, 8, t_max=50)
    held = list(model.buffers())
    model(torch.randn(9, 4, 3))
    assert all(a is b for a, b in zip(held, model.buffers(), strict=True))
    assert model.bn_c_l0.running_mean.shape == (9, 8)
    assert held[[n for n, _ in model.named_buffers()].index("bn_c_l0.running_mean")].shape == (
        9,
        8,
    )


def test_a_scripted_module_grows_the_eager_modules_statistics() -> None:
    torch.manual_seed(0)
    model = BNLSTM(3, 8, t_max=50, num_layers=2).double()
    eager = copy.deepcopy(model)
    scripted = torch.jit.script(model)
    x = torch.randn(7, 4, 3, dtype=torch.float64)
    scripted(x)
    eager(x)
    assert model.bn_hh_l1.allocated_steps == 7
    ours, theirs = model.state_dict(), eager.state_dict()
    assert list(ours) == list(theirs)
    for key, value in ours.items():
        torch.testing.assert_close(value, theirs[key], rtol=1e-9, atol=1e-12)


def test_a_compiled_training_step_grows_the_statistics_as_eager() -> None:
    """The growth under ``torch.compile`` is dynamo's: the larger buffers are a recorded
    attribute write, and the longer batch a recompilation, whatever the backend. So this
    test compiles through dynamo and AOTAutograd (``aot_eager``, whose functionalisation
    writes the statistics back as inductor's does) and leaves inductor's code generation
    (the test took 87 s with inductor in a cold CI run) to ``test_bn_lstm_capture``'s
    training step."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = BNLSTM(3, 4, t_max=50)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, fullgraph=True, backend="aot_eager")
    for steps in (5, 8):
        x = torch.randn(steps, 3, 3)
        compiled(x)[0].sum().backward()
        eager(x)[0].sum().backward()
    assert compiled_model.bn_ih_l0.allocated_steps == eager.bn_ih_l0.allocated_steps == 8
    for (k, v), (k2, v2) in zip(
        compiled_model.state_dict().items(), eager.state_dict().items(), strict=True
    ):
        assert k == k2
        torch.testing.assert_close(v, v2, rtol=1e-4, atol=1e-5)


def test_reserve_steps_never_shrinks_and_stops_at_t_max() -> None:
    bn = RecurrentBatchNorm(4, t_max=6)
    bn.reserve_steps(3)
    assert bn.running_mean.shape == (3, 4) and bn.batches_tracked.shape == (3,)
    assert torch.equal(bn.running_var, torch.ones(3, 4))
    bn.reserve_steps(2)
    assert bn.allocated_steps == 3
    bn.reserve_steps(100)
    assert bn.allocated_steps == 6
    with pytest.raises(ValueError, match="steps"):
        bn.reserve_steps(-1)


def test_evaluation_before_training_uses_step_zeros_statistics() -> None:
    bn = RecurrentBatchNorm(2, t_max=100, gamma_init=1.0).eval()
    x = torch.randn(30, 3, 2)
    torch.testing.assert_close(bn(x), x / torch.sqrt(torch.tensor(1.0 + bn.eps)))


def _ddp_batch(rank: int, iteration: int) -> torch.Tensor:
    """Process ``rank``'s batch at ``iteration``: the two processes' lengths differ."""
    g = torch.Generator().manual_seed(100 * rank + iteration)
    return torch.randn(5 + 2 * rank + iteration, 4, 3, generator=g) + rank


def _ddp_worker(rank: int, port: int, out_dir: str) -> None:
    from torch.nn.parallel import DistributedDataParallel

    from .._distributed import gloo_group, settle

    with gloo_group(rank, port):
        torch.manual_seed(0)
        model = BNLSTM(3, 4, t_max=20)
        ddp = DistributedDataParallel(model)
        for iteration in range(3):
            out, _ = ddp(_ddp_batch(rank, iteration))
            out.sum().backward()
        torch.save([b.clone() for b in model.buffers()], f"{out_dir}/rank{rank}.pt")
        settle()


def test_ddp_over_batches_of_different_lengths_broadcasts_aligned_statistics(
    tmp_path: Path,
) -> None:
    """DistributedDataParallel copies process 0's buffers into the others' before each
    forward, as flat buckets. Processes whose batches reached different lengths once held
    buffers of different sizes, which that copy misaligned without an error. In a process
    group every process now holds all t_max steps: process 1 ends with process 0's
    statistics after two batches, updated by its own third batch."""
    from .._distributed import spawn

    spawn(_ddp_worker, str(tmp_path))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    torch.manual_seed(0)
    process_0 = BNLSTM(3, 4, t_max=20)
    for iteration in range(2):
        process_0(_ddp_batch(0, iteration))
    process_1 = copy.deepcopy(process_0)
    process_0(_ddp_batch(0, 2))
    process_1(_ddp_batch(1, 2))
    for got, expected in zip(ranks, (process_0, process_1), strict=True):
        names = [name for name, _ in expected.named_buffers()]
        for name, a, b in zip(names, got, expected.buffers(), strict=True):
            if a.dim() > 0:
                assert a.shape[0] == 20, name  # t_max steps on every process
                a = a[: b.shape[0]]
            torch.testing.assert_close(a, b, msg=name)
