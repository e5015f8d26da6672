r"""BN-LSTM: the LSTM of "Recurrent Batch Normalization" as a drop-in for ``torch.nn.LSTM``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from paperports._checks import (
    check_batch_for_statistics,
    check_bool,
    check_float,
    check_floating_tensor,
    check_int,
    check_mask,
    check_probability,
    values_known,
)
from paperports.integrations.torch.bn_lstm_kernels import ops, uses_kernels
from paperports.integrations.torch.bn_lstm_script import reverse_within_lengths as _reverse
from paperports.integrations.torch.bn_lstm_training import (
    BNLSTMSequence,
    g_gate_doubled,
    matmul_by,
    matmul_once,
    packed_weight,
)
from paperports.integrations.torch.recurrent_batch_norm import RecurrentBatchNorm

__all__ = ["BNLSTM", "BNLSTMCell", "per_step_computation"]


class BNLSTMCell(nn.Module):
    r"""One step of the batch-normalised LSTM of Cooijmans et al. (2016),
    "Recurrent Batch Normalization" (https://arxiv.org/abs/1603.09025), Eq. 6-8:

    .. math::

        \begin{pmatrix} \tilde i_t \\ \tilde f_t \\ \tilde g_t \\ \tilde o_t \end{pmatrix}
            &= \mathrm{BN}(W_h h_{t-1}; \gamma_h, 0) + \mathrm{BN}(W_x x_t; \gamma_x, 0) + b \\
        c_t &= \sigma(\tilde f_t) \odot c_{t-1} + \sigma(\tilde i_t) \odot \tanh(\tilde g_t) \\
        h_t &= \sigma(\tilde o_t) \odot \tanh(\mathrm{BN}(c_t; \gamma_c, \beta_c))

    Two separate batch norms on the recurrent and input projections, without shifts (the
    bias :math:`b` carries it), and one on the cell, each with statistics per time step
    (:class:`RecurrentBatchNorm`). Gates are stacked in ``torch.nn.LSTM``'s order
    ``(i, f, g, o)``.

    Args:
        input_size: The size of :math:`x_t`.
        hidden_size: The size of :math:`h_t` and :math:`c_t`.
        bias: Learn the bias :math:`b`.
        t_max: Time steps with statistics of their own.
        gamma_init: The initial :math:`\gamma` of all three batch norms (the paper: 0.1).
        forget_bias: The initial forget-gate bias (1.0, a common LSTM choice).
        momentum: The running statistics' update rate (``None``: a cumulative average).
        eps: Added to the variances.
        device: Where to create the parameters and statistics.
        dtype: Their floating-point type.

    Parameters are named as ``nn.LSTMCell``'s (``weight_ih``, ``weight_hh``, ``bias_ih``,
    ``bias_hh``), so its state dict loads (``strict=False``: the batch norms stay at their
    initialisation); only the sum of the two biases enters the equations.

    Shapes:
        - input: ``(B, input_size)``; ``hx``: ``((B, H), (B, H))`` or ``None`` (zeros);
          ``mask``: ``(B,)``, the rows still running (others keep their state).
        - output: ``(h_t, c_t)``, each ``(B, H)``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        t_max: int = 1000,
        gamma_init: float = 0.1,
        forget_bias: float = 1.0,
        momentum: float | None = 0.1,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        input_size = check_int("input_size", input_size, minimum=1, who=who)
        hidden_size = check_int("hidden_size", hidden_size, minimum=1, who=who)
        bias = check_bool("bias", bias, who=who)
        forget_bias = check_float("forget_bias", forget_bias, who=who)
        factory = {"device": device, "dtype": dtype}
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.forget_bias = forget_bias
        self.bias = bias
        weights = _layer_weights(input_size, hidden_size, bias, factory)
        self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh = weights
        self.bn_ih, self.bn_hh, self.bn_c = _layer_norms(
            hidden_size, t_max, gamma_init, momentum, eps, factory
        )
        self.reset_parameters()
        self.register_load_state_dict_pre_hook(_one_bias_to_two)  # type: ignore[no-untyped-call]

    weight_ih: nn.Parameter
    weight_hh: nn.Parameter
    bias_ih: nn.Parameter | None
    bias_hh: nn.Parameter | None

    def reset_parameters(self) -> None:
        """Input weights Xavier-uniform, recurrent weights orthogonal per gate, forget-gate
        bias ``forget_bias`` (in ``bias_ih``), other biases 0, :math:`\\gamma` =
        ``gamma_init``."""
        _reset_layer(_LayerParams.of(self), self.forget_bias)

    def reserve_steps(self, steps: int) -> None:
        """Room for the statistics of ``steps`` steps in each batch norm (see
        :meth:`RecurrentBatchNorm.reserve_steps`; training grows them by itself)."""
        for norm in (self.bn_ih, self.bn_hh, self.bn_c):
            norm.reserve_steps(steps)

    @property
    def gate_bias(self) -> Tensor | None:
        """The paper's gate bias :math:`b`: ``bias_ih + bias_hh`` (``nn.LSTMCell``'s two
        biases; only their sum enters the equations). ``None`` without bias."""
        return _LayerParams.of(self).bias

    @classmethod
    def _sharing(cls, p: _LayerParams, forget_bias: float) -> BNLSTMCell:
        """A cell over ``p``'s parameters and batch norms (shared, not copied)."""
        cell = cls.__new__(cls)
        nn.Module.__init__(cell)
        cell.input_size, cell.hidden_size = p.input_size, p.hidden_size
        cell.forget_bias, cell.bias = forget_bias, p.bias_ih is not None
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            cell.register_parameter(name, getattr(p, name))
        cell.bn_ih, cell.bn_hh, cell.bn_c = p.bn_ih, p.bn_hh, p.bn_c
        return cell

    def forward(
        self,
        input: Tensor,
        hx: tuple[Tensor, Tensor] | None = None,
        t: int = 0,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        who = type(self).__name__
        check_floating_tensor("input", input, dtype=self.weight_ih.dtype, who=who)
        if input.dim() != 2 or input.shape[1] != self.input_size:
            raise ValueError(
                f"{who} expects input of shape (batch, {self.input_size}), got {tuple(input.shape)}"
            )
        t = check_int("t", t, minimum=0, who=who)
        batch = input.shape[0]
        if mask is not None:
            check_mask("mask", mask, (batch,), who=who)
        if hx is None:
            zeros = input.new_zeros(batch, self.hidden_size)
            hx = (zeros, zeros)
        else:
            for name, state in zip(("h", "c"), hx, strict=True):
                check_floating_tensor(name, state, dtype=self.weight_ih.dtype, who=who)
                if tuple(state.shape) != (batch, self.hidden_size):
                    raise ValueError(
                        f"{who}: hx's {name} must have shape ({batch}, {self.hidden_size}), got "
                        f"{tuple(state.shape)}"
                    )
        m = None if mask is None else mask[None]
        x_proj = self.bn_ih(F.linear(input, self.weight_ih)[None], t, m)[0]
        return self.step(x_proj, hx[0], hx[1], t, mask)

    def step(
        self, x_proj: Tensor, h: Tensor, c: Tensor, t: int, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """One step from the already normalised input projection ``BN(W_x x_t)``."""
        h, c, _ = _step(_LayerParams.of(self), x_proj, h, c, t, mask, self.gate_bias)
        return h, c

    def sequence(
        self, x: Tensor, h: Tensor, c: Tensor, batch_sizes: list[int] | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Run over ``x`` ``(T, B, I)``; returns ``(output (T, B, H), h_T, c_T)``.

        ``batch_sizes`` (as in ``PackedSequence``, for a batch sorted by decreasing length):
        at step ``t`` the first ``batch_sizes[t]`` rows are running; the others keep their
        state and output 0. ``None``: all rows run all steps.

        The same computation as :meth:`step` at each ``t``, arranged for speed: the input
        projection is one matmul for all steps; training runs :class:`BNLSTMSequence`, a
        hand-written backward, and updates the running statistics once, after the loop; in
        evaluation all three batch norms are per-step affine maps computed once, with the
        input side's and the shifts folded into the projection.
        """
        return _sequence(_LayerParams.of(self), x, h, c, batch_sizes, type(self).__name__)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"


class BNLSTM(nn.Module):
    r"""A multi-layer BN-LSTM with ``torch.nn.LSTM``'s call and return conventions.

    Each layer and direction is a :class:`BNLSTMCell` (see there for the equations of
    Cooijmans et al. 2016). ``output, (h_n, c_n) = bnlstm(input, hx)`` with the same shapes
    as ``nn.LSTM`` for every combination of ``batch_first``, ``num_layers`` and
    ``bidirectional``, unbatched input included.

    Variable lengths: pass a ``PackedSequence``, or a padded batch with ``lengths``. Batch
    statistics at each step are then computed over the sequences still running; outputs past
    a sequence's end are 0 and ``h_n, c_n`` are its state at its last step, as with packed
    ``nn.LSTM``. The reverse direction starts at each sequence's own last element.

    Args:
        input_size: Features of the input.
        hidden_size: Features of the hidden state.
        num_layers: Stacked layers.
        bias: Learn the gate biases.
        batch_first: Input and output as ``(B, T, F)``.
        dropout: Dropout on the outputs of every layer but the last, in training.
        bidirectional: Also run each layer backwards.
        t_max: Time steps with statistics of their own; later steps reuse the last ones.
        gamma_init: The initial :math:`\gamma` (the paper: 0.1).
        forget_bias: The initial forget-gate bias.
        momentum: The running statistics' update rate (``None``: a cumulative average).
        eps: Added to the variances.
        random_t_max: The probability that a training batch is normalised as if ``t_max``
            were a step :math:`\tau` drawn uniformly from the second half of the batch's
            steps: steps from :math:`\tau` on use the running statistics of step
            :math:`\tau - 1`, as evaluation uses the last step's past ``t_max`` (their batch
            statistics still update their own). The network so learns to work with earlier
            statistics, which is what sequences longer than the trained ones get in
            evaluation. 0 (the default) is the paper's training.

    Shapes:
        - input: ``(T, B, input_size)`` (``(B, T, input_size)`` if ``batch_first``),
          ``(T, input_size)`` unbatched, or a ``PackedSequence``.
        - hx: ``(h_0, c_0)``, each ``(D * num_layers, B, hidden_size)`` (``D`` = 2 if
          bidirectional), or ``None`` for zeros.
        - output: ``(T, B, D * hidden_size)`` (or ``batch_first``, unbatched, packed alike);
          ``h_n``, ``c_n``: ``(D * num_layers, B, hidden_size)``.

    Example::

        >>> lstm = BNLSTM(8, 32, num_layers=2, batch_first=True)
        >>> out, (h, c) = lstm(torch.randn(4, 10, 8))
        >>> out.shape, h.shape
        (torch.Size([4, 10, 32]), torch.Size([2, 4, 32]))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        t_max: int = 1000,
        gamma_init: float = 0.1,
        forget_bias: float = 1.0,
        momentum: float | None = 0.1,
        eps: float = 1e-5,
        random_t_max: float = 0.0,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        input_size = check_int("input_size", input_size, minimum=1, who=who)
        hidden_size = check_int("hidden_size", hidden_size, minimum=1, who=who)
        num_layers = check_int("num_layers", num_layers, minimum=1, who=who)
        bias = check_bool("bias", bias, who=who)
        dropout = check_probability("dropout", dropout, who=who)
        batch_first = check_bool("batch_first", batch_first, who=who)
        bidirectional = check_bool("bidirectional", bidirectional, who=who)
        proj_size = check_int("proj_size", proj_size, minimum=0, who=who)
        if proj_size:
            raise NotImplementedError(
                f"{who}: proj_size={proj_size} (an LSTM with projections) is not implemented: "
                "the paper's BN-LSTM has none; use proj_size=0, or project the output yourself"
            )
        t_max = check_int("t_max", t_max, minimum=1, who=who)
        gamma_init = check_float("gamma_init", gamma_init, who=who)
        forget_bias = check_float("forget_bias", forget_bias, who=who)
        random_t_max = check_probability("random_t_max", random_t_max, who=who)
        factory = {"device": device, "dtype": dtype}
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = dropout
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        self.t_max = t_max
        self.gamma_init = gamma_init
        self.forget_bias = forget_bias
        self.random_t_max = random_t_max
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(self._directions):
                suffix = _suffix(layer, direction)
                layer_input = input_size if layer == 0 else self._directions * hidden_size
                weights = _layer_weights(layer_input, hidden_size, bias, factory)
                names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"][: 4 if bias else 2]
                for name, weight in zip(names, weights, strict=False):
                    self.register_parameter(name + suffix, weight)
                norms = _layer_norms(hidden_size, t_max, gamma_init, momentum, eps, factory)
                for name, norm in zip(("bn_ih", "bn_hh", "bn_c"), norms, strict=True):
                    self.add_module(name + suffix, norm)
                self._all_weights.append([name + suffix for name in names])
        self.reset_parameters()
        self.register_load_state_dict_pre_hook(_cells_to_layer_names)  # type: ignore[no-untyped-call]

    @property
    def _directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _layer(self, layer: int, direction: int) -> _LayerParams:
        return _LayerParams.of(self, _suffix(layer, direction))

    def _synchronised(self) -> bool:
        return any(m.synchronises() for m in self.children() if isinstance(m, RecurrentBatchNorm))

    def _recomputing_statistics(self) -> bool:
        """Whether ``update_bn`` is recomputing the statistics (no ``random_t_max`` draw)."""
        return any(m._recomputing for m in self.children() if isinstance(m, RecurrentBatchNorm))

    def reset_parameters(self) -> None:
        """Each layer and direction as :meth:`BNLSTMCell.reset_parameters` (the paper's
        initialisation), statistics reset."""
        for layer in range(self.num_layers):
            for direction in range(self._directions):
                _reset_layer(self._layer(layer, direction), self.forget_bias)

    def reserve_steps(self, steps: int) -> None:
        """Room for the statistics of ``steps`` steps (at most ``t_max``) in every batch
        norm. Training grows them by itself, to the steps it reaches; reserving ahead fixes
        the buffers' size, for example before capturing a training step in a graph."""
        for norm in self.children():
            if isinstance(norm, RecurrentBatchNorm):
                norm.reserve_steps(steps)

    @property
    def all_weights(self) -> list[list[nn.Parameter]]:
        """``nn.LSTM``'s ``all_weights``: per layer and direction, ``[weight_ih, weight_hh,
        bias_ih, bias_hh]`` (the weights alone without bias). The batch norms' parameters
        are not in it."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def __prepare_scriptable__(self) -> nn.Module:
        """What ``torch.jit.script`` compiles in this module's place: a
        :class:`~paperports.integrations.torch.bn_lstm_script.ScriptBNLSTM` over the same
        parameters and statistics (the fast paths are Python TorchScript cannot compile)."""
        from paperports.integrations.torch.bn_lstm_script import ScriptBNLSTM

        return ScriptBNLSTM(self)

    def flatten_parameters(self) -> None:
        """A no-op, for code written for ``nn.LSTM`` (cuDNN's flat weight buffer does not
        apply: the BN-LSTM's recurrence is not cuDNN's)."""

    @classmethod
    def from_lstm(cls, lstm: nn.LSTM, **kwargs: Any) -> BNLSTM:
        """A BN-LSTM with ``lstm``'s sizes, options, device and dtype, and its trained
        weights and biases copied exactly; the batch norms start at the paper's
        initialisation (``gamma_init``, statistics 0 and 1). ``kwargs`` set the BN-LSTM's
        own options (``t_max``, ``gamma_init``, ``momentum``, ``eps``).

        The network computes another function than ``lstm`` until it is fine-tuned (the
        normalised projections are scaled by :math:`\\gamma`).
        """
        if not isinstance(lstm, nn.LSTM):
            raise TypeError(f"{cls.__name__}.from_lstm needs an nn.LSTM, got {type(lstm).__name__}")
        if lstm.proj_size:
            raise NotImplementedError(
                f"{cls.__name__}.from_lstm: the LSTM has proj_size={lstm.proj_size}; a BN-LSTM "
                "with projections is not implemented"
            )
        weight: Tensor = lstm.weight_ih_l0  # type: ignore[assignment]
        model = cls(
            lstm.input_size,
            lstm.hidden_size,
            lstm.num_layers,
            lstm.bias,
            lstm.batch_first,
            float(lstm.dropout),
            lstm.bidirectional,
            device=weight.device,
            dtype=weight.dtype,
            **kwargs,
        )
        result = model.load_state_dict(lstm.state_dict(), strict=False)
        missing = [
            k for k in result.missing_keys if not k.startswith(("bn_ih_", "bn_hh_", "bn_c_"))
        ]
        if missing or result.unexpected_keys:  # the layouts agree by construction
            raise RuntimeError(f"from_lstm: missing {missing}, unexpected {result.unexpected_keys}")
        return model

    def cell(self, layer: int = 0, direction: int = 0) -> BNLSTMCell:
        """Layer ``layer``'s cell in ``direction`` (1: the reverse one) as a
        :class:`BNLSTMCell` that shares this module's parameters and statistics: for
        step-by-step use, such as sampling one character at a time."""
        who = type(self).__name__
        layer = check_int("layer", layer, minimum=0, maximum=self.num_layers - 1, who=who)
        direction = check_int(
            "direction", direction, minimum=0, maximum=self._directions - 1, who=who
        )
        return BNLSTMCell._sharing(self._layer(layer, direction), self.forget_bias).train(
            self.training
        )

    def forward(
        self,
        input: Tensor | PackedSequence,
        hx: tuple[Tensor, Tensor] | None = None,
        lengths: Tensor | None = None,
    ) -> tuple[Tensor | PackedSequence, tuple[Tensor, Tensor]]:
        output, state, _ = self._forward(input, hx, lengths, keep_layers=False)
        return output, state

    def forward_with_layers(
        self,
        input: Tensor | PackedSequence,
        hx: tuple[Tensor, Tensor] | None = None,
        lengths: Tensor | None = None,
    ) -> tuple[Tensor | PackedSequence, tuple[Tensor, Tensor], tuple[Tensor, ...]]:
        """:meth:`forward`, and each layer's output (before the dropout between layers), as
        padded tensors in the output's layout (``(B, T, D * H)`` with ``batch_first``),
        0 past each sequence's end: the per-layer hidden states that transformers models
        return with ``output_hidden_states``."""
        return self._forward(input, hx, lengths, keep_layers=True)

    def _forward(
        self,
        input: Tensor | PackedSequence,
        hx: tuple[Tensor, Tensor] | None,
        lengths: Tensor | None,
        *,
        keep_layers: bool,
    ) -> tuple[Tensor | PackedSequence, tuple[Tensor, Tensor], tuple[Tensor, ...]]:
        who = type(self).__name__
        packed = isinstance(input, PackedSequence)
        if isinstance(input, PackedSequence):
            if lengths is not None:
                raise ValueError(
                    f"{who}: pass lengths only with a padded tensor, not a PackedSequence"
                )
            check_floating_tensor("input", input.data, dtype=self._dtype(), who=who)
            x, lengths = pad_packed_sequence(input)
            unbatched = False
        else:
            x = check_floating_tensor("input", input, dtype=self._dtype(), who=who)
            if x.dim() not in (2, 3):
                raise ValueError(
                    "BNLSTM expects input of shape (T, B, input_size) (or (B, T, input_size) "
                    f"with batch_first), or (T, input_size) unbatched; got {tuple(x.shape)}"
                )
            unbatched = x.dim() == 2
            x = x.unsqueeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        if x.shape[-1] != self.input_size:
            raise ValueError(
                f"input has {x.shape[-1]} features, BNLSTM was built for input_size="
                f"{self.input_size}"
            )
        n_steps, batch = x.shape[0], x.shape[1]
        if n_steps == 0:
            raise ValueError(
                f"{who}: input has no time steps (sequence length 0); nn.LSTM refuses it too"
            )
        if self.training:
            check_batch_for_statistics(batch, tuple(x.shape), who=who)
        h0, c0 = self._initial_state(hx, batch, unbatched, x)
        if isinstance(lengths, Tensor) and lengths.is_meta:
            lengths = None  # nothing to read on the meta device; the shapes do not depend on it
        if lengths is not None:
            lengths = self._check_lengths(lengths, n_steps, batch)
        d = 2 if self.bidirectional else 1
        if batch == 0:  # an empty batch: empty outputs of the right shapes, as nn.LSTM gives
            empty = x.new_zeros(n_steps, 0, d * self.hidden_size)
            out = empty.transpose(0, 1) if self.batch_first else empty
            return out, (h0, c0), (out,) * (self.num_layers if keep_layers else 0)
        order, batch_sizes, mask = None, None, None
        if lengths is not None and (_plain_path() or self._synchronised()):  # a mask, no sort
            steps = torch.arange(n_steps, device=lengths.device)
            mask = (steps[:, None] < lengths[None, :]).to(x.device)
        elif lengths is not None:
            # sorted by decreasing length, the running sequences of a step are a prefix
            order = torch.argsort(lengths, descending=True, stable=True)
            lengths = lengths[order]
            steps = torch.arange(n_steps, device=lengths.device)
            batch_sizes = (lengths[None, :] > steps[:, None]).sum(1).tolist()
            dev_order = order.to(x.device)
            x, h0, c0 = x[:, dev_order], h0[:, dev_order], c0[:, dev_order]

        stale_from = (
            draw_stale_from(self.random_t_max, n_steps, x.device)
            if self.training and not self._recomputing_statistics()
            else None
        )
        h_n, c_n, layers = [], [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(d):
                k = layer * d + direction
                seq = layer_in if direction == 0 else _reverse(layer_in, lengths)
                out, h, c = _sequence(
                    self._layer(layer, direction),
                    seq,
                    h0[k],
                    c0[k],
                    batch_sizes,
                    who,
                    mask,
                    stale_from,
                )
                outs.append(out if direction == 0 else _reverse(out, lengths))
                h_n.append(h)
                c_n.append(c)
            layer_in = torch.cat(outs, dim=-1) if d == 2 else outs[0]
            if keep_layers:
                layers.append(layer_in)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, training=True)
        h_stack, c_stack = torch.stack(h_n), torch.stack(c_n)
        if order is not None:  # back to the caller's order
            assert lengths is not None
            inverse = torch.argsort(order)  # on the lengths' device, the CPU
            dev_inverse = inverse.to(x.device)
            layer_in, h_stack, c_stack = (
                layer_in[:, dev_inverse],
                h_stack[:, dev_inverse],
                c_stack[:, dev_inverse],
            )
            layers = [out[:, dev_inverse] for out in layers]
            lengths = lengths[inverse]
        if unbatched:
            layers = [out.squeeze(1) for out in layers]
        elif self.batch_first:
            layers = [out.transpose(0, 1) for out in layers]

        if packed:
            assert lengths is not None
            output: Tensor | PackedSequence = pack_padded_sequence(
                layer_in, lengths.cpu(), enforce_sorted=False
            )
        elif unbatched:
            output = layer_in.squeeze(1)
            h_stack, c_stack = h_stack.squeeze(1), c_stack.squeeze(1)
        else:
            output = layer_in.transpose(0, 1) if self.batch_first else layer_in
        return output, (h_stack, c_stack), tuple(layers)

    def _dtype(self) -> torch.dtype:
        weight: Tensor = self.weight_ih_l0  # type: ignore[assignment]
        return weight.dtype

    @staticmethod
    def _check_lengths(lengths: Tensor, steps: int, batch: int) -> Tensor:
        if not isinstance(lengths, Tensor):
            lengths = torch.as_tensor(lengths, device="cpu")
        lengths = lengths.cpu()
        if lengths.shape != (batch,):
            raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}")
        if lengths.dtype == torch.bool or lengths.is_complex():
            raise TypeError(f"lengths must hold whole numbers, got dtype {lengths.dtype}")
        known = values_known(lengths) and not graph_capture()
        if lengths.is_floating_point():
            if known and not bool((lengths == lengths.round()).all()):
                raise ValueError(
                    f"lengths must hold whole numbers of steps, got {lengths.tolist()}"
                )
            lengths = lengths.long()
        if known and batch and (int(lengths.max()) > steps or int(lengths.min()) < 1):
            raise ValueError(
                f"lengths must lie in [1, {steps}] (the sequence length); got values in "
                f"[{int(lengths.min())}, {int(lengths.max())}]"
            )
        return lengths

    def _initial_state(
        self, hx: tuple[Tensor, Tensor] | None, batch: int, unbatched: bool, x: Tensor
    ) -> tuple[Tensor, Tensor]:
        d = 2 if self.bidirectional else 1
        expected = (d * self.num_layers, batch, self.hidden_size)
        if hx is None:
            zeros = x.new_zeros(expected)
            return zeros, zeros
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(
                f"{type(self).__name__}: hx must be a tuple (h_0, c_0) of tensors, got "
                f"{type(hx).__name__}"
            )
        h0, c0 = hx
        for name, state in (("h_0", h0), ("c_0", c0)):
            check_floating_tensor(name, state, dtype=x.dtype, who=type(self).__name__)
        if unbatched:
            h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
        for name, state in (("h_0", h0), ("c_0", c0)):
            if tuple(state.shape) != expected:
                shown = expected if not unbatched else (expected[0], expected[2])
                given = hx[0] if name == "h_0" else hx[1]
                raise ValueError(f"{name} must have shape {shown}, got {tuple(given.shape)}")
        return h0, c0

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        s += f", t_max={self.t_max}, gamma_init={self.gamma_init}"
        return s + (f", random_t_max={self.random_t_max}" if self.random_t_max else "")


@dataclass(frozen=True)
class _LayerParams:
    """One layer and direction of a BN-LSTM: its weights and its three batch norms, as the
    sequence functions below read them (from a :class:`BNLSTMCell`, or from a
    :class:`BNLSTM`'s ``weight_ih_l{k}`` ... and ``bn_ih_l{k}`` ...)."""

    weight_ih: Tensor
    weight_hh: Tensor
    bias_ih: Tensor | None
    bias_hh: Tensor | None
    bn_ih: RecurrentBatchNorm
    bn_hh: RecurrentBatchNorm
    bn_c: RecurrentBatchNorm
    training: bool

    @classmethod
    def of(cls, module: nn.Module, suffix: str = "") -> _LayerParams:
        """The parameters named ``weight_ih{suffix}`` ... ``bn_c{suffix}`` of ``module``."""

        def get(name: str) -> Any:
            return getattr(module, name + suffix, None)  # no bias_*: bias=False

        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "bn_ih", "bn_hh", "bn_c")
        return cls(**{name: get(name) for name in names}, training=module.training)

    @property
    def hidden_size(self) -> int:
        return int(self.weight_hh.shape[1])

    @property
    def input_size(self) -> int:
        return int(self.weight_ih.shape[1])

    @property
    def bias(self) -> Tensor | None:
        """The paper's gate bias :math:`b`: ``bias_ih + bias_hh``."""
        if self.bias_ih is None or self.bias_hh is None:
            return None
        return self.bias_ih + self.bias_hh

    def parameters(self) -> tuple[Tensor, ...]:
        tensors = [self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh]
        for bn in (self.bn_ih, self.bn_hh, self.bn_c):
            tensors += [bn.weight, bn.bias]
        return tuple(t for t in tensors if t is not None)


def _layer_weights(
    input_size: int,
    hidden_size: int,
    bias: bool,
    factory: dict[str, Any],
) -> tuple[nn.Parameter, nn.Parameter, nn.Parameter | None, nn.Parameter | None]:
    """``weight_ih (4H, I), weight_hh (4H, H), bias_ih (4H,), bias_hh (4H,)``, uninitialised,
    in ``nn.LSTM``'s layout (gates ``i, f, g, o``)."""
    h4 = 4 * hidden_size

    def new(*shape: int) -> nn.Parameter:
        return nn.Parameter(torch.empty(*shape, **factory))

    biases = (new(h4), new(h4)) if bias else (None, None)
    return new(h4, input_size), new(h4, hidden_size), *biases


def _layer_norms(
    hidden_size: int,
    t_max: int,
    gamma_init: float,
    momentum: float | None,
    eps: float,
    factory: dict[str, Any],
) -> tuple[RecurrentBatchNorm, RecurrentBatchNorm, RecurrentBatchNorm]:
    """The batch norms of the input and recurrent projections (no shift: the bias carries
    it) and of the cell."""

    def norm(features: int, bias: bool) -> RecurrentBatchNorm:
        return RecurrentBatchNorm(
            features,
            t_max,
            gamma_init=gamma_init,
            bias=bias,
            momentum=momentum,
            eps=eps,
            **factory,
        )

    return norm(4 * hidden_size, False), norm(4 * hidden_size, False), norm(hidden_size, True)


@torch.no_grad()
def _reset_layer(p: _LayerParams, forget_bias: float) -> None:
    """Input weights Xavier-uniform, recurrent weights orthogonal per gate, the forget gate's
    bias ``forget_bias`` (in ``bias_ih``; ``bias_hh`` 0), other biases 0, batch norms at
    ``gamma_init`` with their statistics reset."""
    h = p.hidden_size
    nn.init.xavier_uniform_(p.weight_ih)
    # the QR decomposition behind orthogonal_ has no float16 kernel on CPU: in float32
    exact = p.weight_hh.dtype in (torch.float32, torch.float64) or p.weight_hh.is_meta
    weight_hh = p.weight_hh if exact else torch.empty_like(p.weight_hh, dtype=torch.float32)
    for k in range(4):
        nn.init.orthogonal_(weight_hh[k * h : (k + 1) * h])
    if weight_hh is not p.weight_hh:
        with torch.no_grad():
            p.weight_hh.copy_(weight_hh)
    if p.bias_ih is not None and p.bias_hh is not None:
        nn.init.zeros_(p.bias_ih)
        nn.init.constant_(p.bias_ih[h : 2 * h], forget_bias)
        nn.init.zeros_(p.bias_hh)
    for bn in (p.bn_ih, p.bn_hh, p.bn_c):
        bn.reset_parameters()


def _one_bias_to_two(
    module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any
) -> None:
    """Load state dicts saved before the cell kept ``nn.LSTMCell``'s two biases: the single
    ``bias`` becomes ``bias_ih``, with ``bias_hh`` 0 (the same sum)."""
    old = prefix + "bias"
    if old in state_dict and prefix + "bias_ih" not in state_dict:
        bias = state_dict.pop(old)
        state_dict[prefix + "bias_ih"] = bias
        state_dict[prefix + "bias_hh"] = torch.zeros_like(bias)


def _sequence(
    p: _LayerParams,
    x: Tensor,
    h: Tensor,
    c: Tensor,
    batch_sizes: list[int] | None,
    who: str,
    mask: Tensor | None = None,
    stale_from: int | Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """:meth:`BNLSTMCell.sequence` for one layer and direction ``p``; under graph capture,
    the running rows may come as a ``mask`` ``(T, B)`` instead of ``batch_sizes``. In
    training, steps at or past ``stale_from`` are normalised with the running statistics of
    step ``stale_from - 1`` (see ``BNLSTM``'s ``random_t_max``)."""
    steps = x.shape[0]
    if batch_sizes is not None and (
        len(batch_sizes) != steps
        or any(a < b for a, b in pairwise(batch_sizes))
        or not 0 <= batch_sizes[-1] <= batch_sizes[0] <= x.shape[1]
    ):
        raise ValueError(
            f"batch_sizes must be {steps} non-increasing counts in [0, {x.shape[1]}] (a "
            f"batch sorted by decreasing length), got {batch_sizes}"
        )
    if steps == 0 or x.shape[1] == 0:
        return x.new_zeros(steps, x.shape[1], p.hidden_size), h, c
    if p.training:
        check_batch_for_statistics(
            x.shape[1] if batch_sizes is None else batch_sizes[0], tuple(x.shape), who=who
        )
    if p.training:
        for bn in (p.bn_ih, p.bn_hh, p.bn_c):
            bn.agree_across_processes()  # before any statistics, fast path or not
    synchronised = p.training and any(bn.synchronises() for bn in (p.bn_ih, p.bn_hh, p.bn_c))
    # the fast path's statistics are this process's own, and its step a Python int
    if _plain_path() or synchronised or isinstance(stale_from, Tensor):
        if batch_sizes is not None:
            sizes = torch.tensor(batch_sizes, device=x.device)
            mask = torch.arange(x.shape[1], device=x.device)[None, :] < sizes[:, None]
        return _sequence_stepwise(p, x, h, c, mask, stale_from)
    if p.training:
        return _sequence_train(p, x, h, c, batch_sizes, stale_from)
    return _sequence_eval(p, x, h, c, batch_sizes)


def draw_stale_from(
    probability: float, steps: int, device: torch.device | None = None
) -> int | Tensor | None:
    """``BNLSTM``'s ``random_t_max``: with ``probability``, a step drawn uniformly from
    ``ceil(steps / 2) .. steps - 1`` (from torch's default generator, so ``torch.manual_seed``
    repeats it), from which a training batch is normalised with earlier statistics;
    otherwise (or for a single step) ``None``.

    Under graph capture (``torch.compile``, ``torch.export``, ``torch.jit.trace``) the draw
    is a 0-d tensor on ``device`` instead, so that it stays an operation of the graph and is
    drawn again at every call: the step, or ``steps`` (no step stale) when the batch is not
    drawn. The same distribution; not the same numbers as eagerly for a seed (capture draws
    the step first, and compiled code has a random generator of its own)."""
    steps = int(steps)  # torch.jit.trace hands shapes over as tensors
    if probability <= 0.0 or steps < 2:
        return None
    if graph_capture():
        step = torch.randint((steps + 1) // 2, steps, (), device=device)
        drawn = torch.rand((), device=device) < probability
        return torch.where(drawn, step, torch.full_like(step, steps))
    # on the CPU's generator whatever the default device (a meta or CUDA default included)
    if float(torch.rand(1, device="cpu")[0]) >= probability:
        return None
    return int(torch.randint((steps + 1) // 2, steps, [1], device="cpu")[0])


def graph_capture() -> bool:
    """Whether a graph is being captured: ``torch.jit.trace``, ``torch.compile`` or
    ``torch.export``. The fast paths' hand-written backward and packed oneDNN weights do not
    trace; :func:`_sequence_stepwise` computes the same function from standard operations."""
    compiler = torch.compiler
    return bool(
        torch.jit.is_tracing()  # type: ignore[attr-defined,no-untyped-call]
        or compiler.is_compiling()  # type: ignore[attr-defined]
        or compiler.is_exporting()  # type: ignore[attr-defined]
    )


_PER_STEP: ContextVar[bool] = ContextVar("paperports_bnlstm_per_step", default=False)


@contextmanager
def per_step_computation() -> Iterator[None]:
    """Inside this context, :class:`BNLSTM` and :meth:`BNLSTMCell.sequence` run the plain
    per-step computation that graph capture runs, instead of the fast paths: the same
    function, slower. For comparison (``paperports bench bnlstm`` times it) and debugging.

    Example::

        >>> with per_step_computation():
        ...     out, _ = BNLSTM(3, 4)(torch.randn(5, 2, 3))
    """
    token = _PER_STEP.set(True)
    try:
        yield
    finally:
        _PER_STEP.reset(token)


def _plain_path() -> bool:
    """Graph capture, or :func:`per_step_computation`: the per-step computation runs."""
    return graph_capture() or _PER_STEP.get()


def _sequence_stepwise(
    p: _LayerParams,
    x: Tensor,
    h: Tensor,
    c: Tensor,
    mask: Tensor | None,
    stale_from: int | Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The straightforward computation: the three batch norms applied step by step, as
    :meth:`BNLSTMCell.step` does, with autograd recording every operation. ``mask``
    ``(T, B)``: the rows running at each step, in any order (``None``: all).

    The same function as the fast paths (the tests compare them), from standard
    operations only, so that graph capture and its backward see all of it; and the
    per-step baseline that ``paperports bench bnlstm`` measures ours against."""
    wx = F.linear(x, p.weight_ih)
    bias = p.bias
    outputs = []
    for t in range(x.shape[0]):
        m = None if mask is None else mask[t]
        # step by step, the input's norm too: a step where one sequence runs reads running
        # statistics that the steps before it have just updated
        x_proj = p.bn_ih(wx[t : t + 1], t, None if m is None else m[None], stale_from)[0]
        h, c, out = _step(p, x_proj, h, c, t, m, bias, stale_from)
        outputs.append(out)
    return torch.stack(outputs), h, c


def _step(
    p: _LayerParams,
    x_proj: Tensor,
    h: Tensor,
    c: Tensor,
    t: int,
    mask: Tensor | None,
    bias: Tensor | None,
    stale_from: int | Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Eq. 6-8 at step ``t`` from the normalised input projection: ``(h_t, c_t, output)``;
    rows outside ``mask`` ``(B,)`` keep their state and output 0."""
    m = None if mask is None else mask[None]
    gates = x_proj + p.bn_hh(F.linear(h, p.weight_hh)[None], t, m, stale_from)[0]
    if bias is not None:
        gates = gates + bias
    c_new, o = _cell_update(gates, c)
    h_new = o * torch.tanh(p.bn_c(c_new[None], t, m, stale_from)[0])
    return _masked(h_new, c_new, h, c, mask)


def _sequence_eval(
    p: _LayerParams, x: Tensor, h: Tensor, c: Tensor, batch_sizes: list[int] | None
) -> tuple[Tensor, Tensor, Tensor]:
    steps, batch, hidden = x.shape[0], x.shape[1], p.hidden_size
    s_x, b_x = p.bn_ih.affine(0, steps)
    s_hh, b_hh = p.bn_hh.affine(0, steps)
    s_c, b_c = p.bn_c.affine(0, steps)
    shift = b_x + b_hh if p.bias is None else b_x + b_hh + p.bias
    needs_grad = torch.is_grad_enabled() and any(
        v.requires_grad for v in (x, h, c, *p.parameters())
    )
    if not needs_grad and uses_kernels(x, h, c, p.weight_hh):
        return _sequence_eval_fused(p, x, h, c, batch_sizes, (s_x, shift, s_hh, s_c, b_c))
    # tanh(z) = 2 sigmoid(2 z) - 1, and on CPU sigmoid is several times faster than tanh:
    # with the g gate's and the cell norm's maps doubled, sigmoids do all the work
    double = g_gate_doubled(hidden, x)
    s_x, shift, s_hh, s_c, b_c = s_x * double, shift * double, s_hh * double, 2 * s_c, 2 * b_c
    if needs_grad:
        wx = F.linear(x, p.weight_ih)
        recurrent: Callable[[Tensor], Tensor] = partial(F.linear, weight=p.weight_hh)
    else:  # no autograd: oneDNN's kernels where available
        flat = x.reshape(steps * batch, p.input_size)
        wx = matmul_once(flat, p.weight_ih.t()).view(steps, batch, -1)
        recurrent = matmul_by(p.weight_hh, batch)
    x_steps = torch.addcmul(shift[:, None], wx, s_x[:, None])
    minus_one = x.new_tensor(-1.0)
    outputs = []
    for t, x_t in enumerate(x_steps.unbind(0)):
        n = batch if batch_sizes is None else batch_sizes[t]
        h_run, c_run = (h, c) if n == batch else (h[:n], c[:n])
        act = torch.sigmoid(torch.addcmul(x_t[:n], recurrent(h_run), s_hh[t]))
        g = torch.add(minus_one, act[:, 2 * hidden : 3 * hidden], alpha=2)  # tanh
        c_new = torch.addcmul(act[:, hidden : 2 * hidden] * c_run, act[:, :hidden], g)
        y = torch.sigmoid(torch.addcmul(b_c[t], c_new, s_c[t]))
        h_new = act[:, 3 * hidden :] * torch.add(minus_one, y, alpha=2)
        if n == batch:
            h, c = h_new, c_new
            outputs.append(h_new)
        else:  # finished sequences keep their state and output 0
            h, c = torch.cat([h_new, h[n:]]), torch.cat([c_new, c[n:]])
            outputs.append(F.pad(h_new, (0, 0, 0, batch - n)))
    return torch.stack(outputs), h, c


def _sequence_eval_fused(
    p: _LayerParams,
    x: Tensor,
    h: Tensor,
    c: Tensor,
    batch_sizes: list[int] | None,
    maps: tuple[Tensor, Tensor, Tensor, Tensor, Tensor],
) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`_sequence_eval` with the fused kernels (``bn_lstm_kernels``): the input
    products in one matrix product, then the loop over steps in C++ (per step, the
    recurrent product and one pass for the rest). ``maps``: the per-step affine maps
    ``(s_x, shift, s_hh, s_c, b_c)`` of the three norms."""
    s_x, shift, s_hh, s_c, b_c = maps
    steps, batch, hidden = x.shape[0], x.shape[1], p.hidden_size
    flat = x.reshape(steps * batch, p.input_size)
    wx = matmul_once(flat, p.weight_ih.t()).view(steps, batch, -1)
    ragged = batch_sizes is not None and batch_sizes[-1] < batch
    hs, cs = x.new_empty(steps + 1, batch, hidden), x.new_empty(steps + 1, batch, hidden)
    hs[0], cs[0] = h, c
    weight, onednn = packed_weight(p.weight_hh, batch)
    ops().eval_sequence(wx, s_x, shift, s_hh, s_c, b_c, weight, onednn, batch_sizes or [], hs, cs)
    if ragged:
        assert batch_sizes is not None
        sizes = torch.tensor(batch_sizes, device=x.device)
        running = sizes[:, None] > torch.arange(batch, device=x.device)
        return hs[1:] * running[..., None].to(x.dtype), hs[steps].clone(), cs[steps].clone()
    return hs[1:], hs[steps].clone(), cs[steps].clone()


def _sequence_train(
    p: _LayerParams,
    x: Tensor,
    h: Tensor,
    c: Tensor,
    batch_sizes: list[int] | None,
    stale_from: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    steps = x.shape[0]
    # The steps where one sequence runs (a tail: sizes never increase) and the steps from
    # stale_from on use running statistics, which the steps before them update: as the
    # step-by-step cell does. Each is a segment of its own, after those steps' update.
    cuts = {0, steps}
    if batch_sizes is not None and 1 in batch_sizes:
        cuts.add(batch_sizes.index(1))
    if stale_from is not None and stale_from < steps:
        cuts.add(stale_from)
    bounds = sorted(cuts)
    if len(bounds) == 2:
        return _train_segment(p, x, h, c, batch_sizes, 0)
    outputs = []
    for begin, end in pairwise(bounds):
        sizes = None if batch_sizes is None else batch_sizes[begin:end]
        stale = stale_from if stale_from is not None and begin >= stale_from else None
        out, h, c = _train_segment(p, x[begin:end], h, c, sizes, begin, stale)
        outputs.append(out)
    return torch.cat(outputs), h, c


def _train_segment(
    p: _LayerParams,
    x: Tensor,
    h: Tensor,
    c: Tensor,
    batch_sizes: list[int] | None,
    start: int,
    stale_from: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Training over steps ``start .. start + T - 1`` with :class:`BNLSTMSequence`, then
    the running statistics' update; with ``stale_from`` (at most ``start``), every step
    normalised with the running statistics of step ``stale_from - 1``."""
    bn_x, bn_h, bn_c = p.bn_ih, p.bn_hh, p.bn_c
    output, h, c, stats = BNLSTMSequence.apply(  # type: ignore[no-untyped-call]
        x,
        p.weight_ih,
        h,
        c,
        p.weight_hh,
        bn_x.weight,
        p.bias,
        bn_h.weight,
        bn_c.weight,
        bn_c.bias,
        batch_sizes,
        (bn_x.eps, bn_h.eps, bn_c.eps),
        _fixed_statistics(p, start, x.shape[0], batch_sizes, stale_from),
        stale_from is not None,
    )
    steps, batch = x.shape[0], x.shape[1]
    sizes = [batch] * steps if batch_sizes is None else batch_sizes
    count = torch.tensor(sizes, dtype=x.dtype, device=x.device)[:, None]
    hidden = p.hidden_size
    for k, (bn, features) in enumerate(((bn_x, 4 * hidden), (bn_h, 4 * hidden), (bn_c, hidden))):
        bn.update_statistics(
            start, stats[2 * k, :, :features], stats[2 * k + 1, :, :features], count
        )
    return output, h, c


@torch.no_grad()
def _fixed_statistics(
    p: _LayerParams,
    start: int,
    steps: int,
    batch_sizes: list[int] | None,
    stale_from: int | None = None,
) -> Tensor | None:
    """For training steps where one sequence runs (the tail of a batch whose longest
    sequence is unique), or for all steps of a segment past ``stale_from``, the running
    statistics that stand in for the batch's, as in :class:`RecurrentBatchNorm`:
    ``(3, 2, T, 4H)``, the mean and ``1 / sqrt(var + eps)`` of the norms ``x, h, c`` (``c``
    in the first ``H`` columns) at steps ``start ..``; ``None`` if no step needs them."""
    if stale_from is None and (batch_sizes is None or 1 not in batch_sizes):
        return None
    upto = None if stale_from is None else stale_from - 1
    out = p.weight_ih.new_zeros(3, 2, steps, 4 * p.hidden_size)
    for k, bn in enumerate((p.bn_ih, p.bn_hh, p.bn_c)):
        mean, var = bn.running_statistics(start, steps, upto)
        out[k, 0, :, : bn.num_features] = mean
        out[k, 1, :, : bn.num_features] = torch.rsqrt(var + bn.eps)
    return out


def _cell_update(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    r"""The LSTM update around the cell's batch norm: ``c_t`` and the output gate
    :math:`\sigma(\tilde o_t)`, from the stacked gate pre-activations ``(i, f, g, o)``."""
    i, f, g, o = gates.chunk(4, dim=1)
    return torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g), torch.sigmoid(o)


def _masked(
    h_new: Tensor, c_new: Tensor, h: Tensor, c: Tensor, mask: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(h, c, output)`` of a step: finished sequences keep their state and output 0."""
    if mask is None:
        return h_new, c_new, h_new
    keep = mask[:, None]
    return torch.where(keep, h_new, h), torch.where(keep, c_new, c), h_new * keep


def _suffix(layer: int, direction: int) -> str:
    """``nn.LSTM``'s name suffix: ``_l{layer}``, and ``_reverse`` for the reverse direction."""
    return f"_l{layer}" + ("_reverse" if direction == 1 else "")


def _cells_to_layer_names(
    module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any
) -> None:
    """Load state dicts saved before :class:`BNLSTM` took ``nn.LSTM``'s parameter names:
    ``cells.{k}.weight_ih`` becomes ``weight_ih_l{layer}{_reverse}``, ``cells.{k}.bias``
    becomes ``bias_ih_l...`` (with ``bias_hh_l...`` 0), ``cells.{k}.bn_c.*`` becomes
    ``bn_c_l....*``."""
    directions = 2 if getattr(module, "bidirectional", False) else 1
    old = prefix + "cells."
    for key in [k for k in state_dict if k.startswith(old)]:
        index, _, rest = key[len(old) :].partition(".")
        if not index.isdigit():
            continue
        suffix = _suffix(*divmod(int(index), directions))
        name, dot, attribute = rest.partition(".")
        value = state_dict.pop(key)
        if name == "bias" and not dot:
            state_dict[prefix + "bias_ih" + suffix] = value
            state_dict[prefix + "bias_hh" + suffix] = torch.zeros_like(value)
        else:
            state_dict[prefix + name + suffix + dot + attribute] = value
