"""BNLSTM under graph capture: ``torch.jit.trace``, ``torch.export`` and
``torch.compile(fullgraph=True)`` give the eager result, in training too.

Under capture the layer runs the straightforward per-step computation (the fast paths'
hand-written backward and packed oneDNN weights do not trace); the first test holds the two
to the same function, so the capture tests can stay small."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from paperports.integrations.torch import BNLSTM
from paperports.integrations.torch.bn_lstm import per_step_computation


def _model(**kw: object) -> BNLSTM:
    torch.manual_seed(0)
    model = BNLSTM(3, 4, t_max=8, **kw)  # type: ignore[arg-type]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
        model(torch.randn(6, 5, 3) + 1)  # running statistics that are not 0 and 1
    return model


def _run(model: BNLSTM, x: torch.Tensor, lengths: torch.Tensor | None) -> list[torch.Tensor]:
    x = x.clone().requires_grad_()
    out, (h, c) = model(x, lengths=lengths)
    (out.pow(2).sum() + h.sum() + c.sum()).backward()  # type: ignore[union-attr]
    grads = [x.grad] + [p.grad for p in model.parameters()]
    return [out, h, c, *grads, *model.buffers()]  # type: ignore[list-item]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("lengths", [None, [6, 3, 5, 2], [6, 6, 2, 4]])
def test_the_per_step_path_computes_the_fast_paths_function(
    training: bool, lengths: list[int] | None
) -> None:
    """Values, gradients and running statistics, in float64: with and without lengths,
    where the longest sequence runs alone at its last step and where it does not."""
    fast = _model(num_layers=2, bidirectional=True).double().train(training)
    stepwise = copy.deepcopy(fast)
    x = torch.randn(6, 4, 3, dtype=torch.float64)
    lens = None if lengths is None else torch.tensor(lengths)
    expected = _run(fast, x, lens)
    with per_step_computation():
        got = _run(stepwise, x, lens)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_jit_trace_gives_the_eager_result() -> None:
    model = _model(num_layers=2, bidirectional=True, batch_first=True).eval()
    x = torch.randn(3, 5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks, constant
        traced = torch.jit.trace(model, (x,), check_trace=False)
    new = torch.randn(3, 5, 3)
    for got, expected in zip(traced(new), model(new), strict=True):
        torch.testing.assert_close(got, expected)


def test_torch_export_gives_the_eager_result_with_lengths() -> None:
    model = _model(batch_first=True).eval()
    x, lengths = torch.randn(3, 5, 3), torch.tensor([5, 2, 4])
    exported = torch.export.export(model, (x,), {"lengths": lengths})
    new, new_lengths = torch.randn(3, 5, 3), torch.tensor([3, 5, 1])
    out, (h, c) = exported.module()(new, lengths=new_lengths)
    out_e, (h_e, c_e) = model(new, lengths=new_lengths)
    torch.testing.assert_close(out, out_e)
    torch.testing.assert_close(h, h_e)
    torch.testing.assert_close(c, c_e)


def test_compile_fullgraph_trains_and_evaluates_as_eager() -> None:
    """A training step (forward, backward, the running statistics' update) and then
    evaluation: once refused (``mkldnn._reorder_linear_weight``), and the statistics'
    update once read values back into Python."""
    torch._dynamo.reset()
    eager = _model()
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, fullgraph=True)
    x, lengths = torch.randn(4, 3, 3), torch.tensor([4, 2, 3])
    for got, expected in zip(
        _run(compiled, x, lengths),  # type: ignore[arg-type]
        _run(eager, x, lengths),
        strict=True,
    ):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    assert int(compiled_model.bn_c_l0.steps_tracked) == int(eager.bn_c_l0.steps_tracked) > 0
    compiled_model.eval()
    eager.eval()
    new = torch.randn(7, 3, 3)  # longer than trained: the last tracked step's statistics
    torch.testing.assert_close(compiled(new)[0], eager(new)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lengths", [None, [6, 3, 5, 2]])
def test_jit_script_trains_and_evaluates_as_eager_on_the_same_tensors(
    lengths: list[int] | None,
) -> None:
    """``torch.jit.script`` once failed (``Unknown type annotation: 'Tensor'``); it now
    compiles a TorchScript twin over the module's own parameters and statistics."""
    model = _model(num_layers=2, bidirectional=True, batch_first=True).double()
    eager = copy.deepcopy(model)
    scripted = torch.jit.script(model)
    assert isinstance(scripted, torch.jit.ScriptModule)
    x = torch.randn(4, 6, 3, dtype=torch.float64)  # batch first
    lens = None if lengths is None else torch.tensor(lengths)
    x_script = x.clone().requires_grad_()
    out, (h, c) = scripted(x_script, lengths=lens)
    (out.pow(2).sum() + h.sum() + c.sum()).backward()
    # the scripted module trained the original's tensors: parameters and statistics shared,
    # so its gradients and statistics are read from `model`, in the eager order
    got = [out, h, c, x_script.grad, *(p.grad for p in model.parameters()), *model.buffers()]
    for a, b in zip(got, _run(eager, x, lens), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
    scripted.eval()
    eager.eval()
    longer = torch.randn(3, 11, 3, dtype=torch.float64)  # past t_max = 8
    torch.testing.assert_close(scripted(longer)[0], eager(longer)[0])
    unbatched = longer[0]
    torch.testing.assert_close(scripted(unbatched)[0], eager(unbatched)[0])
    scripted.train()
    with pytest.raises(torch.jit.Error, match="more than 1 value per channel"):
        scripted(torch.randn(1, 6, 3, dtype=torch.float64))
