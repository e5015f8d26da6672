"""BERT's pre-training pairs and masking, with the MiniLM WordPiece tokenizer."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers

from paperports.adapters.bert_pretraining import (
    DataCollatorForPreTraining,
    make_next_sentence_pairs,
)
from paperports.adapters.checkpoints import minilm_checkpoint
from paperports.adapters.text_corpus import stdlib_documents


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return transformers.AutoTokenizer.from_pretrained(minilm_checkpoint())


def documents() -> list[list[str]]:
    """Three documents whose sentences name their document and position."""
    return [
        [f"document {d} sentence {s} says {'abc'[d]} things." for s in range(12)] for d in range(3)
    ]


def test_pairs_are_cls_a_sep_b_sep_with_segments(tokenizer: Any) -> None:
    examples = make_next_sentence_pairs(documents(), tokenizer, max_length=40, seed=1)
    assert examples
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    for e in examples:
        ids, types = e["input_ids"], e["token_type_ids"]
        assert len(ids) == len(types) <= 40
        assert ids[0] == cls_id and ids[-1] == sep_id and ids.count(sep_id) == 2
        first_sep = ids.index(sep_id)
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        assert e["next_sentence_label"] in (0, 1)


def test_next_sentence_labels_say_whether_b_follows_a(tokenizer: Any) -> None:
    examples = make_next_sentence_pairs(
        documents(), tokenizer, max_length=64, short_seq_prob=0.0, dupe_factor=4, seed=2
    )
    labels = [e["next_sentence_label"] for e in examples]
    assert 0.3 < sum(labels) / len(labels) < 0.7
    for e in examples:
        text = tokenizer.decode(e["input_ids"])
        a, b = text.split("[SEP]")[:2]
        doc_a = {w for w in a.split() if w in ("a", "b", "c")}
        doc_b = {w for w in b.split() if w in ("a", "b", "c")}
        if e["next_sentence_label"] == 0:
            assert doc_a == doc_b  # same document
        else:
            assert not doc_a & doc_b  # a different document


def test_pairs_are_reproducible_and_seeded(tokenizer: Any) -> None:
    first = make_next_sentence_pairs(documents(), tokenizer, max_length=40, seed=3)
    again = make_next_sentence_pairs(documents(), tokenizer, max_length=40, seed=3)
    other = make_next_sentence_pairs(documents(), tokenizer, max_length=40, seed=4)
    assert first == again
    assert first != other


def test_stdlib_corpus_gives_full_length_pairs(tokenizer: Any) -> None:
    examples = make_next_sentence_pairs(stdlib_documents(), tokenizer, max_length=128, seed=0)
    assert len(examples) > 800
    lengths = [len(e["input_ids"]) for e in examples]
    assert max(lengths) == 128 and sum(lengths) / len(lengths) > 100


def test_collator_masks_15_percent_80_10_10(tokenizer: Any) -> None:
    examples = make_next_sentence_pairs(stdlib_documents(), tokenizer, max_length=128, seed=0)
    batch = DataCollatorForPreTraining(tokenizer, seed=0)(examples[:256])
    assert set(batch) == {
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "labels",
        "next_sentence_label",
    }
    chosen = batch["labels"] != -100
    real = batch["attention_mask"].bool()
    special = torch.isin(
        batch["labels"], torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, 0])
    )
    assert not (chosen & ~real).any() and not (chosen & special).any()
    rate = chosen.sum() / real.sum()
    assert 0.13 < rate < 0.17
    masked = (batch["input_ids"] == tokenizer.mask_token_id) & chosen
    kept = (batch["input_ids"] == batch["labels"]) & chosen
    assert 0.77 < masked.sum() / chosen.sum() < 0.83
    assert 0.08 < kept.sum() / chosen.sum() < 0.12
    expected = torch.tensor([e["next_sentence_label"] for e in examples[:256]])
    assert torch.equal(batch["next_sentence_label"], expected)


def test_bad_arguments_are_refused(tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="at least two documents"):
        make_next_sentence_pairs(documents()[:1], tokenizer)
    with pytest.raises(ValueError, match="max_length"):
        make_next_sentence_pairs(documents(), tokenizer, max_length=4)
    with pytest.raises(ValueError, match="next_sentence_label"):
        DataCollatorForPreTraining(tokenizer)([{"input_ids": [101, 102]}])


def test_documents_given_as_strings_are_refused(tokenizer: Any) -> None:
    """A plain string was read as a document of one-character sentences."""
    with pytest.raises(TypeError, match=r"documents\[0\] must be a list or tuple, got str"):
        make_next_sentence_pairs(["first document.", "second document."], tokenizer)
    with pytest.raises(TypeError, match=r"documents\[1\]\[0\] must be a str"):
        make_next_sentence_pairs([["one."], [2]], tokenizer)


def test_documents_without_text_are_left_out_or_refused(tokenizer: Any) -> None:
    pairs = make_next_sentence_pairs([*documents(), [], ["", " "]], tokenizer)
    assert pairs
    with pytest.raises(ValueError, match="at least two documents with text"):
        make_next_sentence_pairs([documents()[0], [""], []], tokenizer)


@pytest.mark.parametrize("label", [2, -1, True, None])
def test_a_next_sentence_label_other_than_0_or_1_is_refused(tokenizer: Any, label: Any) -> None:
    example = make_next_sentence_pairs(documents(), tokenizer)[0] | {"next_sentence_label": label}
    with pytest.raises(ValueError, match=r"next_sentence_label'\] must be 0 .* or 1"):
        DataCollatorForPreTraining(tokenizer)([example])
