"""Configuration of BERT (Devlin et al. 2018) as a third-party transformers model."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedConfig
from transformers.activations import ACT2FN

from paperports._checks import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_probability,
)

__all__ = ["BertConfig"]


class BertConfig(PreTrainedConfig):
    r"""Configuration of :class:`BertModel` and its heads.

    The defaults are BERT-base's (Devlin et al. 2018, section 3). The model type is
    ``"bert"`` and the field and parameter names are those of HF-format BERT checkpoints: any
    of them loads into these classes, and a folder these classes save is an ordinary BERT
    checkpoint that a process without paperports opens with transformers' own Auto classes.
    ``import paperports.integrations.transformers`` maps ``"bert"`` in the Auto classes to
    these classes (``transformers.BertModel`` and its heads stay importable by name).

    Args:
        vocab_size (`int`, *optional*, defaults to 30522):
            WordPiece vocabulary size.
        hidden_size (`int`, *optional*, defaults to 768):
            Width H of the encoder.
        num_hidden_layers (`int`, *optional*, defaults to 12):
            Transformer layers L.
        num_attention_heads (`int`, *optional*, defaults to 12):
            Attention heads A; must divide `hidden_size`.
        intermediate_size (`int`, *optional*, defaults to 3072):
            Width of the feed-forward layer (4H in the paper).
        hidden_act (`str`, *optional*, defaults to `"gelu"`):
            Feed-forward and MLM-transform activation (a key of `transformers.activations.ACT2FN`).
        hidden_dropout_prob (`float`, *optional*, defaults to 0.1):
            Dropout on embeddings and on each sub-layer's output.
        attention_probs_dropout_prob (`float`, *optional*, defaults to 0.1):
            Dropout on the attention probabilities.
        max_position_embeddings (`int`, *optional*, defaults to 512):
            Longest sequence the learned position embeddings cover.
        type_vocab_size (`int`, *optional*, defaults to 2):
            Segment (`token_type_ids`) vocabulary: sentence A and sentence B.
        initializer_range (`float`, *optional*, defaults to 0.02):
            Standard deviation of the truncated-normal initialisation.
        layer_norm_eps (`float`, *optional*, defaults to 1e-12):
            LayerNorm epsilon.
        pad_token_id (`int`, *optional*, defaults to 0):
            Id of `[PAD]`.
        classifier_dropout (`float`, *optional*):
            Dropout before the classification heads; defaults to `hidden_dropout_prob`.
        padding_free (`bool`, *optional*, defaults to `True`):
            When a 2-D `attention_mask` pads some sequences (and every sequence's first
            token is real, as with right padding), run the encoder on the real tokens only:
            embeddings, projections and feed-forward layers on the tokens of all sequences
            packed together, attention per sequence, outputs padded back with zeros at the
            padding. The same values at the real tokens as the padded computation; `False`
            keeps the padded computation.

    Examples:

    ```python
    >>> from paperports.integrations.transformers import BertConfig, BertModel
    >>> config = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
    ...                     intermediate_size=512)
    >>> model = BertModel(config)
    ```
    """

    model_type = "bert"

    def __init__(
        self,
        vocab_size: int = 30522,
        hidden_size: int = 768,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        intermediate_size: int = 3072,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        pad_token_id: int | None = 0,
        classifier_dropout: float | None = None,
        padding_free: bool = True,
        **kwargs: Any,
    ) -> None:
        who = "BertConfig"
        padding_free = check_bool("padding_free", padding_free, who=who)
        for name, value in [
            ("vocab_size", vocab_size),
            ("hidden_size", hidden_size),
            ("num_hidden_layers", num_hidden_layers),
            ("num_attention_heads", num_attention_heads),
            ("intermediate_size", intermediate_size),
            ("max_position_embeddings", max_position_embeddings),
            ("type_vocab_size", type_vocab_size),
        ]:
            check_int(name, value, minimum=1, who=who)
        check_choice("hidden_act", hidden_act, sorted(ACT2FN), who=who)
        for name, p in [
            ("hidden_dropout_prob", hidden_dropout_prob),
            ("attention_probs_dropout_prob", attention_probs_dropout_prob),
        ]:
            check_probability(name, p, who=who)
        if classifier_dropout is not None:
            check_probability("classifier_dropout", classifier_dropout, who=who)
        check_float("initializer_range", initializer_range, minimum=0.0, who=who)
        check_float("layer_norm_eps", layer_norm_eps, minimum=0.0, open_low=True, who=who)
        if pad_token_id is not None:
            check_int("pad_token_id", pad_token_id, minimum=0, maximum=vocab_size - 1, who=who)
        # hidden_size % num_attention_heads is checked when a model is built, as in
        # transformers' BERT: a config is also a container (its ConfigTester builds
        # hidden_size=37 with 12 heads and never a model)
        # HF-format BERT configs carry decoder settings this encoder-only model does not have.
        for unsupported in ("is_decoder", "add_cross_attention"):
            if kwargs.get(unsupported):
                raise ValueError(
                    f"BertConfig: {unsupported}=True is not supported; this is the paper's "
                    "bidirectional encoder"
                )
        position_embedding_type = kwargs.pop("position_embedding_type", "absolute")
        if position_embedding_type != "absolute":
            raise ValueError(
                "BertConfig: only position_embedding_type='absolute' (the paper's learned "
                f"positions) is supported, got {position_embedding_type!r}"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.classifier_dropout = classifier_dropout
        self.padding_free = padding_free
        kwargs.setdefault("tie_word_embeddings", True)
        kwargs["pad_token_id"] = pad_token_id
        super().__init__(**kwargs)
