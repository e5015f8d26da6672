"""Bad input to the transformers plugin (the BERT and BN-LSTM families)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from paperports.integrations.transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BnLstmConfig,
    BnLstmForCausalLM,
    BnLstmForSequenceClassification,
    BnLstmModel,
)

from .conftest import assert_refused, case

DTYPES = [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool]
TINY = {
    "vocab_size": 20,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "max_position_embeddings": 16,
}


def bert(cls: type = BertModel, **kw: Any) -> Any:
    return cls(BertConfig(**(TINY | kw)))


def bn_lstm(cls: type = BnLstmModel, **kw: Any) -> Any:
    return cls(BnLstmConfig(**({"vocab_size": 20, "hidden_size": 8, "t_max": 8} | kw)))


IDS = torch.randint(0, 20, (2, 5), generator=torch.Generator().manual_seed(0))

CONFIG = [
    *[
        case(f"BertConfig {k}={v!r}", lambda k=k, v=v: BertConfig(**{k: v}), k)
        for k, v in [
            ("vocab_size", 0),
            ("hidden_size", 2.5),
            ("num_hidden_layers", -1),
            ("num_attention_heads", 0),
            ("intermediate_size", "big"),
            ("max_position_embeddings", 0),
            ("type_vocab_size", 0),
            ("hidden_act", "foo"),
            ("hidden_dropout_prob", 1.5),
            ("attention_probs_dropout_prob", -0.1),
            ("initializer_range", -1.0),
            ("layer_norm_eps", 0.0),
            ("layer_norm_eps", -1e-12),
            ("pad_token_id", -1),
            ("pad_token_id", 30522),
            ("classifier_dropout", 2.0),
        ]
    ],
    case(
        "BertModel heads do not divide",
        lambda: BertModel(BertConfig(hidden_size=10, num_attention_heads=3)),
        "divisible",
    ),
    case("BertConfig is_decoder", lambda: BertConfig(is_decoder=True), "is_decoder"),
    case(
        "BertConfig relative positions",
        lambda: BertConfig(position_embedding_type="relative_key"),
        "position_embedding_type",
    ),
    case(
        "sequence classifier num_labels=0",
        lambda: bert(BertForSequenceClassification, num_labels=0),
        "num_labels",
    ),
    case(
        "question answering num_labels=3",
        lambda: bert(BertForQuestionAnswering, num_labels=3),
        "num_labels",
    ),
    *[
        case(f"BnLstmConfig {k}={v!r}", lambda k=k, v=v: BnLstmConfig(**{k: v}), k)
        for k, v in [
            ("vocab_size", 0),
            ("hidden_size", 0),
            ("input_size", -2),
            ("num_hidden_layers", 1.5),
            ("dropout", 2),
            ("t_max", 0),
            ("t_max", 5.0),
            ("gamma_init", "x"),
            ("forget_bias", float("nan")),
            ("bn_momentum", -1),
            ("bn_eps", 0.0),
            ("classifier_dropout", -1),
            ("initializer_range", -1),
            ("statistics_steps", 0),
            ("statistics_steps", 2000),  # more than t_max = 1000
            ("statistics_steps", 3.0),
        ]
    ],
]

DTYPE = [
    *[
        case(
            f"Bert inputs_embeds {d}",
            lambda d=d: bert()(inputs_embeds=torch.ones(2, 3, 8).to(d)),
            "inputs_embeds",
            str(d),
        )
        for d in DTYPES
    ],
    *[
        case(
            f"BnLstm inputs_embeds {d}",
            lambda d=d: bn_lstm()(inputs_embeds=torch.ones(2, 3, 8).to(d)),
            "inputs_embeds",
        )
        for d in DTYPES
    ],
    case("Bert input_ids float", lambda: bert()(IDS.float()), "input_ids", "integers"),
    case("Bert input_ids bool", lambda: bert()(IDS.bool()), "input_ids"),
    case(
        "Bert token_type_ids float",
        lambda: bert()(IDS, token_type_ids=IDS.float() * 0),
        "token_type_ids",
    ),
    case(
        "Bert position_ids float",
        lambda: bert()(IDS, position_ids=torch.arange(5.0)[None]),
        "position_ids",
    ),
    case("BnLstm input_ids float", lambda: bn_lstm()(IDS.float()), "input_ids"),
    case("MLM labels float", lambda: bert(BertForMaskedLM)(IDS, labels=IDS.float()), "labels"),
    case(
        "QA positions float",
        lambda: bert(BertForQuestionAnswering)(
            IDS, start_positions=torch.tensor([1.0, 2.0]), end_positions=torch.tensor([2, 3])
        ),
        "start_positions",
    ),
    case(
        "attention_mask complex",
        lambda: bert()(IDS, attention_mask=torch.ones(2, 5, dtype=torch.complex64)),
        "attention_mask",
    ),
]

EMPTY = [
    case("Bert sequence length 0", lambda: bert()(IDS[:, :0]), "sequence_length 0"),
    case("BnLstm sequence length 0", lambda: bn_lstm()(IDS[:, :0]), "no time steps"),
    case("BnLstm batch of one in training", lambda: bn_lstm()(IDS[:1]), "more than 1 value"),
    case("Bert neither ids nor embeddings", lambda: bert()(), "input_ids", "inputs_embeds"),
    case("BnLstm neither", lambda: bn_lstm()(), "input_ids", "inputs_embeds"),
]

VALUES = [
    case(
        "Bert both ids and embeddings",
        lambda: bert()(IDS, inputs_embeds=torch.ones(2, 5, 8)),
        "exactly one",
    ),
    case("Bert input_ids 3-D", lambda: bert()(IDS[None]), "input_ids", "(batch, sequence_length)"),
    case("Bert input_ids >= vocab", lambda: bert()(IDS + 20), "input_ids", "[0, 20)"),
    case("Bert input_ids negative", lambda: bert()(IDS - 30), "input_ids"),
    case("Bert input_ids a list", lambda: bert()([[1, 2, 3]]), "input_ids", "Tensor"),
    case(
        "Bert token_type_ids 2", lambda: bert()(IDS, token_type_ids=IDS * 0 + 2), "token_type_ids"
    ),
    case(
        "Bert token_type_ids shape",
        lambda: bert()(IDS, token_type_ids=IDS[:, :3]),
        "token_type_ids",
    ),
    case(
        "Bert too long",
        lambda: bert()(torch.zeros(1, 17, dtype=torch.long)),
        "max_position_embeddings",
    ),
    case(
        "Bert position_ids beyond",
        lambda: bert()(IDS, position_ids=torch.arange(5)[None] + 12),
        "position_ids",
    ),
    case(
        "Bert inputs_embeds width",
        lambda: bert()(inputs_embeds=torch.ones(2, 3, 5)),
        "inputs_embeds",
    ),
    *[
        case(
            f"Bert attention_mask {v}",
            lambda v=v: bert()(IDS, attention_mask=_mask(v)),
            "attention_mask",
        )
        for v in (-1.0, 0.5, 2.0, float("nan"))
    ],
    case(
        "Bert attention_mask shape",
        lambda: bert()(IDS, attention_mask=torch.ones(2, 4)),
        "attention_mask",
    ),
    case(
        "Bert 4-D attention_mask of other keys",
        lambda: bert()(IDS, attention_mask=torch.ones(2, 1, 5, 4, dtype=torch.bool)),
        "attention_mask",
        "broadcast",
    ),
    case(
        "Bert 4-D additive attention_mask positive",
        lambda: bert()(IDS, attention_mask=torch.ones(2, 1, 5, 5)),
        "attention_mask",
        "additive",
    ),
    case(
        "Bert 4-D additive attention_mask of another dtype",
        lambda: bert()(IDS, attention_mask=torch.zeros(2, 1, 5, 5, dtype=torch.float64)),
        "attention_mask",
        "float64",
    ),
    case(
        "Bert 4-D integer attention_mask of 2",
        lambda: bert()(IDS, attention_mask=torch.full((2, 1, 5, 5), 2)),
        "attention_mask",
    ),
    *[
        case(
            f"BnLstm attention_mask {v}",
            lambda v=v: bn_lstm()(IDS, attention_mask=_mask(v)),
            "attention_mask",
        )
        for v in (-1.0, 0.5, 2.0, float("nan"))
    ],
    case(
        "BnLstm left padding",
        lambda: bn_lstm()(IDS, attention_mask=torch.tensor([[0, 1, 1, 1, 1], [1] * 5])),
        "right padding",
    ),
    case("BnLstm input_ids >= vocab", lambda: bn_lstm()(IDS + 20), "input_ids"),
    case(
        "BnLstm inputs_embeds width",
        lambda: bn_lstm()(inputs_embeds=torch.ones(2, 3, 5)),
        "inputs_embeds",
    ),
    case("MLM labels >= vocab", lambda: bert(BertForMaskedLM)(IDS, labels=IDS + 20), "labels"),
    case("MLM labels shape", lambda: bert(BertForMaskedLM)(IDS, labels=IDS[:, :2]), "labels"),
    case(
        "NSP label 2",
        lambda: bert(BertForNextSentencePrediction)(IDS, labels=torch.tensor([0, 2])),
        "labels",
    ),
    case(
        "pre-training NSP label 2",
        lambda: bert(BertForPreTraining)(IDS, labels=IDS, next_sentence_label=torch.tensor([0, 2])),
        "next_sentence_label",
    ),
    case(
        "pre-training one label only",
        lambda: bert(BertForPreTraining)(IDS, labels=IDS),
        "next_sentence_label",
    ),
    case(
        "sequence labels beyond num_labels",
        lambda: bert(BertForSequenceClassification, num_labels=3)(IDS, labels=torch.tensor([0, 3])),
        "labels",
        "[0, 3)",
    ),
    case(
        "sequence labels shape",
        lambda: bert(BertForSequenceClassification, num_labels=3)(IDS, labels=torch.tensor([0])),
        "labels",
    ),
    case(
        "multi-label labels shape",
        lambda: bert(BertForSequenceClassification, num_labels=3)(IDS, labels=torch.ones(2, 2)),
        "labels",
    ),
    case(
        "regression labels NaN",
        lambda: bert(BertForSequenceClassification, num_labels=1)(
            IDS, labels=torch.tensor([0.5, float("nan")])
        ),
        "labels",
    ),
    case(
        "token labels beyond",
        lambda: bert(BertForTokenClassification, num_labels=3)(IDS, labels=IDS * 0 + 3),
        "labels",
    ),
    case(
        "QA negative position",
        lambda: bert(BertForQuestionAnswering)(
            IDS, start_positions=torch.tensor([-1, 0]), end_positions=torch.tensor([1, 1])
        ),
        "start_positions",
    ),
    case(
        "QA only the start",
        lambda: bert(BertForQuestionAnswering)(IDS, start_positions=torch.tensor([1, 0])),
        "end_positions",
    ),
    case("multiple choice 2-D", lambda: bert(BertForMultipleChoice)(IDS), "num_choices"),
    case(
        "multiple choice label beyond",
        lambda: bert(BertForMultipleChoice)(IDS.view(1, 2, 5), labels=torch.tensor([2])),
        "labels",
    ),
    case(
        "causal LM labels beyond",
        lambda: bn_lstm(BnLstmForCausalLM)(IDS, labels=IDS + 20),
        "labels",
    ),
    case(
        "causal LM labels shape",
        lambda: bn_lstm(BnLstmForCausalLM)(IDS, labels=IDS[:, :2]),
        "labels",
    ),
    case(
        "BN-LSTM classifier label beyond",
        lambda: bn_lstm(BnLstmForSequenceClassification, num_labels=2)(
            IDS, labels=torch.tensor([0, 2])
        ),
        "labels",
    ),
]


def _mask(value: float) -> torch.Tensor:
    mask = torch.ones(2, 5)
    mask[1, 2] = value
    return mask


@pytest.mark.parametrize(("call", "words", "error"), CONFIG + DTYPE + EMPTY + VALUES)
def test_refused(call: Any, words: tuple[str, ...], error: Any) -> None:
    assert_refused(call, words, error)


def _save(model: Any, folder: Path) -> Path:
    model.save_pretrained(folder)
    return folder / "model.safetensors"


@pytest.mark.parametrize("family", ["bert", "bn_lstm"])
@pytest.mark.parametrize("damage", ["empty", "truncated", "missing"])
def test_a_damaged_checkpoint_file_is_named(family: str, damage: str, tmp_path: Path) -> None:
    """A zero-byte, truncated or missing weights file: the error names the file."""
    model = bert() if family == "bert" else bn_lstm()
    weights = _save(model, tmp_path)
    if damage == "empty":
        weights.write_bytes(b"")
    elif damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:100])
    else:
        weights.unlink()
    with pytest.raises((OSError, ValueError)) as info:
        type(model).from_pretrained(tmp_path)
    assert "model.safetensors" in str(info.value) or str(tmp_path) in str(info.value)


def test_defined_results_for_empty_batches() -> None:
    """A batch of 0 sequences gives empty outputs, and a loss of 0 where every label is
    ignored (not NaN)."""
    for model in (bert(), bert(BertForMaskedLM), bn_lstm(), bn_lstm(BnLstmForCausalLM)):
        out = model(IDS[:0])
        assert out[0].shape[0] == 0
    mlm = bert(BertForMaskedLM)
    assert float(mlm(IDS, labels=torch.full_like(IDS, -100)).loss) == 0.0


def test_the_meta_device_builds_and_runs_both_families() -> None:
    with torch.device("meta"):
        for model in (bert(), bn_lstm()):
            ids = torch.zeros(2, 5, dtype=torch.long)
            out = model(ids, attention_mask=torch.ones(2, 5))
            assert out.last_hidden_state.shape == (2, 5, 8) and out.last_hidden_state.is_meta
