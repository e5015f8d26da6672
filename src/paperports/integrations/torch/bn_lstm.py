r"""BN-LSTM: the LSTM of "Recurrent Batch Normalization" as a drop-in for ``torch.nn.LSTM``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from paperports.integrations.torch.recurrent_batch_norm import RecurrentBatchNorm

__all__ = ["BNLSTM", "BNLSTMCell"]


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
    ) -> None:
        super().__init__()
        if input_size < 1 or hidden_size < 1:
            raise ValueError(
                f"input_size and hidden_size must be >= 1, got {input_size}, {hidden_size}"
            )
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.forget_bias = forget_bias
        h4 = 4 * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(h4, input_size))
        self.weight_hh = nn.Parameter(torch.empty(h4, hidden_size))
        self.bias = nn.Parameter(torch.empty(h4)) if bias else None

        def norm(features: int, bias: bool) -> RecurrentBatchNorm:
            return RecurrentBatchNorm(
                features, t_max, gamma_init=gamma_init, bias=bias, momentum=momentum, eps=eps
            )

        self.bn_ih = norm(h4, bias=False)  # beta_x = 0: the bias b carries the shift
        self.bn_hh = norm(h4, bias=False)  # beta_h = 0
        self.bn_c = norm(hidden_size, bias=True)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Input weights Xavier-uniform, recurrent weights orthogonal per gate, forget-gate
        bias ``forget_bias``, other biases 0, :math:`\\gamma` = ``gamma_init``."""
        h = self.hidden_size
        nn.init.xavier_uniform_(self.weight_ih)
        for k in range(4):
            nn.init.orthogonal_(self.weight_hh.data[k * h : (k + 1) * h])
        if self.bias is not None:
            nn.init.zeros_(self.bias)
            nn.init.constant_(self.bias[h : 2 * h], self.forget_bias)
        for bn in (self.bn_ih, self.bn_hh, self.bn_c):
            bn.reset_parameters()

    def forward(
        self,
        input: Tensor,
        hx: tuple[Tensor, Tensor] | None = None,
        t: int = 0,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        if input.dim() != 2 or input.shape[1] != self.input_size:
            raise ValueError(
                f"BNLSTMCell expects input of shape (batch, {self.input_size}), "
                f"got {tuple(input.shape)}"
            )
        if hx is None:
            zeros = input.new_zeros(input.shape[0], self.hidden_size)
            hx = (zeros, zeros)
        m = None if mask is None else mask[None]
        x_proj = self.bn_ih(F.linear(input, self.weight_ih)[None], t, m)[0]
        return self.step(x_proj, hx[0], hx[1], t, mask)

    def step(
        self, x_proj: Tensor, h: Tensor, c: Tensor, t: int, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """One step from the already normalised input projection ``BN(W_x x_t)``."""
        m = None if mask is None else mask[None]
        gates = x_proj + self.bn_hh(F.linear(h, self.weight_hh)[None], t, m)[0]
        if self.bias is not None:
            gates = gates + self.bias
        c_new, o = _cell_update(gates, c)
        h_new = o * torch.tanh(self.bn_c(c_new[None], t, m)[0])
        h, c, _ = _masked(h_new, c_new, h, c, mask)  # finished sequences keep their state
        return h, c

    def sequence(
        self, x: Tensor, h: Tensor, c: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Run over ``x`` ``(T, B, I)``; returns ``(output (T, B, H), h_T, c_T)``.

        The same computation as :meth:`step` at each ``t``, arranged for speed: the input
        projection and its batch norm run for all steps at once; in evaluation the recurrent
        and cell batch norms are per-step affine maps computed once, with the bias and
        shifts folded into the input side; in training the running statistics are updated
        once, for all steps, after the loop.
        """
        steps = x.shape[0]
        x_proj = self.bn_ih(F.linear(x, self.weight_ih), 0, mask)
        if self.bias is not None:
            x_proj = x_proj + self.bias
        if self.training:
            return self._sequence_train(x_proj, h, c, mask)
        s_hh, b_hh = self.bn_hh.affine(0, steps)
        s_c, b_c = self.bn_c.affine(0, steps)
        x_proj = x_proj + b_hh[:, None]
        outputs = []
        for t in range(steps):
            gates = torch.addcmul(x_proj[t], F.linear(h, self.weight_hh), s_hh[t])
            c_new, o = _cell_update(gates, c)
            h_new = o * torch.tanh(torch.addcmul(b_c[t], c_new, s_c[t]))
            h, c, out = _masked(h_new, c_new, h, c, None if mask is None else mask[t])
            outputs.append(out)
        return torch.stack(outputs), h, c

    def _sequence_train(
        self, x_proj: Tensor, h: Tensor, c: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        outputs = []
        stats_hh: list[tuple[Tensor, Tensor, Tensor]] = []
        stats_c: list[tuple[Tensor, Tensor, Tensor]] = []
        for t in range(x_proj.shape[0]):
            m = None if mask is None else mask[t]
            hh, *st_hh = self.bn_hh.normalise_step(F.linear(h, self.weight_hh), m)
            c_new, o = _cell_update(x_proj[t] + hh, c)
            cc, *st_c = self.bn_c.normalise_step(c_new, m)
            h_new = o * torch.tanh(cc)
            stats_hh.append(tuple(st_hh))  # type: ignore[arg-type]
            stats_c.append(tuple(st_c))  # type: ignore[arg-type]
            h, c, out = _masked(h_new, c_new, h, c, m)
            outputs.append(out)
        for bn, stats in ((self.bn_hh, stats_hh), (self.bn_c, stats_c)):
            mean, var, count = (torch.stack(s) for s in zip(*stats, strict=True))
            bn.update_statistics(0, mean, var, count)
        return torch.stack(outputs), h, c

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias is not None}"


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
        *,
        t_max: int = 1000,
        gamma_init: float = 0.1,
        forget_bias: float = 1.0,
        momentum: float | None = 0.1,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {dropout}")
        if t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {t_max}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.batch_first = batch_first
        self.dropout = dropout
        self.bidirectional = bidirectional
        self.t_max = t_max
        self.gamma_init = gamma_init
        d = 2 if bidirectional else 1
        self.cells = nn.ModuleList(
            BNLSTMCell(
                input_size if layer == 0 else d * hidden_size,
                hidden_size,
                bias,
                t_max=t_max,
                gamma_init=gamma_init,
                forget_bias=forget_bias,
                momentum=momentum,
                eps=eps,
            )
            for layer in range(num_layers)
            for _ in range(d)
        )

    def reset_parameters(self) -> None:
        for cell in self.cells:
            cell.reset_parameters()  # type: ignore[operator]

    def forward(
        self,
        input: Tensor | PackedSequence,
        hx: tuple[Tensor, Tensor] | None = None,
        lengths: Tensor | None = None,
    ) -> tuple[Tensor | PackedSequence, tuple[Tensor, Tensor]]:
        packed = isinstance(input, PackedSequence)
        if isinstance(input, PackedSequence):
            if lengths is not None:
                raise ValueError("pass lengths only with a padded tensor, not a PackedSequence")
            x, lengths = pad_packed_sequence(input)
            unbatched = False
        else:
            x = input
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
        mask = self._mask(lengths, n_steps, batch, x.device)
        h0, c0 = self._initial_state(hx, batch, unbatched, x)

        d = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(d):
                k = layer * d + direction
                cell: BNLSTMCell = self.cells[k]  # type: ignore[assignment]
                seq = layer_in if direction == 0 else _reverse(layer_in, lengths)
                out, h, c = cell.sequence(seq, h0[k], c0[k], mask)
                outs.append(out if direction == 0 else _reverse(out, lengths))
                h_n.append(h)
                c_n.append(c)
            layer_in = torch.cat(outs, dim=-1) if d == 2 else outs[0]
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, training=True)
        h_stack, c_stack = torch.stack(h_n), torch.stack(c_n)

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
        return output, (h_stack, c_stack)

    def _mask(
        self, lengths: Tensor | None, steps: int, batch: int, device: torch.device
    ) -> Tensor | None:
        if lengths is None:
            return None
        lengths = torch.as_tensor(lengths)
        if lengths.shape != (batch,):
            raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}")
        if int(lengths.max()) > steps or int(lengths.min()) < 1:
            raise ValueError(
                f"lengths must lie in [1, {steps}] (the sequence length); got values in "
                f"[{int(lengths.min())}, {int(lengths.max())}]"
            )
        return torch.arange(steps, device=device)[:, None] < lengths.to(device)[None, :]

    def _initial_state(
        self, hx: tuple[Tensor, Tensor] | None, batch: int, unbatched: bool, x: Tensor
    ) -> tuple[Tensor, Tensor]:
        d = 2 if self.bidirectional else 1
        expected = (d * self.num_layers, batch, self.hidden_size)
        if hx is None:
            zeros = x.new_zeros(expected)
            return zeros, zeros
        h0, c0 = hx
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
        return s + f", t_max={self.t_max}, gamma_init={self.gamma_init}"


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


def _reverse(x: Tensor, lengths: Tensor | None) -> Tensor:
    """Reverse each sequence of ``x`` ``(T, B, F)`` within its own length (an involution)."""
    if lengths is None:
        return x.flip(0)
    steps = x.shape[0]
    t = torch.arange(steps, device=x.device)[:, None]
    lens = lengths.to(x.device)[None, :]
    index = torch.where(t < lens, lens - 1 - t, t)  # (T, B)
    return x.gather(0, index[..., None].expand_as(x))
