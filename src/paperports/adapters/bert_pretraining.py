"""BERT's pre-training data (Devlin et al. 2018, section 3.1 and appendix A.1).

Two tasks from raw text, for :class:`paperports.integrations.transformers.BertForPreTraining`:

- **next-sentence prediction**: ``[CLS] A [SEP] B [SEP]`` where B is the text that follows A
  in the same document half of the time (``next_sentence_label = 0``, "IsNext") and a span
  from another, random document otherwise (``1``, "NotNext"); A and B are runs of whole
  sentences packed up to ``max_length`` tokens, with segment ids 0 for ``[CLS] A [SEP]`` and
  1 for ``B [SEP]``. :func:`make_next_sentence_pairs` follows the paper's reference
  ``create_pretraining_data.py``: a target length (shorter with probability
  ``short_seq_prob``), a random split point, unused sentences put back after a random B, and
  the longer of A and B trimmed at a random end until the pair fits. As in the reference, a
  chunk of a single sentence always gets a random B, so random Bs are more than half of the
  pairs when sentences are long compared with ``max_length`` (about 55% at 128 tokens on
  the standard library's text).
- **masked LM**: 15% of the tokens chosen, of which 80% become ``[MASK]``, 10% a random
  token and 10% stay unchanged. transformers' ``DataCollatorForLanguageModeling`` does exactly
  this; :class:`DataCollatorForPreTraining` only adds the NSP labels to its batches and pads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from paperports._checks import check_float, check_int, check_probability, check_sequence_of
from paperports._imports import require

__all__ = ["DataCollatorForPreTraining", "make_next_sentence_pairs", "train_wordpiece"]

IS_NEXT, NOT_NEXT = 0, 1


def _special_ids(tokenizer: Any) -> tuple[int, int]:
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls_id is None or sep_id is None:
        raise ValueError(
            "the tokenizer needs [CLS] and [SEP] tokens (cls_token_id and sep_token_id) for "
            "BERT's sentence pairs"
        )
    return int(cls_id), int(sep_id)


def _trim_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer of ``a`` and ``b`` one token at a time, from a random end."""
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def make_next_sentence_pairs(
    documents: Sequence[Sequence[str]],
    tokenizer: Any,
    max_length: int = 128,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 1,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Build the paper's next-sentence pairs from documents of sentences.

    Args:
        documents: Each document a sequence of sentences (for example from
            :func:`paperports.adapters.text_corpus.stdlib_documents` or
            :func:`~paperports.adapters.text_corpus.read_documents`). At least two documents
            are needed, for the random B.
        tokenizer: A transformers BERT tokenizer (WordPiece, with ``[CLS]`` and ``[SEP]``).
        max_length: Tokens per example, special tokens included (the paper: 128 for 90% of
            pre-training, then 512).
        short_seq_prob: Probability of a shorter target length, so that the model also sees
            short inputs (the paper's 0.1).
        dupe_factor: Passes over the corpus, each with different pairs (the reference used 10
            with static masks; the collator masks afresh at every batch).
        seed: Seed of the pairing.

    Returns:
        Examples with ``input_ids``, ``token_type_ids`` (lists of ints) and
        ``next_sentence_label`` (0: B follows A; 1: B is random), ready for
        :class:`DataCollatorForPreTraining`.

    Raises:
        TypeError: documents that are not sequences of sentences (a plain string would be
            read character by character).
        ValueError: fewer than two documents with text, ``max_length`` under 8,
            probabilities out of range.
    """
    who = "make_next_sentence_pairs"
    check_sequence_of("documents", documents, (list, tuple), who=who)
    for i, document in enumerate(documents):
        check_sequence_of(f"documents[{i}]", document, str, who=who)
    max_length = check_int("max_length", max_length, minimum=8, who=who)
    short_seq_prob = check_probability("short_seq_prob", short_seq_prob, who=who)
    dupe_factor = check_int("dupe_factor", dupe_factor, minimum=1, who=who)
    seed = check_int("seed", seed, who=who)
    cls_id, sep_id = _special_ids(tokenizer)
    tokenized = [
        [
            ids
            for ids in tokenizer(list(doc), add_special_tokens=False, verbose=False)["input_ids"]
            if ids
        ]
        for doc in documents
        if doc
    ]
    tokenized = [doc for doc in tokenized if doc]  # documents with no token give no pair
    if len(tokenized) < 2:
        raise ValueError(
            f"{who}: next-sentence pairs need at least two documents with text (a random B "
            f"comes from another document), got {len(tokenized)} of {len(documents)}"
        )
    rng = random.Random(seed)
    max_tokens = max_length - 3  # [CLS], [SEP], [SEP]
    examples: list[dict[str, Any]] = []
    for _ in range(dupe_factor):
        for index, document in enumerate(tokenized):
            examples.extend(
                _pairs_from_document(tokenized, index, document, max_tokens, short_seq_prob, rng)
            )
    rng.shuffle(examples)
    for example in examples:
        a, b = example.pop("a"), example.pop("b")
        example["input_ids"] = [cls_id, *a, sep_id, *b, sep_id]
        example["token_type_ids"] = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return examples


def _pairs_from_document(
    tokenized: list[list[list[int]]],
    index: int,
    document: list[list[int]],
    max_tokens: int,
    short_seq_prob: float,
    rng: random.Random,
) -> list[dict[str, Any]]:
    target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
    pairs: list[dict[str, Any]] = []
    chunk: list[list[int]] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                split = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for sentence in chunk[:split] for t in sentence]
                if len(chunk) == 1 or rng.random() < 0.5:
                    label = NOT_NEXT
                    b = _random_span(tokenized, index, max(1, target - len(a)), rng)
                    i -= len(chunk) - split  # the unused sentences start the next chunk
                else:
                    label = IS_NEXT
                    b = [t for sentence in chunk[split:] for t in sentence]
                _trim_pair(a, b, max_tokens, rng)
                if a and b:
                    pairs.append({"a": a, "b": b, "next_sentence_label": label})
            chunk, length = [], 0
            target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
        i += 1
    return pairs


def _random_span(
    tokenized: list[list[list[int]]], index: int, target: int, rng: random.Random
) -> list[int]:
    """Sentences from a random other document, from a random start, up to ``target`` tokens."""
    other = rng.randrange(len(tokenized) - 1)
    other += other >= index  # never the current document
    document = tokenized[other]
    start = rng.randrange(len(document))
    span: list[int] = []
    for sentence in document[start:]:
        span.extend(sentence)
        if len(span) >= target:
            break
    return span


def train_wordpiece(
    documents: Sequence[Sequence[str]], vocab_size: int = 4096, lowercase: bool = True
) -> Any:
    """Train an uncased WordPiece vocabulary on ``documents``, as the paper did on its corpus.

    Uses the ``tokenizers`` library that transformers depends on; returns a transformers
    BERT tokenizer (``[PAD]`` 0, ``[UNK]`` 1, ``[CLS]`` 2, ``[SEP]`` 3, ``[MASK]`` 4) that
    ``save_pretrained`` / ``AutoTokenizer.from_pretrained`` round-trip. A small vocabulary
    keeps the masked-LM softmax cheap for pre-training small models on small corpora.

    The trainer breaks ties between equally frequent merges differently in each process, so
    two trainings on the same text can give different vocabularies: save the tokenizer with
    what is trained on it (as the BERT ablation's resumable runs do) rather than training it
    again.
    """
    require("transformers", "transformers", "tokenizers", feature="train_wordpiece")
    from tokenizers.implementations import BertWordPieceTokenizer  # type: ignore[attr-defined]
    from transformers import BertTokenizer

    check_int("vocab_size", vocab_size, minimum=100, who="train_wordpiece")
    check_sequence_of("documents", documents, (list, tuple), who="train_wordpiece")
    if not any(sentence.strip() for document in documents for sentence in document):
        raise ValueError("train_wordpiece: the documents hold no text to learn a vocabulary from")
    specials: list[Any] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece = BertWordPieceTokenizer(lowercase=lowercase)
    wordpiece.train_from_iterator(
        (sentence for document in documents for sentence in document),
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=specials,
        show_progress=False,
    )
    return BertTokenizer(
        tokenizer_object=wordpiece._tokenizer,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        do_lower_case=lowercase,
    )


class DataCollatorForPreTraining:
    """Batches for :class:`~paperports.integrations.transformers.BertForPreTraining`.

    Pads the examples of :func:`make_next_sentence_pairs`, masks them with transformers'
    ``DataCollatorForLanguageModeling`` (15% chosen; 80% ``[MASK]``, 10% random, 10% kept;
    special tokens and padding never chosen) and adds ``next_sentence_label``. Pass it to
    ``Trainer(data_collator=...)``.

    Args:
        tokenizer: The tokenizer the examples were made with.
        mlm_probability: Share of tokens chosen for prediction (the paper's 0.15).
        pad_to_multiple_of: Optional padding granularity.
        seed: Optional seed of the masking, for reproducible batches.
    """

    def __init__(
        self,
        tokenizer: Any,
        mlm_probability: float = 0.15,
        pad_to_multiple_of: int | None = None,
        seed: int | None = None,
    ) -> None:
        require("transformers", "transformers", feature="DataCollatorForPreTraining")
        from transformers import DataCollatorForLanguageModeling

        _special_ids(tokenizer)
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer needs a [MASK] token for masked-LM pre-training")
        check_float(
            "mlm_probability", mlm_probability, minimum=0.0, maximum=1.0, open_low=True,
            who="DataCollatorForPreTraining",
        )  # fmt: skip
        if pad_to_multiple_of is not None:
            check_int("pad_to_multiple_of", pad_to_multiple_of, minimum=1)
        self.tokenizer = tokenizer
        self.mlm = DataCollatorForLanguageModeling(
            tokenizer,
            mlm=True,
            mlm_probability=mlm_probability,
            mask_replace_prob=0.8,
            random_replace_prob=0.1,
            pad_to_multiple_of=pad_to_multiple_of,
            return_tensors="pt",
            seed=seed,
        )

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not examples or "next_sentence_label" not in examples[0]:
            raise ValueError(
                "DataCollatorForPreTraining takes examples with input_ids, token_type_ids and "
                "next_sentence_label, as make_next_sentence_pairs builds them"
            )
        raw = [e.get("next_sentence_label") for e in examples]
        bad = [(i, v) for i, v in enumerate(raw) if v not in (IS_NEXT, NOT_NEXT) or v is True]
        if bad:
            i, v = bad[0]
            raise ValueError(
                f"examples[{i}]['next_sentence_label'] must be {IS_NEXT} (B follows A) or "
                f"{NOT_NEXT} (B is random), got {v!r}"
            )
        labels = torch.tensor([int(v) for v in raw])  # type: ignore[arg-type]
        features = [{k: v for k, v in e.items() if k != "next_sentence_label"} for e in examples]
        batch = dict(self.mlm(features))
        batch["next_sentence_label"] = labels
        return batch
