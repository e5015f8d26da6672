"""Fine-tuning the MiniLM checkpoint with ``Trainer``: ours against ``transformers``' BERT.

The task, built offline from the standard library's documentation topics: given two
sentences, does the second directly follow the first in the same topic (label 1), or was
it drawn from another topic (label 0)? Half of the pairs of each kind; topics are split
80/20 between training and test, so no test sentence is seen in training.

Both models start from the same weights: :class:`BertForSequenceClassification` loads the
checkpoint, then takes the randomly initialised classifier of
``transformers.BertForSequenceClassification`` (a strict ``load_state_dict``, which also
checks that every parameter name matches). The two are then trained by identical
``Trainer`` runs (same seed, data, order and hyper-parameters).
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers import Trainer, TrainingArguments

from paperports.adapters.text_corpus import stdlib_documents
from paperports.experiments.trainer_runs import quiet_trainer
from paperports.integrations.transformers import BertForSequenceClassification

__all__ = ["FinetuneRun", "consecutive_sentence_pairs", "finetune_both"]


def consecutive_sentence_pairs(documents: list[list[str]], seed: int) -> list[tuple[str, str, int]]:
    """``(first, second, label)``: label 1 when ``second`` follows ``first`` in its document,
    0 when ``second`` is a random sentence of another document; balanced by a fair coin."""
    rng = random.Random(seed)
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if rng.random() < 0.5:
                pairs.append((document[i], document[i + 1], 1))
            else:
                other = rng.randrange(len(documents) - 1)
                other += other >= d
                pairs.append((document[i], rng.choice(documents[other]), 0))
    rng.shuffle(pairs)
    return pairs


@dataclass
class FinetuneRun:
    """One model's fine-tuning: held-out accuracy, logged training losses, time."""

    accuracy: float
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    predictions: list[int] = field(default_factory=list)


def _encode(
    tokenizer: Any, pairs: list[tuple[str, str, int]], max_length: int
) -> list[dict[str, Any]]:
    enc = tokenizer(
        [p[0] for p in pairs], [p[1] for p in pairs], truncation=True, max_length=max_length
    )
    return [
        {
            "input_ids": enc["input_ids"][i],
            "token_type_ids": enc["token_type_ids"][i],
            "attention_mask": enc["attention_mask"][i],
            "labels": pairs[i][2],
        }
        for i in range(len(pairs))
    ]


def _train(
    model: torch.nn.Module,
    tokenizer: Any,
    train: list[dict[str, Any]],
    test: list[dict[str, Any]],
    *,
    epochs: float,
    seed: int,
    quiet: bool,
) -> FinetuneRun:
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            num_train_epochs=epochs,
            per_device_train_batch_size=16,
            per_device_eval_batch_size=64,
            learning_rate=5e-5,
            warmup_steps=10,
            weight_decay=0.01,
            logging_steps=10,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            seed=seed,
            data_seed=seed,
            disable_tqdm=True,  # quiet_trainer shows our own bar
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=train,
            data_collator=transformers.DataCollatorWithPadding(tokenizer),
        )
        library = type(model).__module__.split(".")[0]  # paperports or transformers
        quiet_trainer(trainer, quiet=quiet, desc=f"fine-tuning {library}'s")
        trainer.train()
        output = trainer.predict(test)  # type: ignore[arg-type]
    predictions = np.asarray(output.predictions).argmax(-1)
    labels = np.asarray(output.label_ids)
    history = trainer.state.log_history
    return FinetuneRun(
        accuracy=float((predictions == labels).mean()),
        losses=[float(h["loss"]) for h in history if "loss" in h],
        seconds=float(next(h["train_runtime"] for h in history if "train_runtime" in h)),
        predictions=[int(p) for p in predictions],
    )


def finetune_both(
    checkpoint: Path,
    *,
    epochs: float,
    max_length: int,
    seed: int,
    quiet: bool,
    train_limit: int | None = None,
) -> tuple[FinetuneRun, FinetuneRun, dict[str, Any]]:
    """Fine-tune ours and ``transformers.BertForSequenceClassification`` identically.

    Ours runs the padded computation, as transformers' does (``padding_free=False``): the
    padding-free path gives the same values but draws its dropout masks over the real
    tokens only, so the two runs would part after the first dropout. ``train_limit`` keeps
    only the first pairs of the (shuffled) training set, for a quick run. Returns ``(ours,
    transformers', data description)``.
    """
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    documents = stdlib_documents()
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    cut = len(order) // 5
    test_docs = [documents[i] for i in order[:cut]]
    train_docs = [documents[i] for i in order[cut:]]
    train_pairs = consecutive_sentence_pairs(train_docs, seed)[:train_limit]
    train = _encode(tokenizer, train_pairs, max_length)
    test = _encode(tokenizer, consecutive_sentence_pairs(test_docs, seed + 1), max_length)

    torch.manual_seed(seed)
    theirs = transformers.BertForSequenceClassification.from_pretrained(checkpoint, num_labels=2)
    ours = BertForSequenceClassification.from_pretrained(
        checkpoint, num_labels=2, padding_free=False
    )
    ours.load_state_dict(theirs.state_dict(), strict=True)  # same start, same names

    runs = [
        _train(model, tokenizer, train, test, epochs=epochs, seed=seed, quiet=quiet)
        for model in (ours, theirs)
    ]
    data = {
        "train_pairs": len(train),
        "test_pairs": len(test),
        "train_topics": len(train_docs),
        "test_topics": len(test_docs),
        "test_positive_share": float(np.mean([t["labels"] for t in test])),
        "max_length": max_length,
        "epochs": epochs,
    }
    return runs[0], runs[1], data
