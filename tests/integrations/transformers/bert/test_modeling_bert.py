"""BERT behind transformers' Auto classes: the architecture, save/load, attention paths,
checkpoints, Trainer, bad input."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    Trainer,
    TrainingArguments,
)

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
)

HEADS = [
    (AutoModel, BertModel),
    (AutoModelForPreTraining, BertForPreTraining),
    (AutoModelForMaskedLM, BertForMaskedLM),
    (AutoModelForNextSentencePrediction, BertForNextSentencePrediction),
    (AutoModelForSequenceClassification, BertForSequenceClassification),
    (AutoModelForTokenClassification, BertForTokenClassification),
    (AutoModelForQuestionAnswering, BertForQuestionAnswering),
    (AutoModelForMultipleChoice, BertForMultipleChoice),
]


def tiny(**kw: Any) -> BertConfig:
    """A tiny config, as transformers' own ModelTester helpers build one."""
    base: dict[str, Any] = {
        "vocab_size": 99,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 37,
        "max_position_embeddings": 64,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    base.update(kw)
    return BertConfig(**base)


def ids(batch: int = 3, seq: int = 7, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 99, (batch, seq), generator=torch.Generator().manual_seed(seed))


def inputs_for(model: torch.nn.Module, batch: int = 2, seq: int = 6) -> dict[str, torch.Tensor]:
    if isinstance(model, BertForMultipleChoice):
        return {"input_ids": ids(batch * 3, seq).view(batch, 3, seq)}
    return {"input_ids": ids(batch, seq)}


@pytest.mark.parametrize(("auto", "cls"), HEADS)
def test_auto_classes_find_every_model_and_save_load_round_trips(
    auto: type, cls: type, tmp_path: Path
) -> None:
    settings = {k: v for k, v in tiny().to_dict().items() if k != "model_type"}
    config = AutoConfig.for_model("bert", **settings)
    assert isinstance(config, BertConfig)
    model = auto.from_config(config).eval()
    assert type(model) is cls
    model.save_pretrained(tmp_path)
    loaded = auto.from_pretrained(tmp_path).eval()
    assert type(loaded) is cls
    for (name, a), (_, b) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    batch = inputs_for(model)
    with torch.no_grad():
        first, second = model(**batch), loaded(**batch)
    key = "last_hidden_state" if cls is BertModel else next(iter(first.keys()))
    torch.testing.assert_close(first[key], second[key], atol=1e-6, rtol=0)


def test_a_saved_directory_is_an_ordinary_bert_checkpoint(tmp_path: Path) -> None:
    BertModel(tiny()).save_pretrained(tmp_path)
    assert '"model_type": "bert"' in (tmp_path / "config.json").read_text()


_PLAIN_TRANSFORMERS = """
import sys, torch
from transformers import AutoModelForMaskedLM
folder = sys.argv[1]
model = AutoModelForMaskedLM.from_pretrained(folder).eval()
with torch.no_grad():
    torch.save(model(torch.load(folder + "/ids.pt")).logits, folder + "/theirs.pt")
print(type(model).__module__, "paperports" in sys.modules)
"""


def test_a_saved_folder_opens_in_a_process_without_paperports(tmp_path: Path) -> None:
    """transformers alone opens what our model saved, as its own BERT, with our outputs."""
    import subprocess
    import sys

    torch.manual_seed(0)
    model = BertForMaskedLM(tiny()).eval()
    model.save_pretrained(tmp_path)
    batch = ids()
    torch.save(batch, tmp_path / "ids.pt")
    run = subprocess.run(
        [sys.executable, "-c", _PLAIN_TRANSFORMERS, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.split() == ["transformers.models.bert.modeling_bert", "False"]
    with torch.no_grad():
        ours = model(batch).logits
    torch.testing.assert_close(torch.load(tmp_path / "theirs.pt"), ours, atol=1e-5, rtol=0)


def _warnings_while(call: Any) -> tuple[Any, list[str]]:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = transformers.utils.logging.get_logger("transformers")
    logger.addHandler(handler)
    try:
        return call(), records
    finally:
        logger.removeHandler(handler)


def test_hf_bert_checkpoints_load_into_our_classes_silently(tmp_path: Path) -> None:
    """A checkpoint saved by transformers' own BERT: the Auto classes give ours (this
    package maps "bert" to its classes on import), and no load logs a warning."""
    torch.manual_seed(1)
    theirs = transformers.BertForMaskedLM(
        transformers.BertConfig(**{k: v for k, v in tiny().to_dict().items() if k in _FIELDS})
    ).eval()
    theirs.save_pretrained(tmp_path)
    for load in (
        lambda: AutoModelForMaskedLM.from_pretrained(tmp_path),
        lambda: BertForMaskedLM.from_pretrained(tmp_path),
    ):
        model, logged = _warnings_while(load)
        assert type(model).__module__.startswith("paperports."), type(model)
        assert logged == [], logged
    # the encoder alone from the MLM checkpoint: transformers' load report (the head's
    # weights unused, the pooler new), as for its own BERT, but no model-type warning
    model, logged = _warnings_while(lambda: AutoModel.from_pretrained(tmp_path))
    assert type(model) is BertModel
    assert not any("model of type" in message for message in logged), logged
    mlm = BertForMaskedLM.from_pretrained(tmp_path).eval()
    batch = ids()
    with torch.no_grad():
        torch.testing.assert_close(mlm(batch).logits, theirs(batch).logits, atol=1e-5, rtol=0)
    # transformers' own classes stay theirs, by name
    assert type(transformers.BertModel.from_pretrained(tmp_path)) is transformers.BertModel


_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
)


def test_set_attn_implementation_switches_the_attention_path() -> None:
    torch.manual_seed(2)
    model = BertModel(tiny()).eval()
    batch = ids()
    mask = torch.ones_like(batch)
    mask[0, 4:] = 0
    with torch.no_grad():
        sdpa = model(batch, attention_mask=mask).last_hidden_state
        model.set_attn_implementation("eager")
        assert model.config._attn_implementation == "eager"
        eager = model(batch, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(eager, sdpa, atol=1e-5, rtol=0)
    with pytest.raises((ValueError, ImportError)):
        model.set_attn_implementation("flash_attention_2")


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_four_dimensional_masks_as_hf_bert_takes_them(implementation: str) -> None:
    torch.manual_seed(3)
    config = tiny()
    hf_config = transformers.BertConfig(
        **{k: v for k, v in config.to_dict().items() if k in _FIELDS}
    )
    theirs = transformers.BertModel(hf_config).eval()
    theirs.set_attn_implementation(implementation)
    ours = BertModel(config).eval()
    ours.load_state_dict(theirs.state_dict())
    ours.set_attn_implementation(implementation)
    batch = ids()
    keep = torch.ones_like(batch)
    keep[0, 4:] = 0
    keep[2, 5:] = 0
    square = keep[:, None, None, :].expand(3, 1, 7, 7)
    additive = (1.0 - square.float()) * torch.finfo(torch.float32).min
    with torch.no_grad():
        expected = theirs(batch, attention_mask=keep).last_hidden_state
        torch.testing.assert_close(
            theirs(batch, attention_mask=additive).last_hidden_state, expected
        )  # (HF's eager path adds a boolean 4-D mask as 0/1; ours masks with it, as SDPA)
        for mask in (square.bool(), additive, keep[:, None, None, :].bool()):
            torch.testing.assert_close(
                ours(batch, attention_mask=mask).last_hidden_state, expected, atol=1e-5, rtol=0
            )
        # 0/1 integers: ours reads them as 2-D masks are read (1: attend)
        torch.testing.assert_close(
            ours(batch, attention_mask=square.long()).last_hidden_state,
            expected,
            atol=1e-5,
            rtol=0,
        )
    with pytest.raises(ValueError, match="broadcast"):
        ours(batch, attention_mask=square[:, :, :, :6].bool())
    with pytest.raises(ValueError, match="additive"):
        ours(batch, attention_mask=square.float())  # 0/1 floats in 4-D mean "add 1"


def test_causal_lm_auto_class_refuses_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="bidirectional encoder"):
        transformers.AutoModelForCausalLM.from_config(tiny())


def test_mlm_decoder_is_tied_to_the_token_embeddings(tmp_path: Path) -> None:
    for cls in (BertForMaskedLM, BertForPreTraining):
        model = cls(tiny())
        assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
        assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
        model.save_pretrained(tmp_path / cls.__name__)
        loaded = cls.from_pretrained(tmp_path / cls.__name__)
        assert (
            loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight
        )


def test_initialisation_is_the_papers() -> None:
    model = BertForMaskedLM(tiny(initializer_range=0.02))
    weight = model.bert.encoder.layer[0].attention.self.query.weight
    assert 0.01 < weight.std().item() < 0.025
    assert weight.abs().max().item() <= 0.04 + 1e-6  # truncated at two standard deviations
    assert torch.all(model.bert.embeddings.word_embeddings.weight[0] == 0)  # [PAD]
    assert torch.all(model.bert.encoder.layer[0].output.LayerNorm.weight == 1)
    assert torch.all(model.cls.predictions.bias == 0)
    assert torch.equal(model.bert.embeddings.position_ids[0], torch.arange(64))


def dense_reference(model: BertModel, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The paper's equations written out with plain tensor operations."""
    params = dict(model.named_parameters())
    config = model.config
    heads, size = config.num_attention_heads, config.hidden_size // config.num_attention_heads

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ params[name + ".weight"].T + params[name + ".bias"]

    def norm(x: torch.Tensor, name: str) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + config.layer_norm_eps) * params[
            name + ".weight"
        ] + params[name + ".bias"]

    seq = input_ids.shape[1]
    x = (
        params["embeddings.word_embeddings.weight"][input_ids]
        + params["embeddings.position_embeddings.weight"][:seq]
        + params["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x, "embeddings.LayerNorm")
    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(x, p + f"attention.self.{n}").view(*x.shape[:2], heads, size).transpose(1, 2)
            for n in ("query", "key", "value")
        )
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)
        scores = scores + (1.0 - mask[:, None, None, :].float()) * -1e9
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        x = norm(
            x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm"
        )
        inner = torch.nn.functional.gelu(linear(x, p + "intermediate.dense"))
        x = norm(x + linear(inner, p + "output.dense"), p + "output.LayerNorm")
    return x


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_equations_against_a_dense_computation(attn_implementation: str) -> None:
    torch.manual_seed(0)
    model = BertModel(tiny(attn_implementation=attn_implementation)).eval()
    input_ids = ids()
    mask = torch.ones_like(input_ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        got = model(input_ids, attention_mask=mask).last_hidden_state  # padding-free
        want = dense_reference(model, input_ids, mask)
        model.config.padding_free = False
        padded = model(input_ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-4)
    assert bool((got[~real] == 0).all())  # the padding-free path leaves the padding at 0
    torch.testing.assert_close(padded, want, atol=1e-5, rtol=1e-4)  # the padding too


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_attention_is_bidirectional(attn_implementation: str) -> None:
    """Changing the last token must change the first token's output: a causal flag slipping
    into either attention path would make BERT a left-to-right model."""
    model = BertModel(tiny(attn_implementation=attn_implementation)).eval()
    a = ids(1, 8)
    b = a.clone()
    b[0, -1] = (b[0, -1] % 98) + 1 if b[0, -1] != 98 else 1
    with torch.no_grad():
        first_a = model(a).last_hidden_state[0, 0]
        first_b = model(b).last_hidden_state[0, 0]
    assert (first_a - first_b).abs().max() > 1e-4


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_padding_does_not_change_the_real_tokens(attn_implementation: str) -> None:
    model = BertModel(tiny(attn_implementation=attn_implementation)).eval()
    short = ids(1, 5)
    padded = torch.cat([short, torch.full((1, 3), 7)], dim=1)
    mask = torch.tensor([[1] * 5 + [0] * 3])
    with torch.no_grad():
        alone = model(short)
        with_pad = model(padded, attention_mask=mask)
        unmasked = model(padded)
    torch.testing.assert_close(with_pad.last_hidden_state[:, :5], alone.last_hidden_state)
    torch.testing.assert_close(with_pad.pooler_output, alone.pooler_output)
    assert (unmasked.last_hidden_state[:, :5] - alone.last_hidden_state).abs().max() > 1e-4


def test_eager_and_sdpa_agree_and_expose_attentions_and_hidden_states() -> None:
    torch.manual_seed(1)
    eager = BertModel(tiny(attn_implementation="eager")).eval()
    sdpa = BertModel(tiny(attn_implementation="sdpa")).eval()
    sdpa.load_state_dict(eager.state_dict())
    input_ids = ids(2, 9)
    mask = torch.ones_like(input_ids)
    mask[0, 6:] = 0
    with torch.no_grad():
        a = eager(input_ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
        b = sdpa(input_ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
        c = sdpa(input_ids, attention_mask=mask)
    # with attentions the padded computation runs; without, the padding-free one: the same
    # values at the real tokens, and 0 at the padding
    real = mask.bool()
    torch.testing.assert_close(
        a.last_hidden_state[real], c.last_hidden_state[real], atol=1e-5, rtol=1e-5
    )
    assert bool((c.last_hidden_state[~real] == 0).all())
    assert len(a.hidden_states) == 3 and len(a.attentions) == 2
    assert a.attentions[0].shape == (2, 4, 9, 9)
    torch.testing.assert_close(a.attentions[0].sum(-1), torch.ones(2, 4, 9))
    assert torch.all(a.attentions[1][0, :, :, 6:] == 0)  # nothing attends to padding
    for x, y in zip(a.attentions, b.attentions, strict=True):
        torch.testing.assert_close(x, y)
    torch.testing.assert_close(a.hidden_states[-1], a.last_hidden_state)
    assert c.attentions is None and c.hidden_states is None
    as_tuple = sdpa(input_ids, return_dict=False)
    assert isinstance(as_tuple, tuple) and as_tuple[0].shape == (2, 9, 32)


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    torch.manual_seed(2)
    plain = BertForMaskedLM(tiny())
    checkpointed = BertForMaskedLM(tiny())
    checkpointed.load_state_dict(plain.state_dict())
    checkpointed.gradient_checkpointing_enable()
    assert checkpointed.is_activation_checkpointing
    input_ids = ids()
    for model in (plain, checkpointed):
        model.train()
        model(input_ids, labels=input_ids).loss.backward()
    for (name, a), (_, b) in zip(
        plain.named_parameters(), checkpointed.named_parameters(), strict=True
    ):
        assert a.grad is not None and b.grad is not None, name
        torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=1e-5, msg=name)


def test_torch_compile_matches_eager_mode() -> None:
    model = BertModel(tiny()).eval()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    input_ids = ids()
    mask = torch.ones_like(input_ids)
    mask[0, 4:] = 0
    real = mask.bool()
    with torch.no_grad():  # compiled: the padded computation (its shapes depend on no value)
        torch.testing.assert_close(
            compiled(input_ids, attention_mask=mask).last_hidden_state[real],
            model(input_ids, attention_mask=mask).last_hidden_state[real],
        )


def test_heads_compute_their_losses() -> None:
    torch.manual_seed(3)
    input_ids = ids(2, 6)
    pre = BertForPreTraining(tiny())
    labels = torch.full_like(input_ids, -100)
    labels[:, 2] = input_ids[:, 2]
    out = pre(input_ids, labels=labels, next_sentence_label=torch.tensor([0, 1]))
    assert out.prediction_logits.shape == (2, 6, 99)
    assert out.seq_relationship_logits.shape == (2, 2)
    mlm = torch.nn.functional.cross_entropy(out.prediction_logits[:, 2], input_ids[:, 2])
    nsp = torch.nn.functional.cross_entropy(out.seq_relationship_logits, torch.tensor([0, 1]))
    torch.testing.assert_close(out.loss, mlm + nsp)
    with pytest.raises(ValueError, match="next_sentence_label"):
        pre(input_ids, labels=labels)

    seq = BertForSequenceClassification(tiny(num_labels=3))
    assert seq(input_ids, labels=torch.tensor([0, 2])).loss.item() > 0
    regression = BertForSequenceClassification(tiny(num_labels=1))
    out = regression(input_ids, labels=torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(
        out.loss, torch.nn.functional.mse_loss(out.logits.squeeze(-1), torch.tensor([0.5, -1.0]))
    )

    tokens = BertForTokenClassification(tiny(num_labels=5))
    token_labels = torch.randint(0, 5, (2, 6))
    token_labels[0, 3:] = -100
    out = tokens(input_ids, labels=token_labels)
    assert out.logits.shape == (2, 6, 5)
    kept = token_labels != -100
    torch.testing.assert_close(
        out.loss, torch.nn.functional.cross_entropy(out.logits[kept], token_labels[kept])
    )

    qa = BertForQuestionAnswering(tiny())
    out = qa(input_ids, start_positions=torch.tensor([1, 50]), end_positions=torch.tensor([2, 3]))
    assert out.start_logits.shape == out.end_logits.shape == (2, 6)
    expected = (
        torch.nn.functional.cross_entropy(out.start_logits[:1], torch.tensor([1]))
        + torch.nn.functional.cross_entropy(out.end_logits, torch.tensor([2, 3]))
    ) / 2
    torch.testing.assert_close(out.loss, expected)  # position 50 is out of range: ignored

    choice = BertForMultipleChoice(tiny())
    out = choice(ids(6, 5).view(2, 3, 5), labels=torch.tensor([2, 0]))
    assert out.logits.shape == (2, 3)
    nsp_only = BertForNextSentencePrediction(tiny())
    assert nsp_only(input_ids, labels=torch.tensor([1, 0])).logits.shape == (2, 2)


def test_trainer_trains_masked_lm(tmp_path: Path) -> None:
    """A few Trainer steps on a repeated pattern lower the MLM loss."""
    torch.manual_seed(4)
    pattern = torch.arange(1, 17).repeat(32, 1)
    labels = pattern.clone()
    masked = pattern.clone()
    masked[:, ::4] = 98  # the "[MASK]" id
    labels[:, 1::4] = -100
    labels[:, 2::4] = -100
    labels[:, 3::4] = -100
    data = [{"input_ids": m, "labels": y} for m, y in zip(masked, labels, strict=True)]
    model = BertForMaskedLM(tiny())
    with torch.no_grad():
        before = model(masked, labels=labels).loss.item()
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_train_epochs=10,
        learning_rate=3e-3,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    Trainer(model=model, args=args, train_dataset=data).train()
    model.eval()
    with torch.no_grad():
        after = model(masked, labels=labels).loss.item()
    assert after < before / 3


# ---------------------------------------------------------------------------------------
# Bad input


def test_a_model_rejects_heads_that_do_not_divide_the_width() -> None:
    """As transformers' BERT: the config holds such values (its ConfigTester makes
    them), the model refuses them when built."""
    config = BertConfig(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="divisible by num_attention_heads"):
        BertModel(config)
    with pytest.raises(ValueError, match="is_decoder"):
        BertConfig(is_decoder=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"input_ids": torch.zeros(2, 65, dtype=torch.long)}, "max_position_embeddings"),
        ({"input_ids": torch.tensor([[1, 2, 99]])}, r"input_ids must lie in \[0, 99\)"),
        ({"input_ids": torch.tensor([[1, -2, 3]])}, "input_ids must lie"),
        ({"input_ids": torch.tensor([1, 2, 3])}, r"\(batch, sequence_length\)"),
        ({"input_ids": torch.tensor([[1.0, 2.0]])}, "input_ids must hold integers"),
        (
            {"input_ids": torch.tensor([[1, 2]]), "token_type_ids": torch.tensor([[0, 2]])},
            "type_vocab_size",
        ),
        (
            {"input_ids": torch.tensor([[1, 2]]), "token_type_ids": torch.tensor([[0, 1, 1]])},
            "token_type_ids must be",
        ),
        (
            {"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.ones(1, 3)},
            "attention_mask must be",
        ),
        (
            {"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.ones(1, 1, 1, 3)},
            "attention_mask must broadcast",
        ),
        ({}, "exactly one of input_ids and inputs_embeds"),
        ({"inputs_embeds": torch.zeros(1, 3, 31)}, "inputs_embeds must be"),
    ],
)
def test_bad_input_is_refused_before_any_compute(
    kwargs: dict[str, torch.Tensor], match: str
) -> None:
    model = BertModel(tiny())
    calls: list[str] = []
    model.embeddings.register_forward_pre_hook(lambda *_: calls.append("embeddings"))
    with pytest.raises((ValueError, TypeError), match=match):
        model(**kwargs)
    assert calls == []


def test_unknown_attention_implementation_is_refused() -> None:
    model = BertModel(tiny())
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match="attn_implementation"):
        model(ids())


def test_a_checkpoint_that_is_not_bert_shaped_names_the_keys(tmp_path: Path) -> None:
    gpt2 = transformers.GPT2Model(
        transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=99, n_positions=64)
    )
    gpt2.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"incomplete for BertModel.*word_embeddings\.weight"):
        BertModel.from_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------
# The embedded MiniLM checkpoint against transformers' own BERT


@pytest.fixture(scope="module")
def minilm() -> Path:
    from paperports.adapters.checkpoints import minilm_checkpoint

    return minilm_checkpoint()


@pytest.fixture(scope="module")
def minilm_batch(minilm: Path) -> dict[str, torch.Tensor]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    return dict(
        tokenizer(
            ["The quick brown fox jumps over the lazy dog.", "Short one.", "A [SEP] pair"],
            ["with a second sentence", "and another", "third"],
            padding=True,
            return_tensors="pt",
        )
    )


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("padded", [False, True])
def test_minilm_loads_with_no_missing_keys_and_matches_transformers(
    minilm: Path, minilm_batch: dict[str, torch.Tensor], attn_implementation: str, padded: bool
) -> None:
    ours, info = BertModel.from_pretrained(
        minilm, attn_implementation=attn_implementation, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    theirs = transformers.BertModel.from_pretrained(minilm, attn_implementation=attn_implementation)
    ours.eval()
    theirs.eval()
    batch = dict(minilm_batch)
    if not padded:
        batch = {k: v[:1, : int(batch["attention_mask"][0].sum())] for k, v in batch.items()}
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    torch.testing.assert_close(
        a.last_hidden_state[real], b.last_hidden_state[real], atol=1e-5, rtol=0
    )
    torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-5, rtol=0)
    # Padding positions carry no meaning: the padding-free path leaves them at 0; the padded
    # computation agrees there too, to float32 noise of the masked kernel.
    assert bool((a.last_hidden_state[~real] == 0).all())
    ours.config.padding_free = False
    with torch.no_grad():
        a = ours(**batch)
    torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state, atol=1e-4, rtol=0)


def test_minilm_loads_into_heads_and_fine_tunes_from_the_encoder(minilm: Path) -> None:
    model, info = BertForSequenceClassification.from_pretrained(
        minilm, num_labels=2, output_loading_info=True
    )
    assert info["missing_keys"] == {"classifier.weight", "classifier.bias"}
    reference = transformers.BertModel.from_pretrained(minilm)
    torch.testing.assert_close(
        model.bert.encoder.layer[5].output.dense.weight,
        reference.encoder.layer[5].output.dense.weight,
    )


@pytest.mark.parametrize("value", [-1, 2, 0.5, float("nan")])
def test_attention_mask_values_other_than_0_and_1_are_refused(value: float) -> None:
    """They were all treated as "attend"."""
    model = BertModel(tiny())
    mask = torch.ones(2, 5)
    mask[1, 3] = value
    with pytest.raises(ValueError, match="attention_mask must hold 1 for tokens"):
        model(torch.randint(0, 99, (2, 5)), attention_mask=mask)


def test_a_batch_with_every_label_ignored_has_loss_zero_not_nan() -> None:
    for head in (BertForMaskedLM, BertForTokenClassification):
        model = head(tiny())
        tokens = ids(2, 6)
        out = model(tokens, labels=torch.full_like(tokens, -100))
        assert float(out.loss) == 0.0, head.__name__


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"layer_norm_eps": -1e-12}, "layer_norm_eps"),
        ({"hidden_act": "foo"}, "hidden_act must be one of"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_hidden_layers": 1.5}, "num_hidden_layers"),
        ({"hidden_dropout_prob": -0.1}, "hidden_dropout_prob"),
    ],
)
def test_config_values_are_checked(kwargs: dict, match: str) -> None:
    """A negative eps gave NaN; hidden_act='foo' a KeyError at construction."""
    with pytest.raises((ValueError, TypeError), match=match):
        BertConfig(**kwargs)
