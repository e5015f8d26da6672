r"""BERT (Devlin et al. 2018, arXiv:1810.04805) for transformers: the encoder and its heads.

The model, as the paper defines it:

- input representation: :math:`E = \mathrm{LayerNorm}(E_\mathrm{token} + E_\mathrm{position}
  + E_\mathrm{segment})`, then dropout; ``[CLS]`` first, ``[SEP]`` after each sentence;
- L identical layers, each :math:`x \leftarrow \mathrm{LayerNorm}(x +
  \mathrm{Dropout}(\mathrm{MultiHead}(x)))` then :math:`x \leftarrow \mathrm{LayerNorm}(x +
  \mathrm{Dropout}(W_2\, \mathrm{GELU}(W_1 x)))`, with bidirectional attention
  :math:`\mathrm{softmax}(Q K^\top / \sqrt{d_k} + M)\, V` per head, where :math:`M` is 0 for
  real tokens and :math:`-\infty` for padding (no causal mask: every token sees every other);
- the pooler :math:`\tanh(W_p h_\mathrm{[CLS]})` for sentence-level tasks;
- pre-training heads: masked LM (transform, then a decoder tied to the token embeddings, with
  its own bias) and next-sentence prediction (a linear layer on the pooled output).

Parameter names follow HF-format BERT checkpoints (``embeddings.word_embeddings.weight``,
``encoder.layer.N.attention.self.query.weight``, ``cls.predictions.bias`` ...), so those
checkpoints load with no missing or unexpected keys. Attention runs either as explicit
matrix products (``attn_implementation="eager"``) or through
:func:`torch.nn.functional.scaled_dot_product_attention` (``"sdpa"``, the default), always
with ``is_causal=False``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    NextSentencePredictorOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils.generic import ModelOutput

from paperports._checks import check_floating_tensor, check_index_tensor, values_known
from paperports.integrations.transformers._heads import (
    CheckedPreTrainedModel,
    check_attention_mask,
    check_labels,
    check_num_labels,
    check_token_ids,
    cross_entropy_ignoring,
    finish_output,
    sequence_classification_loss,
)
from paperports.integrations.transformers.bert.configuration_bert import BertConfig

__all__ = [
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForNextSentencePrediction",
    "BertForPreTraining",
    "BertForPreTrainingOutput",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPreTrainedModel",
]

_ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")


@dataclass(frozen=True)
class Packing:
    """A padded batch's real tokens, packed into one row (the padding-free path).

    ``index`` holds the flat positions ``b * seq_len + t`` of the real tokens, sequence by
    sequence; ``lengths`` how many each sequence has. Passed to the layers in the place of
    an attention mask, it makes attention run per sequence."""

    index: torch.Tensor
    lengths: list[int]
    batch: int
    seq_len: int

    @classmethod
    def of(cls, config: BertConfig, attention_mask: torch.Tensor | None) -> Packing | None:
        """The packing of a 2-D mask that pads some sequences and keeps every first token
        (the pooler reads it); ``None`` where the padded computation runs instead."""
        if (
            not config.padding_free
            or attention_mask is None
            or attention_mask.dim() != 2
            or torch.compiler.is_compiling()
            or torch.jit.is_tracing()  # type: ignore[attr-defined]  # a trace keeps the lengths
            or not values_known(attention_mask)
        ):
            return None
        mask = attention_mask.bool()
        if bool(mask.all()) or not bool(mask[:, 0].all()):
            return None
        batch, seq_len = mask.shape
        lengths = [int(n) for n in mask.sum(dim=1).tolist()]
        return cls(mask.flatten().nonzero().squeeze(1), lengths, batch, seq_len)

    def pack(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """``(batch, seq_len, ...)`` -> ``(1, tokens, ...)``."""
        if x is None:
            return None
        return x.reshape(self.batch * self.seq_len, *x.shape[2:])[self.index][None]

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``(1, tokens, features)`` -> ``(batch, seq_len, features)``, zeros at the padding."""
        padded = x.new_zeros(self.batch * self.seq_len, x.shape[-1]).index_copy(0, self.index, x[0])
        return padded.view(self.batch, self.seq_len, x.shape[-1])


Mask = torch.Tensor | Packing | None
"""What the layers take as an attention mask: a tensor, a :class:`Packing`, or none."""


class BertEmbeddings(nn.Module):
    """Token + position + segment embeddings, LayerNorm, dropout (paper, figure 2)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.position_ids: torch.Tensor
        self.register_buffer(
            "position_ids", torch.arange(config.max_position_embeddings)[None], persistent=False
        )

    def forward(
        self,
        input_ids: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
    ) -> torch.Tensor:
        if inputs_embeds is None:
            assert input_ids is not None
            inputs_embeds = self.word_embeddings(input_ids)
        seq_len = inputs_embeds.shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_len]
        embeddings = inputs_embeds + self.position_embeddings(position_ids)
        if token_type_ids is None:
            # All tokens in segment A: add row 0 without building an index tensor.
            embeddings = embeddings + self.token_type_embeddings.weight[0]
        else:
            embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        out: torch.Tensor = self.dropout(self.LayerNorm(embeddings))
        return out


class BertSelfAttention(nn.Module):
    r"""Multi-head scaled dot-product self-attention, bidirectional.

    .. math::
        \mathrm{head}_i = \mathrm{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{d_k}} + M\right) V_i
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0:
            raise ValueError(
                f"BertConfig: hidden_size ({config.hidden_size}) must be divisible by "
                f"num_attention_heads ({config.num_attention_heads}) to build a model; each "
                "head gets hidden_size / num_attention_heads features"
            )
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.num_attention_heads, self.attention_head_size).transpose(
            1, 2
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Mask,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query = self._heads(self.query(hidden_states))
        key = self._heads(self.key(hidden_states))
        value = self._heads(self.value(hidden_states))
        probs: torch.Tensor | None = None
        if isinstance(attention_mask, Packing):  # (1, heads, tokens, d): each sequence alone
            split = [t.split(attention_mask.lengths, dim=2) for t in (query, key, value)]
            parts = [self._attend(q, k, v, None, False)[0] for q, k, v in zip(*split, strict=True)]
            context = torch.cat(parts, dim=2)
        else:
            context, probs = self._attend(query, key, value, attention_mask, output_attentions)
        batch, _, seq_len, _ = context.shape
        context = context.transpose(1, 2).reshape(batch, seq_len, self.config.hidden_size)
        return context, probs

    def _attend(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention of ``(batch, heads, length, d)`` queries, keys and values: the
        context in that shape, and the probabilities on the eager path."""
        dropout = self.dropout.p if self.training else 0.0
        probs: torch.Tensor | None = None
        if self.config._attn_implementation == "sdpa" and not output_attentions:
            # A boolean mask (True where a query may attend) or an additive one. is_causal=False
            # keeps BERT bidirectional (the flag is what would make it a left-to-right model).
            context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=attention_mask, dropout_p=dropout, is_causal=False
            )
        else:
            scores = query @ key.transpose(-1, -2) / math.sqrt(self.attention_head_size)
            if attention_mask is not None and attention_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
            elif attention_mask is not None:  # an additive 4-D mask, as HF's BERT takes
                scores = scores + attention_mask
            probs = scores.softmax(dim=-1)
            context = self.dropout(probs) @ value
        return context, probs


class _AddAndNorm(nn.Module):
    """``LayerNorm(residual + Dropout(W x + b))``: how every sub-layer ends."""

    def __init__(self, config: BertConfig, in_features: int) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)
        return out


class BertSelfOutput(_AddAndNorm):
    """Output projection of the attention, dropout, residual, LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config, config.hidden_size)


class BertAttention(nn.Module):
    """The attention sub-layer: self-attention, then :class:`BertSelfOutput`."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Mask,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context, probs = self.self(hidden_states, attention_mask, output_attentions)
        return self.output(context, hidden_states), probs


class BertIntermediate(nn.Module):
    """First feed-forward layer and its activation (GELU in the paper)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.intermediate_act_fn(self.dense(hidden_states))
        return out


class BertOutput(_AddAndNorm):
    """Second feed-forward layer, dropout, residual, LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config, config.intermediate_size)


class BertLayer(GradientCheckpointingLayer):
    """One Transformer encoder layer; checkpointed when gradient checkpointing is on."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Mask = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, probs = self.attention(hidden_states, attention_mask, output_attentions)
        return self.output(self.intermediate(attended), attended), probs


class BertEncoder(nn.Module):
    """The stack of ``num_hidden_layers`` :class:`BertLayer`."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))


class BertPooler(nn.Module):
    """:math:`\\tanh(W_p h_{[CLS]} + b_p)`: the sentence representation."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.activation(self.dense(hidden_states[:, 0]))
        return out


class BertPredictionHeadTransform(nn.Module):
    """Dense, activation, LayerNorm: the MLM head's transform before the decoder."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))
        return out


class BertLMPredictionHead(nn.Module):
    """The MLM head: transform, then a decoder whose weight is the token embedding matrix
    (tied) and whose bias is the output-only ``bias``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.decoder(self.transform(hidden_states))
        return out


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertOnlyNSPHead(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertPreTrainedModel(CheckedPreTrainedModel):
    """Initialisation, loading and attention-backend settings shared by the BERT models.

    Weights are initialised from a truncated normal with standard deviation
    ``config.initializer_range`` (the paper's reference code), LayerNorms to the identity and
    biases to zero. ``from_pretrained`` reads HF-format BERT checkpoints (config
    ``model_type`` ``"bert"``) as well as this package's own; it raises a ``ValueError``
    naming the keys when the checkpoint lacks the embeddings or encoder weights (a checkpoint
    that is not BERT-shaped), instead of silently returning a randomly initialised encoder.
    Heads missing from a checkpoint (a classifier on top of a pre-trained encoder) are
    initialised, as in transformers.
    """

    config_class = BertConfig
    _required_weights = ("embeddings.", "encoder.")
    base_model_prefix = "bert"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["BertEmbeddings", "BertLayer"]  # noqa: RUF012 (transformers' API)

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        # transformers guesses from the module's source whether attention reads
        # config._attn_implementation at call time; ours does ("eager" or "sdpa"), so
        # model.set_attn_implementation(...) switches it, as it does HF's BERT.
        return True

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
            if module.padding_idx is not None and not getattr(
                module.weight, "_is_hf_initialized", False
            ):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        if isinstance(module, BertLMPredictionHead):
            init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1])[None])


def _check_inputs(
    config: BertConfig,
    dtype: torch.dtype,
    input_ids: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
) -> tuple[int, int]:
    """Validate the inputs before any compute; return ``(batch, seq_len)``."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("pass exactly one of input_ids and inputs_embeds")
    if input_ids is not None:
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must be (batch, sequence_length), got shape {tuple(input_ids.shape)}"
            )
        check_token_ids("input_ids", input_ids, config.vocab_size, "vocab_size")
        batch, seq_len = input_ids.shape
    else:
        assert inputs_embeds is not None
        check_floating_tensor("inputs_embeds", inputs_embeds, dtype=dtype)
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.hidden_size:
            raise ValueError(
                f"inputs_embeds must be (batch, sequence_length, {config.hidden_size}) "
                f"(config.hidden_size), got shape {tuple(inputs_embeds.shape)}"
            )
        batch, seq_len = inputs_embeds.shape[:2]
    if seq_len == 0:
        raise ValueError("the input has no tokens (sequence_length 0); BERT needs at least one")
    if position_ids is None and seq_len > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {seq_len} exceeds config.max_position_embeddings "
            f"({config.max_position_embeddings}); truncate the input (for example "
            f"tokenizer(..., truncation=True, max_length={config.max_position_embeddings}))"
        )
    if position_ids is not None:
        if position_ids.shape[-1] != seq_len or position_ids.dim() not in (1, 2):
            raise ValueError(
                f"position_ids must be (sequence_length,) or (batch, sequence_length) = "
                f"({batch}, {seq_len}), got shape {tuple(position_ids.shape)}"
            )
        check_token_ids(
            "position_ids", position_ids, config.max_position_embeddings, "max_position_embeddings"
        )
    if token_type_ids is not None:
        if token_type_ids.shape != (batch, seq_len):
            raise ValueError(
                f"token_type_ids must be (batch, sequence_length) = ({batch}, {seq_len}), got "
                f"shape {tuple(token_type_ids.shape)}"
            )
        check_token_ids("token_type_ids", token_type_ids, config.type_vocab_size, "type_vocab_size")
    if attention_mask is not None:
        if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4:
            _check_4d_mask(attention_mask, batch, seq_len, config.num_attention_heads, dtype)
            return batch, seq_len
        check_attention_mask(attention_mask)
        if attention_mask.shape not in ((batch, seq_len), (batch, seq_len, seq_len)):
            raise ValueError(
                f"attention_mask must be (batch, sequence_length) = ({batch}, {seq_len}) with "
                f"1 for tokens to attend to and 0 for padding, (batch, {seq_len}, {seq_len}) "
                f"per query, or 4-D (batch, 1 or heads, {seq_len}, {seq_len}) as HF's BERT "
                f"takes; got shape {tuple(attention_mask.shape)}"
            )
    return batch, seq_len


def _check_4d_mask(
    mask: torch.Tensor, batch: int, seq_len: int, heads: int, dtype: torch.dtype
) -> None:
    """A 4-D mask as HF's BERT takes it, broadcastable to ``(batch, heads, query, key)``:
    boolean (True: attend), 0/1 integers (1: attend), or additive floats (0: attend, a large
    negative number: masked) in the model's dtype."""
    expected = (batch, heads, seq_len, seq_len)
    leading = zip(mask.shape[:3], expected[:3], strict=True)
    if any(size not in (1, full) for size, full in leading) or mask.shape[3] != seq_len:
        raise ValueError(
            f"a 4-D attention_mask must broadcast to (batch, heads, query, key) = {expected}, "
            f"with the keys in full; got shape {tuple(mask.shape)}"
        )
    if mask.is_floating_point():
        check_floating_tensor("attention_mask (4-D, additive)", mask, dtype=dtype)
        if values_known(mask) and bool(mask.isnan().any() | (mask > 0).any()):
            raise ValueError(
                "a floating 4-D attention_mask is additive, as in HF's BERT: 0 where a query "
                "may attend and a large negative number where it may not; got NaN or "
                "positive values"
            )
    else:
        check_attention_mask(mask)


def _boolean_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """``(batch, [query,] key)`` 1/0 mask -> boolean ``(batch, 1, query | 1, key)``, or None;
    a 4-D mask passes (additive floats) or becomes boolean (0/1).

    None when every token is attended to: SDPA then runs its unmasked kernel.
    """
    if attention_mask is None:
        return None
    if attention_mask.dim() == 4:  # HF's format: additive floats kept, 0/1 as booleans
        return attention_mask if attention_mask.is_floating_point() else attention_mask.bool()
    mask = attention_mask.bool()
    if values_known(mask) and bool(mask.all()):
        return None
    return mask[:, None, None, :] if mask.dim() == 2 else mask[:, None]


class BertModel(BertPreTrainedModel):
    """The BERT encoder: embeddings, ``num_hidden_layers`` bidirectional Transformer layers
    and (unless ``add_pooling_layer=False``) the pooler.

    Examples:

    ```python
    >>> import torch
    >>> from paperports.integrations.transformers import BertConfig, BertModel
    >>> model = BertModel(BertConfig(hidden_size=64, num_hidden_layers=2,
    ...                              num_attention_heads=4, intermediate_size=128))
    >>> out = model(torch.tensor([[101, 2023, 102]]))
    >>> out.last_hidden_state.shape, out.pooler_output.shape
    (torch.Size([1, 3, 64]), torch.Size([1, 64]))
    ```
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.embeddings.word_embeddings = value  # type: ignore[assignment]

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutputWithPoolingAndCrossAttentions | tuple[Any, ...]:
        r"""Encode a batch.

        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
                WordPiece ids in `[0, config.vocab_size)`.
            attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
                1 for tokens to attend to, 0 for padding; `(batch_size, sequence_length,
                sequence_length)` gives a mask per query; a 4-D mask `(batch_size, 1 or heads,
                sequence_length, sequence_length)` is taken as HF's BERT takes it (booleans,
                True to attend, or additive floats, 0 to attend).
            token_type_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`, *optional*):
                Segment ids, 0 for sentence A and 1 for sentence B; all 0 when omitted.
            position_ids (`torch.LongTensor`, *optional*):
                Positions; `0 .. sequence_length - 1` when omitted.
            inputs_embeds (`torch.Tensor` of shape `(batch_size, seq_len, hidden_size)`):
                Token embeddings to use instead of `input_ids`.
            output_attentions (`bool`, *optional*):
                Also return each layer's attention probabilities (computed with the eager
                path for this call, since SDPA does not expose them).
            output_hidden_states (`bool`, *optional*):
                Also return the embeddings and every layer's output.
            return_dict (`bool`, *optional*):
                `False` returns a plain tuple.
        """
        config = cast(BertConfig, self.config)
        if config._attn_implementation not in _ATTENTION_IMPLEMENTATIONS:
            raise ValueError(
                f"attn_implementation must be one of {_ATTENTION_IMPLEMENTATIONS}, got "
                f"{config._attn_implementation!r}"
            )
        _check_inputs(
            config,
            self.dtype,
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
        )
        output_attentions = bool(
            output_attentions if output_attentions is not None else config.output_attentions
        )
        output_hidden_states = bool(
            output_hidden_states
            if output_hidden_states is not None
            else config.output_hidden_states
        )
        packing = None if output_attentions else Packing.of(config, attention_mask)
        mask: Mask = _boolean_mask(attention_mask) if packing is None else packing
        if packing is not None:  # the real tokens only, positions as in the padded batch
            batch, seq_len = packing.batch, packing.seq_len
            if position_ids is None:
                position_ids = self.embeddings.position_ids[:, :seq_len]
            position_ids = position_ids.expand(batch, seq_len)  # (seq_len,) and (1, seq_len) too
            input_ids, token_type_ids, position_ids, inputs_embeds = (
                packing.pack(t) for t in (input_ids, token_type_ids, position_ids, inputs_embeds)
            )
        hidden = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        all_hidden: tuple[torch.Tensor, ...] = (hidden,)
        all_attentions: tuple[torch.Tensor, ...] = ()
        for layer in self.encoder.layer:
            hidden, probs = layer(hidden, mask, output_attentions)
            all_hidden += (hidden,)
            if probs is not None:
                all_attentions += (probs,)
        if packing is not None:
            hidden = packing.pad(hidden)
            if output_hidden_states:
                all_hidden = tuple(packing.pad(h) for h in all_hidden)
        pooled = self.pooler(hidden) if self.pooler is not None else None
        output = BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=hidden,
            pooler_output=pooled,
            hidden_states=all_hidden if output_hidden_states else None,
            attentions=all_attentions if output_attentions else None,
        )
        return finish_output(output, return_dict, config)


@dataclass
class BertForPreTrainingOutput(ModelOutput):
    """Output of :class:`BertForPreTraining`.

    Args:
        loss (`torch.Tensor`, *optional*): MLM loss plus NSP loss, when both labels are given.
        prediction_logits (`torch.Tensor` of shape `(batch_size, sequence_length, vocab_size)`):
            Masked-LM scores.
        seq_relationship_logits (`torch.Tensor` of shape `(batch_size, 2)`):
            Next-sentence scores: index 0 "B follows A", index 1 "B is random".
        hidden_states, attentions: as :class:`BertModel`'s.
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def _mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss: the mean over the chosen tokens (``-100`` elsewhere)."""
    _check_label_shape("labels", labels, tuple(logits.shape[:2]))
    check_labels("labels", labels, logits.shape[-1], ignore=True)
    return cross_entropy_ignoring(logits, labels)


def _class_loss(name: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of one class per row of ``logits`` ``(N, K)``."""
    _check_label_shape(name, labels, (logits.shape[0],))
    check_labels(name, labels, logits.shape[-1], ignore=False)
    return F.cross_entropy(logits, labels.reshape(-1))


def _check_label_shape(name: str, labels: torch.Tensor, shape: tuple[int, ...]) -> None:
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(labels).__name__}")
    if labels.numel() != math.prod(shape):
        raise ValueError(f"{name} must have shape {shape}, got {tuple(labels.shape)}")


class _BertWithEncoder(BertPreTrainedModel):
    """A head model: ``self.bert`` plus a head; runs the encoder with the common arguments."""

    bert: BertModel

    def _encode(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        output_attentions: bool | None,
        output_hidden_states: bool | None,
    ) -> BaseModelOutputWithPoolingAndCrossAttentions:
        out = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        assert isinstance(out, BaseModelOutputWithPoolingAndCrossAttentions)
        return out


_TIED_MLM = {
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}


class BertForPreTraining(_BertWithEncoder):
    """BERT with both pre-training heads: masked LM and next-sentence prediction.

    The loss is the sum of the mean MLM cross-entropy over the masked positions (``labels``,
    ``-100`` elsewhere, as ``DataCollatorForLanguageModeling`` writes them) and the NSP
    cross-entropy (``next_sentence_label``: 0 when B follows A, 1 when B is random).
    """

    _tied_weights_keys = _TIED_MLM

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Module:
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.cls.predictions.decoder = new_embeddings  # type: ignore[assignment]
        self.cls.predictions.bias = new_embeddings.bias  # type: ignore[assignment]

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> BertForPreTrainingOutput | tuple[Any, ...]:
        out = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_attentions,
            output_hidden_states,
        )
        logits = self.cls.predictions(out.last_hidden_state)
        assert out.pooler_output is not None
        nsp_logits = self.cls.seq_relationship(out.pooler_output)
        loss = None
        if labels is not None and next_sentence_label is not None:
            loss = _mlm_loss(logits, labels) + _class_loss(
                "next_sentence_label", nsp_logits, next_sentence_label
            )
        elif labels is not None or next_sentence_label is not None:
            raise ValueError(
                "BertForPreTraining needs both labels (MLM) and next_sentence_label (NSP) for a "
                "loss; use BertForMaskedLM or BertForNextSentencePrediction for one objective"
            )
        return finish_output(
            BertForPreTrainingOutput(
                loss=loss,
                prediction_logits=logits,
                seq_relationship_logits=nsp_logits,
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


class BertForMaskedLM(_BertWithEncoder):
    """BERT with the masked-LM head (tied decoder); no pooler."""

    _tied_weights_keys = _TIED_MLM

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Module:
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.cls.predictions.decoder = new_embeddings  # type: ignore[assignment]
        self.cls.predictions.bias = new_embeddings.bias  # type: ignore[assignment]

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> MaskedLMOutput | tuple[Any, ...]:
        out = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_attentions,
            output_hidden_states,
        )
        logits = self.cls.predictions(out.last_hidden_state)
        loss = _mlm_loss(logits, labels) if labels is not None else None
        return finish_output(
            MaskedLMOutput(
                loss=loss,
                logits=logits,
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


class BertForNextSentencePrediction(_BertWithEncoder):
    """BERT with the NSP head on the pooled ``[CLS]`` output (``labels``: 0 = B follows A)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertOnlyNSPHead(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> NextSentencePredictorOutput | tuple[Any, ...]:
        out = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_attentions,
            output_hidden_states,
        )
        assert out.pooler_output is not None
        logits = self.cls.seq_relationship(out.pooler_output)
        loss = _class_loss("labels", logits, labels) if labels is not None else None
        return finish_output(
            NextSentencePredictorOutput(
                loss=loss,
                logits=logits,
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


def _classifier_dropout(config: BertConfig) -> nn.Dropout:
    p = config.classifier_dropout
    return nn.Dropout(config.hidden_dropout_prob if p is None else p)


class BertForSequenceClassification(_BertWithEncoder):
    """A linear classifier on the pooled ``[CLS]`` output (paper, figure 4a/b).

    With ``labels``, the loss follows ``config.problem_type`` as in transformers: regression
    for one label, cross-entropy for integer labels, BCE for multi-label float targets.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.num_labels = check_num_labels(config)
        self.bert = BertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput | tuple[Any, ...]:
        out = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_attentions,
            output_hidden_states,
        )
        assert out.pooler_output is not None
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = (
            sequence_classification_loss(self.config, logits, labels)
            if labels is not None
            else None
        )
        return finish_output(
            SequenceClassifierOutput(
                loss=loss,
                logits=logits,
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


class BertForTokenClassification(_BertWithEncoder):
    """A linear classifier on every token's final hidden state (paper, figure 4d); labels
    ``-100`` are ignored (sub-word continuations, padding)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.num_labels = check_num_labels(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> TokenClassifierOutput | tuple[Any, ...]:
        out = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_attentions,
            output_hidden_states,
        )
        logits = self.classifier(self.dropout(out.last_hidden_state))
        loss = None
        if labels is not None:
            _check_label_shape("labels", labels, tuple(logits.shape[:2]))
            check_labels("labels", labels, self.num_labels, ignore=True)
            loss = cross_entropy_ignoring(logits, labels)
        return finish_output(
            TokenClassifierOutput(
                loss=loss,
                logits=logits,
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


class BertForQuestionAnswering(_BertWithEncoder):
    """Span prediction (paper, figure 4c): a start and an end score per token.

    With ``start_positions`` and ``end_positions`` the loss is the mean of the two
    cross-entropies; positions outside the sequence are clamped to ``sequence_length`` and
    ignored, as in transformers.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        if config.num_labels != 2:
            raise ValueError(
                f"BertForQuestionAnswering predicts a start and an end score: num_labels must "
                f"be 2, got {config.num_labels}"
            )
        self.num_labels = 2
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> QuestionAnsweringModelOutput | tuple[Any, ...]:
        out = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_attentions,
            output_hidden_states,
        )
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(dim=-1)
        loss = None
        if (start_positions is None) != (end_positions is None):
            raise ValueError(
                "pass both start_positions and end_positions for a loss (the span's two ends), "
                "or neither"
            )
        if start_positions is not None and end_positions is not None:
            ignored = start_logits.shape[1]
            batch = start_logits.shape[0]
            for name, positions in (("start_positions", start_positions),
                                    ("end_positions", end_positions)):  # fmt: skip
                _check_label_shape(name, positions, (batch,))
                check_index_tensor(name, positions, low=0, high=None, what="a token position")
            # positions past the sequence (an answer cut off by truncation) are ignored
            start = start_positions.view(-1).clamp(0, ignored)
            end = end_positions.view(-1).clamp(0, ignored)
            start = start.masked_fill(start == ignored, -100)
            end = end.masked_fill(end == ignored, -100)
            loss = (
                cross_entropy_ignoring(start_logits, start)
                + cross_entropy_ignoring(end_logits, end)
            ) / 2
        return finish_output(
            QuestionAnsweringModelOutput(
                loss=loss,
                start_logits=start_logits.contiguous(),
                end_logits=end_logits.contiguous(),
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


class BertForMultipleChoice(_BertWithEncoder):
    """Multiple choice (the paper's SWAG set-up): each ``(question, choice)`` sequence is
    encoded, one score per choice from the pooled output, softmax over the choices.

    Inputs are ``(batch_size, num_choices, sequence_length)``; ``labels`` ``(batch_size,)``
    hold the index of the right choice.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> MultipleChoiceModelOutput | tuple[Any, ...]:
        reference = input_ids if input_ids is not None else inputs_embeds
        if reference is None:
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        expected = 3 if input_ids is not None else 4
        if reference.dim() != expected:
            raise ValueError(
                "BertForMultipleChoice takes (batch_size, num_choices, sequence_length) inputs; "
                f"got shape {tuple(reference.shape)}"
            )
        num_choices = reference.shape[1]

        def flat(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.flatten(0, 1)

        out = self._encode(
            flat(input_ids),
            flat(attention_mask),
            flat(token_type_ids),
            flat(position_ids)
            if position_ids is not None and position_ids.dim() == 3
            else position_ids,
            flat(inputs_embeds),
            output_attentions,
            output_hidden_states,
        )
        assert out.pooler_output is not None
        logits = self.classifier(self.dropout(out.pooler_output)).view(-1, num_choices)
        loss = _class_loss("labels", logits, labels) if labels is not None else None
        return finish_output(
            MultipleChoiceModelOutput(
                loss=loss,
                logits=logits,
                hidden_states=out.hidden_states,
                attentions=out.attentions,
            ),
            return_dict,
            self.config,
        )


class BertNotACausalLM(BertPreTrainedModel):
    """What ``AutoModelForCausalLM`` finds for :class:`BertConfig`: a clear refusal instead of
    transformers' decoder ``BertLMHeadModel`` (which needs ``is_decoder``, a setting the paper's
    encoder does not have). BERT's objectives are the masked LM and next-sentence prediction
    (``AutoModelForMaskedLM``, ``AutoModelForPreTraining``)."""

    def __init__(self, config: BertConfig, *args: Any, **kwargs: Any) -> None:
        raise ValueError(
            "paperports' BERT is the paper's bidirectional encoder: it has no causal-LM head. "
            "Use AutoModelForMaskedLM or AutoModelForPreTraining; for transformers' decoder "
            "variant, transformers.BertLMHeadModel with transformers.BertConfig(is_decoder=True)"
        )
