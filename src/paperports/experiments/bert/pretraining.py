"""Pre-training a small BERT from scratch with ``Trainer`` on the standard library's text.

The corpus is ``pydoc_data.topics`` split by document: 90% of the topics train, 10% are
held out. The paper's two objectives, through :class:`BertForPreTraining`, the pairs of
:func:`make_next_sentence_pairs` and the masking of :class:`DataCollatorForPreTraining`,
with a WordPiece vocabulary of 4,096 trained on the training topics (the paper trained its
own 30,000-token vocabulary; a small one keeps the MLM softmax cheap on two CPU cores).
Every ``eval_steps`` the held-out pairs (masked once, with a fixed seed) are scored: MLM
loss and accuracy, NSP accuracy. The unigram baseline predicts, at every masked position,
the most frequent token of the training pairs; its cross-entropy is that of the training
unigram distribution (add-one smoothed).
"""

from __future__ import annotations

import math
import random
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import EvalPrediction, Trainer, TrainingArguments

from paperports.adapters.bert_pretraining import (
    DataCollatorForPreTraining,
    make_next_sentence_pairs,
    train_wordpiece,
)
from paperports.adapters.text_corpus import stdlib_documents
from paperports.experiments.trainer_runs import quiet_trainer
from paperports.integrations.transformers import BertConfig, BertForPreTraining

__all__ = ["PretrainingRun", "pretrain"]


@dataclass
class PretrainingRun:
    """What :func:`pretrain` measured."""

    config: dict[str, Any]
    train_pairs: int
    heldout_pairs: int
    steps: list[int] = field(default_factory=list)
    """Steps at which the held-out pairs were evaluated."""
    mlm_loss: list[float] = field(default_factory=list)
    mlm_accuracy: list[float] = field(default_factory=list)
    nsp_accuracy: list[float] = field(default_factory=list)
    train_steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    """Training loss (MLM + NSP) as ``Trainer`` logged it."""
    unigram_accuracy: float = 0.0
    unigram_loss: float = 0.0
    nsp_majority: float = 0.0
    """Held-out accuracy of always answering the more frequent NSP label."""
    seconds: float = 0.0


def _held_out_metrics(prediction: EvalPrediction) -> dict[str, float]:
    predictions: Any = prediction.predictions
    label_ids: Any = prediction.label_ids
    mlm_pred, nsp_pred, nll = predictions
    mlm_labels, nsp_labels = label_ids
    chosen = mlm_labels != -100
    return {
        "mlm_loss": float(nll[chosen].mean()),
        "mlm_accuracy": float((mlm_pred[chosen] == mlm_labels[chosen]).mean()),
        "nsp_accuracy": float((nsp_pred == nsp_labels).mean()),
    }


def _reduce_logits(logits: Any, labels: Any) -> tuple[torch.Tensor, ...]:
    """Keep arg-maxes and per-token MLM cross-entropy, not the ``(N, L, vocab)`` scores."""
    mlm_logits, nsp_logits = logits[0], logits[1]
    mlm_labels = labels[0]
    nll = torch.nn.functional.cross_entropy(
        mlm_logits.transpose(1, 2), mlm_labels, ignore_index=-100, reduction="none"
    )
    return mlm_logits.argmax(-1), nsp_logits.argmax(-1), nll


def pretrain(
    *,
    steps: int,
    seed: int,
    quiet: bool,
    hidden_size: int = 128,
    num_layers: int = 2,
    max_length: int = 128,
    batch_size: int = 32,
    evaluations: int = 10,
    vocab_size: int = 4096,
) -> PretrainingRun:
    """Pre-train a BERT of ``num_layers`` x ``hidden_size`` for ``steps`` Trainer steps."""
    documents = stdlib_documents()
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    cut = max(2, len(order) // 10)
    heldout_docs = [documents[i] for i in order[:cut]]
    train_docs = [documents[i] for i in order[cut:]]
    tokenizer = train_wordpiece(train_docs, vocab_size=vocab_size)
    train = make_next_sentence_pairs(
        train_docs, tokenizer, max_length=max_length, dupe_factor=10, seed=seed
    )
    heldout = make_next_sentence_pairs(
        heldout_docs, tokenizer, max_length=max_length, dupe_factor=5, seed=seed + 1
    )
    collator = DataCollatorForPreTraining(tokenizer)
    # The held-out set is masked once, with a fixed seed, so every evaluation scores the same
    # positions; the training batches are masked afresh each time (dynamic masking).
    frozen = DataCollatorForPreTraining(tokenizer, seed=seed)(heldout)
    heldout_batch = [{k: v[i] for k, v in frozen.items()} for i in range(len(heldout))]

    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=max(1, hidden_size // 64),
        intermediate_size=4 * hidden_size,
        max_position_embeddings=max_length,
    )
    torch.manual_seed(seed)
    model = BertForPreTraining(config)
    eval_steps = max(1, steps // evaluations)
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            per_device_eval_batch_size=64,
            learning_rate=1e-3,
            warmup_steps=max(1, steps // 10),
            weight_decay=0.01,
            lr_scheduler_type="linear",
            eval_strategy="steps",
            eval_steps=eval_steps,
            logging_steps=eval_steps,
            label_names=["labels", "next_sentence_label"],
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            seed=seed,
            disable_tqdm=True,  # quiet_trainer shows our own bar
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=train,
            eval_dataset=heldout_batch,
            data_collator=collator,
            compute_metrics=_held_out_metrics,
            preprocess_logits_for_metrics=_reduce_logits,  # type: ignore[arg-type]
        )
        quiet_trainer(trainer, quiet=quiet, desc="pre-training")
        trainer.train()

    run = PretrainingRun(
        config={
            k: config.to_dict()[k]
            for k in (
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
            )
        },
        train_pairs=len(train),
        heldout_pairs=len(heldout),
    )
    for entry in trainer.state.log_history:
        if "eval_mlm_accuracy" in entry:
            run.steps.append(int(entry["step"]))
            run.mlm_loss.append(float(entry["eval_mlm_loss"]))
            run.mlm_accuracy.append(float(entry["eval_mlm_accuracy"]))
            run.nsp_accuracy.append(float(entry["eval_nsp_accuracy"]))
        if "loss" in entry:
            run.train_steps.append(int(entry["step"]))
            run.train_loss.append(float(entry["loss"]))
        if "train_runtime" in entry:
            run.seconds = float(entry["train_runtime"])
    _unigram_baseline(run, train, frozen, set(tokenizer.all_special_ids))
    return run


def _unigram_baseline(
    run: PretrainingRun,
    train: list[dict[str, Any]],
    heldout: dict[str, torch.Tensor],
    special: set[int],
) -> None:
    # Special tokens are never masked, so the baseline predicts among the others.
    counts: Counter[int] = Counter(t for e in train for t in e["input_ids"] if t not in special)
    vocab = int(heldout["input_ids"].max()) + 1
    total = sum(counts.values())
    most_common = counts.most_common(1)[0][0]
    chosen = heldout["labels"][heldout["labels"] != -100]
    run.unigram_accuracy = float((chosen == most_common).float().mean())
    size = max(vocab, max(counts) + 1)
    probs = np.array([counts.get(t, 0) + 1.0 for t in range(size)]) / (total + size)
    run.unigram_loss = float(-np.mean(np.log(probs[chosen.numpy()])))
    labels = heldout["next_sentence_label"].float()
    run.nsp_majority = float(max(labels.mean(), 1 - labels.mean()))
    if not math.isfinite(run.unigram_loss):
        raise RuntimeError("unigram baseline loss is not finite")
