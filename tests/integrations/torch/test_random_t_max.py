"""``BNLSTM(random_t_max=p)``: training batches normalised as if ``t_max`` were an earlier
step, identically on the fast path, the per-step path and under ``torch.jit.script``."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from paperports.integrations.torch import BNLSTM, RecurrentBatchNorm, update_bn
from paperports.integrations.torch.bn_lstm import draw_stale_from, per_step_computation
from paperports.integrations.torch.bn_lstm_training import BNLSTMSequence


def _model(**kw: object) -> BNLSTM:
    torch.manual_seed(0)
    model = BNLSTM(3, 4, t_max=8, **kw).double()  # type: ignore[arg-type]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
        model(torch.randn(6, 5, 3, dtype=torch.float64) + 1)  # statistics not 0 and 1
    return model


def _train_once(
    model: torch.nn.Module, x: torch.Tensor, lengths: torch.Tensor | None, seed: int
) -> list[torch.Tensor]:
    x = x.clone().requires_grad_()
    torch.manual_seed(seed)  # the draw of the step comes from torch's default generator
    out, (h, c) = model(x, lengths=lengths)
    (out.pow(2).sum() + h.sum() + c.sum()).backward()
    grads = [x.grad] + [p.grad for p in model.parameters()]
    return [out, h, c, *grads, *model.buffers()]  # type: ignore[list-item]


def test_the_draw_is_a_step_of_the_second_half_with_the_given_probability() -> None:
    torch.manual_seed(0)
    draws = [draw_stale_from(0.5, 9) for _ in range(2000)]
    steps = [d for d in draws if d is not None]
    assert 0.45 < len(steps) / len(draws) < 0.55
    assert set(steps) == {5, 6, 7, 8}  # ceil(9 / 2) .. 8: the last step may be the first stale
    assert all(draw_stale_from(1.0, 1) is None for _ in range(5))  # one step: nothing earlier
    state = torch.get_rng_state()
    assert draw_stale_from(0.0, 9) is None
    assert torch.equal(torch.get_rng_state(), state)  # the paper's training draws nothing


@pytest.mark.parametrize("lengths", [None, [6, 3, 5, 2], [6, 6, 2, 4]])
def test_fast_path_per_step_path_and_script_train_alike(lengths: list[int] | None) -> None:
    """Values, gradients and running statistics in float64, for several draws (some
    batches stale from a step, some not), where the longest sequence runs alone at its
    last step and where it does not, in a stacked bidirectional BN-LSTM."""
    fast = _model(num_layers=2, bidirectional=True, random_t_max=0.7)
    slow, script_src = copy.deepcopy(fast), copy.deepcopy(fast)
    scripted = torch.jit.script(script_src)
    lens = None if lengths is None else torch.tensor(lengths)
    stale = 0
    for seed in range(6):
        x = torch.randn(6, 4, 3, dtype=torch.float64)
        torch.manual_seed(seed)
        stale += draw_stale_from(0.7, 6) is not None
        for m in (fast, slow, script_src):
            m.zero_grad()
        got = _train_once(fast, x, lens, seed)
        with per_step_computation():
            ref = _train_once(slow, x, lens, seed)
        scripted_run = _train_once(scripted, x, lens, seed)[:4]
        scripted_run += [p.grad for p in script_src.parameters()] + list(script_src.buffers())
        for a, b, c in zip(got, ref, scripted_run, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
            torch.testing.assert_close(c, b, rtol=1e-7, atol=1e-9)
    assert 0 < stale < 6  # both kinds of batch were compared


def test_steps_from_the_drawn_one_use_its_predecessors_statistics() -> None:
    """Before the drawn step the batch trains as in the paper's training; from it on it
    does not (the norm-level test below shows which statistics it uses), and the batch
    statistics still update every step's own."""
    model = _model(random_t_max=1.0)
    paper = copy.deepcopy(model)
    paper.random_t_max = 0.0
    x = torch.randn(8, 5, 3, dtype=torch.float64)
    torch.manual_seed(3)
    tau = draw_stale_from(1.0, 8)
    assert tau is not None
    torch.manual_seed(3)
    out = model(x)[0]
    ref = paper(x)[0]
    torch.testing.assert_close(out[:tau], ref[:tau])
    assert not torch.allclose(out[tau:], ref[tau:])
    # every step's own statistics were updated by its batch statistics (8 steps tracked)
    assert int(model.bn_c_l0.steps_tracked) == 8
    assert not torch.equal(model.bn_c_l0.running_mean[tau:], paper.bn_c_l0.running_mean[tau:])


def test_the_norm_normalises_stale_steps_with_the_earlier_running_statistics() -> None:
    torch.manual_seed(0)
    norm = RecurrentBatchNorm(3, t_max=10, gamma_init=1.0).double()
    norm(torch.randn(6, 8, 3, dtype=torch.float64) * 2 + 1)  # statistics of six steps
    mean, var = norm.running_mean.clone(), norm.running_var.clone()
    x = torch.randn(6, 8, 3, dtype=torch.float64)
    out = norm(x, start=0, stale_from=4)
    batch = (x - x.mean(1, keepdim=True)) / (x.var(1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    torch.testing.assert_close(out[:4], batch[:4])
    stale = (x[4:] - mean[3]) / (var[3] + 1e-5).sqrt()
    torch.testing.assert_close(out[4:], stale)
    assert not torch.equal(norm.running_mean[4:], mean[4:])  # still updated from the batch


def test_gradcheck_with_every_step_normalised_by_given_statistics() -> None:
    torch.manual_seed(0)
    steps, batch, hidden = 5, 4, 3
    x = torch.randn(steps, batch, 2, dtype=torch.float64, requires_grad=True)
    shapes = [(4 * hidden, 2), (batch, hidden), (batch, hidden), (4 * hidden, hidden)]
    params = [torch.randn(*s) for s in shapes]
    params += [torch.rand(4 * hidden) + 0.1, torch.randn(4 * hidden), torch.rand(4 * hidden) + 0.1]
    params += [torch.rand(hidden) + 0.1, torch.randn(hidden)]
    params = [p.double().requires_grad_() for p in params]
    fixed = torch.stack([torch.randn(3, steps, 4 * hidden), torch.rand(3, steps, 4 * hidden)])
    fixed = fixed.transpose(0, 1).double() + torch.tensor([0.0, 0.5]).double()[:, None, None]
    sizes = [4, 4, 3, 1, 1]

    def run(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, h, c, _ = BNLSTMSequence.apply(*args, sizes, (1e-5,) * 3, fixed, True)
        return out, h, c

    assert torch.autograd.gradcheck(run, (x, *params))


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), "0.5"])
def test_a_bad_probability_is_refused_by_name(value: object) -> None:
    with pytest.raises((ValueError, TypeError), match="random_t_max"):
        BNLSTM(3, 4, random_t_max=value)  # type: ignore[arg-type]


def _train_step(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    x = x.clone().requires_grad_()
    out, (h, c) = model(x)
    (out.pow(2).sum() + h.sum() + c.sum()).backward()
    return [out, h, c, x.grad]  # type: ignore[list-item]


@pytest.mark.parametrize("capture", ["trace", "export", "compile"])
def test_graph_capture_keeps_the_draw_in_the_graph_and_trains_as_eager(capture: str) -> None:
    """Once refused. With probability 1 and 3 steps the drawn step can only be 2, so the
    captured training step (values, gradients, running statistics) equals the eager one
    (the next test shows that the draw is made at every call). Captured modules take no
    ``lengths`` keyword, hence a helper of their own rather than ``_train_once``."""
    model = _model(random_t_max=1.0)
    eager = copy.deepcopy(model)
    x = torch.randn(3, 2, 3, dtype=torch.float64)
    captured: torch.nn.Module
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks
        if capture == "trace":  # the trace runs a training step: then back to the start
            model = copy.deepcopy(model)
            captured = torch.jit.trace(model, (x,), check_trace=False)
            model.load_state_dict(eager.state_dict())  # the traced graph holds its tensors
        elif capture == "export":
            captured = torch.export.export(copy.deepcopy(model), (x,)).module()
            model = captured  # type: ignore[assignment]
        else:
            torch._dynamo.reset()
            captured = torch.compile(model, fullgraph=True)  # type: ignore[assignment]
    before = [b.clone() for b in eager.buffers()]
    got = _train_step(captured, x)
    expected = _train_step(eager, x)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
    grads = [p.grad for p in model.parameters()]
    for a, b in zip(grads, [p.grad for p in eager.parameters()], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
    for a, b in zip(model.buffers(), eager.buffers(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
    assert not all(torch.equal(a, b) for a, b in zip(eager.buffers(), before, strict=True))
    # the paper's training of the same batch differs from step 2 on: the draw took place
    paper = _model()
    out = paper(x)[0]
    torch.testing.assert_close(got[0][:2], out[:2].detach())
    assert not torch.allclose(got[0][2:], out[2:].detach())


def test_a_captured_draw_is_drawn_at_every_call() -> None:
    """Probability 0.5 under ``torch.compile``: over calls, some batches train as the
    paper's training (no step stale) and some do not."""
    torch._dynamo.reset()
    model = _model(random_t_max=0.5)
    paper = copy.deepcopy(model)
    paper.random_t_max = 0.0
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(4, 3, 3, dtype=torch.float64)
    torch.manual_seed(0)  # compiled code seeds its generator from torch's
    same = []
    for _ in range(12):
        out = compiled(x)[0]
        same.append(torch.allclose(out, paper(x)[0]))
        paper.load_state_dict(model.state_dict())  # the same statistics for the next call
    assert 0 < sum(same) < 12


def test_evaluation_draws_nothing_and_traces() -> None:
    model = _model(random_t_max=0.5).eval()
    x = torch.randn(6, 2, 3, dtype=torch.float64)
    state = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks, constant
        traced = torch.jit.trace(model, (x,))
    torch.testing.assert_close(traced(x)[0], model(x)[0])
    assert torch.equal(torch.get_rng_state(), state)
    assert "random_t_max=0.5" in repr(model)


def test_the_norm_takes_the_step_as_a_tensor_and_refuses_other_tensors() -> None:
    torch.manual_seed(0)
    norm = RecurrentBatchNorm(3, t_max=10, gamma_init=1.0).double()
    norm(torch.randn(6, 8, 3, dtype=torch.float64) * 2 + 1)
    as_int, as_tensor = copy.deepcopy(norm), copy.deepcopy(norm)
    x = torch.randn(6, 8, 3, dtype=torch.float64)
    torch.testing.assert_close(as_tensor(x, stale_from=torch.tensor(4)), as_int(x, stale_from=4))
    torch.testing.assert_close(as_tensor.running_var, as_int.running_var)
    for bad in (torch.tensor([4]), torch.tensor(4.0), torch.tensor(True), torch.tensor(0)):
        with pytest.raises(ValueError, match="stale_from"):
            norm(x, stale_from=bad)


@pytest.mark.parametrize("recompute", ["ours", "torch"])
def test_update_bn_recomputes_the_statistics_without_drawing(recompute: str) -> None:
    """The statistics that ``update_bn`` recomputes are those of evaluation's network (every
    step its own statistics): no step is drawn meanwhile, so a ``random_t_max=1`` model gets
    the statistics of the same model with the paper's training, and torch's generator is
    left as it was. Once it is done, training draws again."""
    model = _model(random_t_max=1.0)
    paper = copy.deepcopy(model)
    paper.random_t_max = 0.0
    batches = [torch.randn(8, 4, 3, dtype=torch.float64) + k for k in range(3)]
    for m in (model, paper):
        state = torch.get_rng_state()
        if recompute == "ours":
            update_bn(batches, m)
        else:
            torch.optim.swa_utils.update_bn(batches, m)
        assert torch.equal(state, torch.get_rng_state())  # nothing was drawn
    for a, b in zip(model.buffers(), paper.buffers(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    model.train()
    state = torch.get_rng_state()
    model(batches[0])
    assert not torch.equal(torch.get_rng_state(), state)  # the training batch drew again


def test_the_draw_runs_under_a_meta_default_device() -> None:
    """The draw is made on the CPU's generator whatever the default device: under
    ``torch.device("meta")`` (shape inference, deferred initialisation) a training step
    with ``random_t_max`` runs instead of failing on a meta tensor's value."""
    with torch.device("meta"):
        model = BNLSTM(3, 4, random_t_max=1.0)
        out, (h, c) = model(torch.randn(6, 2, 3))
    assert out.is_meta and out.shape == (6, 2, 4) and h.shape == c.shape == (1, 2, 4)
