r"""TorchScript for :class:`~paperports.integrations.torch.BNLSTM`.

``torch.jit.script(bn_lstm)`` scripts :class:`ScriptBNLSTM`, which ``BNLSTM`` hands over
through ``__prepare_scriptable__`` (the hook ``torch.jit.script`` calls first): the same
function as the eager module's per-step computation, written in TorchScript's subset of
Python, over the *same* parameters and statistics (shared tensors, not copies), so a
scripted module trains, updates the running statistics and evaluates as the eager one does.

The eager module's fast paths (a hand-written backward, packed oneDNN weights) and its
argument checks are Python that TorchScript cannot compile; this module keeps the shape
checks, refuses a one-sequence training batch as the eager one does, and takes a padded
batch with ``lengths`` (no ``PackedSequence``). Settings such as ``momentum`` are those of
the moment of scripting.

(No ``from __future__ import annotations`` here: TorchScript reads the annotations.)
"""

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperports.integrations.torch.recurrent_batch_norm import RecurrentBatchNorm

if TYPE_CHECKING:
    from paperports.integrations.torch.bn_lstm import BNLSTM, _LayerParams

__all__ = ["ScriptBNLSTM"]


class ScriptRecurrentBatchNorm(nn.Module):
    """:class:`RecurrentBatchNorm` one step at a time, over the norm's own tensors."""

    momentum: float | None
    weight: Tensor
    bias: Tensor | None
    running_mean: Tensor
    running_var: Tensor
    steps_tracked: Tensor
    batches_tracked: Tensor

    def __init__(self, norm: RecurrentBatchNorm) -> None:
        super().__init__()
        self.t_max: int = norm.t_max
        self.eps: float = norm.eps
        self.momentum = norm.momentum
        self.weight = norm.weight
        self.bias = norm.bias
        for name in ("running_mean", "running_var", "steps_tracked", "batches_tracked"):
            self.register_buffer(name, getattr(norm, name))

    def reserve(self, steps: int) -> None:
        """:meth:`RecurrentBatchNorm.reserve_steps`: room for the statistics of ``steps``
        steps (at most ``t_max``), grown in place so the eager module sees them too."""
        steps = min(steps, self.t_max)
        have = self.running_mean.shape[0]
        if steps > have:
            with torch.no_grad():
                features = self.running_mean.shape[1]
                extra = steps - have
                self.running_mean.set_(  # type: ignore[call-overload]
                    torch.cat([self.running_mean, self.running_mean.new_zeros([extra, features])])
                )
                self.running_var.set_(  # type: ignore[call-overload]
                    torch.cat([self.running_var, self.running_var.new_ones([extra, features])])
                )
                self.batches_tracked.set_(  # type: ignore[call-overload]
                    torch.cat([self.batches_tracked, self.batches_tracked.new_zeros([extra])])
                )

    def _running(self, t: int, upto: int) -> tuple[Tensor, Tensor]:
        """Step ``t``'s running statistics, or the last tracked step's past it (or step
        ``upto``'s past that)."""
        last = self.steps_tracked.clamp(min=1, max=self.running_mean.shape[0]) - 1
        step = torch.minimum(torch.full_like(last, min(t, upto)), last).view(1)
        return self.running_mean.index_select(0, step)[0], self.running_var.index_select(0, step)[0]

    def _update(self, t: int, mean: Tensor, var: Tensor, count: Tensor) -> None:
        momentum = self.momentum
        if t >= self.t_max or (momentum is not None and momentum <= 0.0):
            return
        with torch.no_grad():
            ok = (count > 1) & torch.isfinite(mean).all() & torch.isfinite(var).all()
            unbiased = var * count / (count - 1).clamp(min=1.0)
            self.batches_tracked[t] += ok.long()
            if momentum is None:
                m = 1.0 / self.batches_tracked[t].clamp(min=1).to(mean.dtype)
            else:
                m = torch.full_like(count, momentum)
            rm, rv = self.running_mean[t], self.running_var[t]
            self.running_mean[t] = torch.where(ok, (1 - m) * rm + m * mean.detach(), rm)
            self.running_var[t] = torch.where(ok, (1 - m) * rv + m * unbiased.detach(), rv)
            reached = torch.where(
                ok, torch.full_like(self.steps_tracked, t + 1), self.steps_tracked
            )
            self.steps_tracked.copy_(torch.maximum(self.steps_tracked, reached))

    def forward(
        self, x: Tensor, t: int, mask: Tensor | None, stale_from: int | None = None
    ) -> Tensor:
        """``x`` ``(B, F)`` at step ``t``; ``mask`` ``(B,)``: the rows still running; in
        training, from step ``stale_from`` on, step ``stale_from - 1``'s running statistics
        stand in for the batch's."""
        upto = t if stale_from is None else stale_from - 1
        if self.training:
            if mask is None:
                count = torch.tensor(float(x.shape[0]), dtype=x.dtype, device=x.device)
                mean = x.mean(0)
                var = (x - mean).pow(2).mean(0)
            else:
                w = mask.to(x.dtype)[:, None]
                count = w.sum()
                denominator = count.clamp(min=1.0)
                mean = (x * w).sum(0) / denominator
                var = ((x - mean).pow(2) * w).sum(0) / denominator
            running_mean, running_var = self._running(t, upto)
            few = count < 2  # a statistic of one value is none: the running one stands in
            if t > upto:
                few = torch.ones_like(few)
            use_mean = torch.where(few, running_mean.to(x.dtype), mean)
            use_var = torch.where(few, running_var.to(x.dtype), var)
            out = (x - use_mean) * torch.rsqrt(use_var + self.eps)
            self._update(t, mean, var, count)
        else:
            running_mean, running_var = self._running(t, t)
            out = (x - running_mean) * torch.rsqrt(running_var + self.eps)
        out = out * self.weight
        bias = self.bias
        if bias is not None:
            out = out + bias
        return out


class ScriptBNLSTMLayer(nn.Module):
    """One layer and direction: the cell's equations, step by step."""

    weight_ih: Tensor
    weight_hh: Tensor
    bias_ih: Tensor | None
    bias_hh: Tensor | None

    def __init__(self, layer: "_LayerParams") -> None:
        super().__init__()
        self.weight_ih = layer.weight_ih
        self.weight_hh = layer.weight_hh
        self.bias_ih = layer.bias_ih
        self.bias_hh = layer.bias_hh
        self.bn_ih = ScriptRecurrentBatchNorm(layer.bn_ih)
        self.bn_hh = ScriptRecurrentBatchNorm(layer.bn_hh)
        self.bn_c = ScriptRecurrentBatchNorm(layer.bn_c)

    def forward(
        self, x: Tensor, h: Tensor, c: Tensor, mask: Tensor | None, stale_from: int | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        wx = F.linear(x, self.weight_ih)
        if self.training:
            self.bn_ih.reserve(x.shape[0])
            self.bn_hh.reserve(x.shape[0])
            self.bn_c.reserve(x.shape[0])
        outputs: list[Tensor] = []
        for t in range(x.shape[0]):
            m: Tensor | None = None
            if mask is not None:
                m = mask[t]
            gates = self.bn_ih(wx[t], t, m, stale_from) + self.bn_hh(
                F.linear(h, self.weight_hh), t, m, stale_from
            )
            bias_ih, bias_hh = self.bias_ih, self.bias_hh
            if bias_ih is not None and bias_hh is not None:
                gates = gates + bias_ih + bias_hh
            gate = gates.chunk(4, 1)  # i, f, g, o
            c_new = torch.sigmoid(gate[1]) * c + torch.sigmoid(gate[0]) * torch.tanh(gate[2])
            h_new = torch.sigmoid(gate[3]) * torch.tanh(self.bn_c(c_new, t, m, stale_from))
            if m is None:
                h, c = h_new, c_new
                outputs.append(h_new)
            else:  # finished sequences keep their state and output 0
                keep = m[:, None]
                h, c = torch.where(keep, h_new, h), torch.where(keep, c_new, c)
                outputs.append(h_new * keep)
        return torch.stack(outputs), h, c


def reverse_within_lengths(x: Tensor, lengths: Tensor | None) -> Tensor:
    """Each sequence of ``x`` ``(T, B, F)`` reversed within its own length (an involution;
    ``BNLSTM`` uses it too, eagerly)."""
    if lengths is None:
        return x.flip(0)
    t = torch.arange(x.shape[0], device=x.device)[:, None]
    lens = lengths.to(x.device)[None, :]
    index = torch.where(t < lens, lens - 1 - t, t)
    return x.gather(0, index[:, :, None].expand_as(x))


class ScriptBNLSTM(nn.Module):
    """What ``torch.jit.script(BNLSTM(...))`` compiles: ``BNLSTM``'s call and shapes
    (``batch_first``, unbatched input, ``hx``, ``lengths``, stacked and bidirectional
    layers, dropout), its parameters and statistics shared."""

    def __init__(self, lstm: "BNLSTM") -> None:
        super().__init__()
        self.input_size: int = lstm.input_size
        self.hidden_size: int = lstm.hidden_size
        self.num_layers: int = lstm.num_layers
        self.directions: int = 2 if lstm.bidirectional else 1
        self.batch_first: bool = lstm.batch_first
        self.dropout: float = lstm.dropout
        self.random_t_max: float = lstm.random_t_max
        self.layers = nn.ModuleList(
            ScriptBNLSTMLayer(lstm._layer(layer, direction))
            for layer in range(self.num_layers)
            for direction in range(self.directions)
        )
        self.train(lstm.training)

    def forward(
        self,
        input: Tensor,
        hx: tuple[Tensor, Tensor] | None = None,
        lengths: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if (input.dim() != 2 and input.dim() != 3) or input.shape[-1] != self.input_size:
            raise ValueError(
                "BNLSTM expects input of shape (T, B, input_size) (or (B, T, input_size) with "
                "batch_first), or (T, input_size) unbatched, with input_size "
                + str(self.input_size)
            )
        unbatched = input.dim() == 2
        if unbatched:
            x = input.unsqueeze(1)
        elif self.batch_first:
            x = input.transpose(0, 1)
        else:
            x = input
        steps, batch = x.shape[0], x.shape[1]
        if self.training and batch == 1:
            raise ValueError(
                "BNLSTM: Expected more than 1 value per channel when training: batch "
                "statistics need a batch of at least two sequences (or evaluate with .eval())"
            )
        shape = [self.directions * self.num_layers, batch, self.hidden_size]
        if hx is None:
            h0 = torch.zeros(shape, dtype=x.dtype, device=x.device)
            c0 = h0
        else:
            h0, c0 = hx
            if unbatched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            if list(h0.shape) != shape or list(c0.shape) != shape:
                raise ValueError("BNLSTM: h_0 and c_0 must have shape " + str(shape))
        stale_from: int | None = None  # BNLSTM's random_t_max, drawn as it draws it
        draw = self.training and self.random_t_max > 0.0 and steps >= 2
        if draw and float(torch.rand(1)[0]) < self.random_t_max:
            stale_from = int(torch.randint((steps + 1) // 2, steps, [1])[0])
        mask: Tensor | None = None
        if lengths is not None:
            lengths = lengths.to(x.device)
            mask = torch.arange(steps, device=x.device)[:, None] < lengths[None, :]
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        layer_in = x
        outs: list[Tensor] = []
        for k, layer in enumerate(self.layers):
            direction = k % self.directions
            seq = layer_in if direction == 0 else reverse_within_lengths(layer_in, lengths)
            out, h, c = layer(seq, h0[k], c0[k], mask, stale_from)
            outs.append(out if direction == 0 else reverse_within_lengths(out, lengths))
            h_n.append(h)
            c_n.append(c)
            if direction == self.directions - 1:
                layer_in = torch.cat(outs, dim=-1)
                outs = []
                last_layer = k // self.directions == self.num_layers - 1
                if self.dropout > 0 and self.training and not last_layer:
                    layer_in = F.dropout(layer_in, self.dropout, True)
        h_stack, c_stack = torch.stack(h_n), torch.stack(c_n)
        if unbatched:
            return layer_in.squeeze(1), (h_stack.squeeze(1), c_stack.squeeze(1))
        if self.batch_first:
            layer_in = layer_in.transpose(0, 1)
        return layer_in, (h_stack, c_stack)
