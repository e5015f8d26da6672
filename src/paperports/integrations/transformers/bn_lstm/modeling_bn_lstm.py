"""The BN-LSTM model family for transformers: a base model and its heads.

Embeddings -> BNLSTM (Cooijmans et al. 2016, :class:`paperports.integrations.torch.BNLSTM`)
-> heads. A recurrent model: its batch-norm running statistics are buffers, saved and loaded
with the weights.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    CausalLMOutput,
    SequenceClassifierOutput,
)

from paperports._checks import check_floating_tensor, values_known
from paperports.integrations.torch import BNLSTM, BNLSTMCell, RecurrentBatchNorm
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
from paperports.integrations.transformers.bn_lstm.configuration_bn_lstm import BnLstmConfig

__all__ = [
    "BnLstmForCausalLM",
    "BnLstmForSequenceClassification",
    "BnLstmModel",
    "BnLstmPreTrainedModel",
]


class BnLstmPreTrainedModel(CheckedPreTrainedModel):
    """Weight initialisation and loading for the BN-LSTM family.

    ``_init_weights`` keeps the paper's initialisation: batch-norm scales at
    ``config.gamma_init`` (transformers' default would set norm weights to 1), orthogonal
    recurrent weights, the forget-gate bias. ``from_pretrained`` raises a ``ValueError``
    naming the keys when the checkpoint lacks weights or running statistics of the
    embeddings or the BN-LSTM stack (a truncated checkpoint, or one of another
    architecture), as the BERT family does; heads missing from a checkpoint are initialised.
    """

    config_class = BnLstmConfig
    _required_weights = ("embeddings.", "encoder.")
    base_model_prefix = "bn_lstm"
    main_input_name = "input_ids"

    def save_pretrained(self, save_directory: Any, *args: Any, **kwargs: Any) -> Any:
        """:meth:`transformers.PreTrainedModel.save_pretrained`, recording in the config how
        many steps of running statistics the model holds (``config.statistics_steps``), so
        that ``from_pretrained`` builds buffers of that size. Every batch norm is brought to
        the largest number first; a ``state_dict`` passed in must hold one number of steps.
        """
        norms = [m for m in self.modules() if isinstance(m, RecurrentBatchNorm)]
        if norms:
            steps = max(norm.allocated_steps for norm in norms)
            for norm in norms:
                norm.reserve_steps(steps)
            state_dict = kwargs.get("state_dict")
            if state_dict is not None:
                steps = _statistics_steps(state_dict, steps)
            self.config.statistics_steps = steps
        return super().save_pretrained(save_directory, *args, **kwargs)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (BNLSTM, BNLSTMCell, RecurrentBatchNorm)):
            module.reset_parameters()  # gamma = gamma_init, statistics reset
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=self.config.initializer_range)


def _statistics_steps(state_dict: dict[str, Any], default: int) -> int:
    """The one number of steps of every running mean in ``state_dict`` (``default`` if it
    has none); a ``ValueError`` if they differ."""
    sizes = {
        key: int(value.shape[0])
        for key, value in state_dict.items()
        if key.endswith(".running_mean") and isinstance(value, torch.Tensor) and value.dim() == 2
    }
    if len(set(sizes.values())) > 1:
        raise ValueError(
            "save_pretrained: the state_dict's running statistics hold different numbers of "
            f"steps ({sizes}); from_pretrained builds one size for all (config.statistics_steps)"
        )
    return next(iter(sizes.values()), default)


def _check_token_labels(name: str, labels: Any, logits: torch.Tensor, vocab_size: int) -> None:
    """Token targets of the inputs' shape, in the vocabulary or -100."""
    if not isinstance(labels, torch.Tensor) or labels.shape != logits.shape[:2]:
        shown = tuple(labels.shape) if isinstance(labels, torch.Tensor) else labels
        raise ValueError(
            f"{name} must have the inputs' shape {tuple(logits.shape[:2])}, got {shown}"
        )
    check_labels(name, labels, vocab_size, ignore=True)


def _lengths(attention_mask: torch.Tensor | None, batch: int, steps: int) -> torch.Tensor | None:
    """Sequence lengths from a right-padded ``attention_mask`` ``(B, T)``."""
    if attention_mask is None:
        return None
    check_attention_mask(attention_mask)
    if attention_mask.shape != (batch, steps):
        raise ValueError(
            f"attention_mask must have shape ({batch}, {steps}), got {tuple(attention_mask.shape)}"
        )
    if batch == 0 or not values_known(attention_mask):
        return None  # nothing to read (the meta device): the shapes do not depend on it
    mask = attention_mask.bool()
    lengths = mask.sum(dim=1)
    prefix = torch.arange(steps, device=mask.device)[None, :] < lengths[:, None]
    if not torch.equal(mask, prefix) or int(lengths.min()) < 1:
        raise ValueError(
            "BN-LSTM needs right padding: each attention_mask row must be ones then zeros, "
            "with at least one token"
        )
    return lengths


def _output_size(config: BnLstmConfig) -> int:
    """Features of the hidden states: ``hidden_size`` per direction."""
    return config.hidden_size * (2 if config.bidirectional else 1)


class BnLstmModel(BnLstmPreTrainedModel):
    """Embeddings and the BN-LSTM stack; returns every step's hidden state and, as
    ``pooler_output``, each sequence's state at its last (unpadded) step (with
    ``config.bidirectional``, the forward direction's beside the reverse direction's, which
    ends at the first step)."""

    def __init__(self, config: BnLstmConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.input_size)
        self.encoder = BNLSTM(
            config.input_size,
            config.hidden_size,
            num_layers=config.num_hidden_layers,
            batch_first=True,
            bidirectional=config.bidirectional,
            dropout=config.dropout,
            t_max=config.t_max,
            gamma_init=config.gamma_init,
            forget_bias=config.forget_bias,
            momentum=config.bn_momentum,
            eps=config.bn_eps,
            random_t_max=config.random_t_max,
        )
        self.encoder.reserve_steps(config.statistics_steps)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.embeddings = value  # type: ignore[assignment]

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutputWithPooling | tuple[Any, ...]:
        """``hidden_states`` (with ``output_hidden_states``, or the config's): the
        embeddings and each layer's output, ``num_hidden_layers + 1`` tensors, 0 past each
        sequence's end. No attentions: a recurrent model has none."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if input_ids is not None:
            if not isinstance(input_ids, torch.Tensor):
                raise TypeError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
            if input_ids.dim() != 2:
                raise ValueError(f"input_ids must be (batch, time), got {tuple(input_ids.shape)}")
            check_token_ids("input_ids", input_ids, self.config.vocab_size, "vocab_size")
            inputs_embeds = self.embeddings(input_ids)
        assert inputs_embeds is not None
        check_floating_tensor("inputs_embeds", inputs_embeds, dtype=self.dtype)
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.input_size:
            raise ValueError(
                f"inputs_embeds must be (batch, time, {self.config.input_size}) "
                f"(config.input_size), got {tuple(inputs_embeds.shape)}"
            )
        batch, steps = inputs_embeds.shape[:2]
        lengths = _lengths(attention_mask, batch, steps)
        if output_hidden_states is None:
            output_hidden_states = bool(self.config.output_hidden_states)
        hidden_states = None
        if output_hidden_states:
            output, (h_n, _), layers = self.encoder.forward_with_layers(
                inputs_embeds, lengths=lengths
            )
            hidden_states = (inputs_embeds, *layers)
        else:
            output, (h_n, _) = self.encoder(inputs_embeds, lengths=lengths)
        assert isinstance(output, torch.Tensor)
        # each sequence's state after its last (unpadded) step, per direction of the top layer
        directions = 2 if self.config.bidirectional else 1
        last = torch.cat(list(h_n[-directions:]), dim=-1)
        result = BaseModelOutputWithPooling(
            last_hidden_state=output, pooler_output=last, hidden_states=hidden_states
        )
        return finish_output(result, return_dict, self.config)


class BnLstmForSequenceClassification(BnLstmPreTrainedModel):
    """A linear classifier on the last step's hidden state; with ``labels`` the loss follows
    ``config.problem_type`` as in transformers (and the BERT family): MSE for one label,
    cross-entropy for integer labels, BCE for multi-label float targets, so ``Trainer``
    trains it as is."""

    def __init__(self, config: BnLstmConfig) -> None:
        super().__init__(config)
        self.num_labels = check_num_labels(config)
        self.bn_lstm = BnLstmModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(_output_size(config), self.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput | tuple[Any, ...]:
        out = self.bn_lstm(
            input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(self.config, logits, labels)
        result = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)
        return finish_output(result, return_dict, self.config)


class BnLstmForCausalLM(BnLstmPreTrainedModel, GenerationMixin):
    """A language model: next-token logits at every step; shifted cross-entropy when
    ``labels`` are given (``-100`` ignored).

    ``generate`` works (greedy, sampling, beams) by re-running the prefix at each step: the
    batch-norm statistics are per time step, so each new token must be processed at its own
    position; there is no key/value cache to reuse.
    """

    def __init__(self, config: BnLstmConfig) -> None:
        if getattr(config, "bidirectional", False):
            raise ValueError(
                "BnLstmForCausalLM: config.bidirectional=True would let each step read the "
                "tokens it predicts; a language model needs bidirectional=False"
            )
        super().__init__(config)
        self.bn_lstm = BnLstmModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        shift_labels: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> CausalLMOutput | tuple[Any, ...]:
        """With ``labels``, the loss of each step's logits against the next step's label.
        ``shift_labels`` are targets already aligned with the logits (what sequence- and
        context-parallel training hands a model, the shift done before sharding): given,
        the loss is against them, unshifted, and ``labels`` only asks for a loss."""
        out = self.bn_lstm(
            input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        logits = self.lm_head(out.last_hidden_state)
        loss = None
        if shift_labels is not None:
            _check_token_labels("shift_labels", shift_labels, logits, self.config.vocab_size)
            loss = cross_entropy_ignoring(logits, shift_labels)
        elif labels is not None:
            _check_token_labels("labels", labels, logits, self.config.vocab_size)
            loss = cross_entropy_ignoring(logits[:, :-1], labels[:, 1:])
        result = CausalLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)
        return finish_output(result, return_dict, self.config)

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        # the whole prefix, every step: a recurrent model with per-step statistics
        return {"input_ids": input_ids, "attention_mask": attention_mask}
