r"""The paper's ablation of pre-training objectives (Devlin et al. 2018, Table 5), scaled down.

Same-size BERTs pre-trained with equal budgets on the docstrings of installed packages
(:func:`~paperports.adapters.text_corpus.package_documents`), then fine-tuned on two tasks
built from docstrings no pre-training step saw (:mod:`paperports.adapters.docstring_tasks`):

- ``mlm_nsp``: BERT, masked LM and next-sentence prediction (:class:`BertForPreTraining`);
- ``mlm``: masked LM only, on the same pairs (the paper's "No NSP");
- ``ltr``: a left-to-right LM (causal attention, each position predicts the next token),
  the same encoder with a causal 4-D attention mask, kept causal when fine-tuned (the
  paper's "LTR & No NSP", GPT-style);
- ``ltr_bilstm``: ``ltr`` with a randomly initialised bidirectional LSTM on top when
  fine-tuned (the paper's "+ BiLSTM");
- ``none``: no pre-training, the same encoder from random weights.

Fine-tuning: two span extractions (start and end logits over the tokens, SQuAD's
token-overlap F1 of the predicted span): a parameter's description asked by its name, where
reading to the left finds the span, and its name asked by the description, where only
reading to the right does; and sentence-pair classification (accuracy); several seeds.
Bidirectional encoders classify from the pooled ``[CLS]`` state; left-to-right ones from
their last real token, the only one that has read the whole input.
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import re
import shutil
import string
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import Trainer, TrainingArguments

import paperports.adapters.bert_pretraining
import paperports.adapters.docstring_tasks
import paperports.adapters.text_corpus
from paperports.adapters.bert_pretraining import (
    DataCollatorForPreTraining,
    make_next_sentence_pairs,
    train_wordpiece,
)
from paperports.adapters.docstring_tasks import DOWNSTREAM_PACKAGES, pair_examples, span_examples
from paperports.adapters.text_corpus import package_documents
from paperports.experiments import experiment_main
from paperports.experiments.records import code_text, damaged, read_record, write_record
from paperports.experiments.trainer_runs import quiet_trainer
from paperports.integrations.transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertModel,
)
from paperports.registry import RunContext

__all__ = [
    "FULL",
    "PAPER_COLUMN",
    "PAPER_TABLE5",
    "PRETRAIN_PACKAGES",
    "QUICK",
    "TASKS",
    "VARIANTS",
    "AblationBudget",
    "LeftToRightCollator",
    "causal_mask",
    "finetune",
    "pretrain_variant",
    "run_ablation",
    "span_f1",
]

PRETRAIN_PACKAGES = ("torch", "transformers", "sympy", "ray", "jax", "networkx", "matplotlib")
"""The pre-training corpus: docstrings of these packages (none of the downstream ones)."""

VARIANTS = {
    "mlm_nsp": "BERT (MLM + NSP)",
    "mlm": "MLM only (no NSP)",
    "ltr": "left-to-right LM (no NSP)",
    "ltr_bilstm": "left-to-right + BiLSTM",
    "none": "no pre-training",
}

PAPER_TABLE5 = {
    "mlm_nsp": {"MNLI-m": 84.4, "QNLI": 88.4, "MRPC": 86.7, "SST-2": 92.7, "SQuAD F1": 88.5},
    "mlm": {"MNLI-m": 83.9, "QNLI": 84.9, "MRPC": 86.5, "SST-2": 92.6, "SQuAD F1": 87.9},
    "ltr": {"MNLI-m": 82.1, "QNLI": 84.3, "MRPC": 77.5, "SST-2": 92.1, "SQuAD F1": 77.8},
    "ltr_bilstm": {"MNLI-m": 82.1, "QNLI": 84.1, "MRPC": 75.7, "SST-2": 91.6, "SQuAD F1": 84.9},
}
"""The paper's Table 5 (BERT-BASE, dev sets): accuracy, and F1 for SQuAD 1.1."""


@dataclass(frozen=True)
class AblationBudget:
    """Sizes and budgets of one ablation run."""

    corpus_chars: int
    pretrain_steps: int
    finetune_steps: int
    seeds: int
    hidden_size: int = 128
    num_layers: int = 2
    max_length: int = 128
    span_length: int = 320
    vocab_size: int = 4096
    batch_size: int = 32
    span_examples: int = 3000
    pair_examples: int = 4000


def causal_mask(attention_mask: Tensor) -> Tensor:
    """A ``(B, 1, L, L)`` boolean mask from a ``(B, L)`` padding mask: position ``i`` attends
    to the real tokens at ``j <= i`` (a left-to-right model)."""
    length = attention_mask.size(1)
    lower = torch.ones(length, length, dtype=torch.bool, device=attention_mask.device).tril()
    mask: Tensor = lower[None, None] & attention_mask.bool()[:, None, None, :]
    return mask


class LeftToRightCollator:
    """Batches of :func:`make_next_sentence_pairs` examples for a left-to-right LM: padded
    ids, the causal mask and, as ``labels``, each position's next token (``-100`` at the
    last real token and at padding)."""

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Tensor]:
        length = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), length), self.pad_token_id, dtype=torch.long)
        types = torch.zeros_like(ids)
        real = torch.zeros_like(ids)
        for i, e in enumerate(examples):
            n = len(e["input_ids"])
            ids[i, :n] = torch.tensor(e["input_ids"])
            types[i, :n] = torch.tensor(e["token_type_ids"])
            real[i, :n] = 1
        labels = torch.full_like(ids, -100)
        labels[:, :-1] = torch.where(real[:, 1:] > 0, ids[:, 1:], -100)
        return {
            "input_ids": ids,
            "token_type_ids": types,
            "attention_mask": causal_mask(real),
            "labels": labels,
        }


class _WithoutNextSentence:
    """The pre-training collator's masking, without the next-sentence labels (MLM only)."""

    def __init__(self, tokenizer: Any) -> None:
        self.inner = DataCollatorForPreTraining(tokenizer)

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Tensor]:
        batch = self.inner(examples)
        batch.pop("next_sentence_label")
        return batch


def _config(tokenizer: Any, budget: AblationBudget) -> BertConfig:
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=budget.hidden_size,
        num_hidden_layers=budget.num_layers,
        num_attention_heads=max(1, budget.hidden_size // 64),
        intermediate_size=4 * budget.hidden_size,
        max_position_embeddings=budget.span_length,
    )


def pretrain_variant(
    variant: str,
    pairs: list[dict[str, Any]],
    tokenizer: Any,
    budget: AblationBudget,
    seed: int,
    quiet: bool = True,
    heldout: list[dict[str, Any]] | None = None,
) -> tuple[BertModel, dict[str, float]]:
    """Pre-train one variant's encoder with ``Trainer`` for ``budget.pretrain_steps`` on the
    same next-sentence ``pairs``; the encoder and its measures: the final training loss
    and, on the ``heldout`` pairs, the accuracy of its objective's predictions (masked
    tokens, next tokens, next-sentence labels with the majority answer beside). Nothing
    for ``"none"``, which is not pre-trained."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    torch.manual_seed(seed)
    config = _config(tokenizer, budget)
    if variant == "none":
        return BertModel(config), {}
    model: nn.Module
    collator: Any
    if variant == "mlm_nsp":
        model, collator = BertForPreTraining(config), DataCollatorForPreTraining(tokenizer)
        labels = ["labels", "next_sentence_label"]
    elif variant == "mlm":
        model, collator, labels = (
            BertForMaskedLM(config),
            _WithoutNextSentence(tokenizer),
            ["labels"],
        )
    else:  # ltr, ltr_bilstm: one left-to-right pre-training serves both
        model, labels = BertForMaskedLM(config), ["labels"]
        collator = LeftToRightCollator(tokenizer.pad_token_id)
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            max_steps=budget.pretrain_steps,
            per_device_train_batch_size=budget.batch_size,
            learning_rate=1e-3,
            warmup_steps=max(1, budget.pretrain_steps // 10),
            weight_decay=0.01,
            lr_scheduler_type="linear",
            logging_steps=max(1, budget.pretrain_steps // 10),
            label_names=labels,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            seed=seed,
            disable_tqdm=True,
            remove_unused_columns=False,  # the collators read next_sentence_label
        )
        trainer = Trainer(model=model, args=args, train_dataset=pairs, data_collator=collator)
        quiet_trainer(trainer, quiet=quiet, desc=f"pre-training {variant}")
        trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    measures = {"final_loss": float(losses[-1]) if losses else float("nan")}
    if heldout:
        measures |= _heldout_accuracy(variant, model, heldout, tokenizer, seed)
    encoder = model.bert  # type: ignore[union-attr]
    assert isinstance(encoder, BertModel)
    return encoder, measures


@torch.no_grad()
def _heldout_accuracy(
    variant: str, model: nn.Module, heldout: list[dict[str, Any]], tokenizer: Any, seed: int
) -> dict[str, float]:
    """Accuracy of the pre-training predictions on held-out pairs (masks drawn with
    ``seed``): masked or next tokens; for ``mlm_nsp`` also next-sentence labels."""
    model.eval()
    if variant == "ltr":
        batch = LeftToRightCollator(tokenizer.pad_token_id)(heldout)
    else:
        batch = DataCollatorForPreTraining(tokenizer, seed=seed)(heldout)
    labels = batch["labels"]
    nsp = batch.pop("next_sentence_label", None) if variant == "mlm_nsp" else None
    batch.pop("next_sentence_label", None)
    right, total, nsp_right = 0, 0, 0
    for i in range(0, labels.size(0), 64):
        part = {k: v[i : i + 64] for k, v in batch.items() if k != "labels"}
        out = model(**part)
        logits = out.prediction_logits if variant == "mlm_nsp" else out.logits
        chosen = labels[i : i + 64] != -100
        right += int((logits.argmax(-1)[chosen] == labels[i : i + 64][chosen]).sum())
        total += int(chosen.sum())
        if nsp is not None:
            nsp_right += int((out.seq_relationship_logits.argmax(-1) == nsp[i : i + 64]).sum())
    result = {"heldout_token_accuracy": right / max(total, 1)}
    if nsp is not None:
        share = float(nsp.float().mean())
        result |= {
            "heldout_nsp_accuracy": nsp_right / nsp.numel(),
            "nsp_majority": max(share, 1 - share),
        }
    return result


# ---------------------------------------------------------------------------- fine-tuning


class _Head(nn.Module):
    """An encoder (causal or not, optionally with a BiLSTM on top) and a linear output:
    per token (span start / end) or per sequence (classes)."""

    def __init__(
        self, encoder: BertModel, causal: bool, bilstm: bool, outputs: int, per_token: bool
    ) -> None:
        super().__init__()
        self.encoder, self.causal, self.per_token = encoder, causal, per_token
        width = encoder.config.hidden_size
        self.lstm = (
            nn.LSTM(width, width // 2, batch_first=True, bidirectional=True) if bilstm else None
        )
        self.out = nn.Linear(width, outputs)
        # an encoder pre-trained without NSP has no pooler: classify through a fresh one
        self.pool = (
            nn.Sequential(nn.Linear(width, width), nn.Tanh())
            if encoder.pooler is None and not per_token and not causal
            else None
        )

    def forward(self, input_ids: Tensor, token_type_ids: Tensor, attention_mask: Tensor) -> Tensor:
        mask = causal_mask(attention_mask) if self.causal else attention_mask
        encoded = self.encoder(
            input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=mask
        )
        states: Tensor = encoded.last_hidden_state
        if self.lstm is not None:
            states, _ = self.lstm(states)
        if self.per_token:
            out: Tensor = self.out(states)
            return out
        if self.causal:  # the last real token has read the whole input
            last = attention_mask.sum(1) - 1
            return self.out(states[torch.arange(states.size(0)), last])  # type: ignore[no-any-return]
        if self.pool is not None:
            return self.out(self.pool(states[:, 0]))  # type: ignore[no-any-return]
        return self.out(encoded.pooler_output)  # type: ignore[no-any-return]


def _encode_spans(examples: list[dict[str, Any]], tokenizer: Any, length: int) -> dict[str, Tensor]:
    """Token ids and the answer's start / end token of each example whose answer survives
    truncation to ``length`` tokens (the others are dropped)."""
    enc = tokenizer(
        [e["question"] for e in examples],
        [e["context"] for e in examples],
        truncation="only_second",
        max_length=length,
        padding="max_length",
        return_offsets_mapping=True,
        return_tensors="pt",
    )
    starts, ends, keep = [], [], []
    for i, e in enumerate(examples):
        a0 = e["answers"]["answer_start"][0]
        a1 = a0 + len(e["answers"]["text"][0])
        in_context = enc["token_type_ids"][i] == 1
        offsets = enc["offset_mapping"][i]
        first = [t for t in range(length) if in_context[t] and offsets[t][0] <= a0 < offsets[t][1]]
        last = [t for t in range(length) if in_context[t] and offsets[t][0] < a1 <= offsets[t][1]]
        if first and last:
            starts.append(first[0])
            ends.append(last[-1])
            keep.append(i)
    index = torch.tensor(keep, dtype=torch.long)
    return {
        "input_ids": enc["input_ids"][index],
        "token_type_ids": enc["token_type_ids"][index],
        "attention_mask": enc["attention_mask"][index],
        "start": torch.tensor(starts),
        "end": torch.tensor(ends),
    }


def _encode_pairs(examples: list[dict[str, Any]], tokenizer: Any, length: int) -> dict[str, Tensor]:
    enc = tokenizer(
        [e["summary"] for e in examples],
        [e["description"] for e in examples],
        truncation="longest_first",
        max_length=length,
        padding="max_length",
        return_tensors="pt",
    )
    return {
        "input_ids": enc["input_ids"],
        "token_type_ids": enc["token_type_ids"],
        "attention_mask": enc["attention_mask"],
        "label": torch.tensor([int(e["label"]) for e in examples]),
    }


_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _normalise(text: str) -> list[str]:
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return _ARTICLES.sub(" ", text).split()


def span_f1(predicted: str, truth: str) -> float:
    """SQuAD's token-overlap F1 of two answers (lower-cased, punctuation and articles
    removed)."""
    p, t = _normalise(predicted), _normalise(truth)
    common = sum((collections.Counter(p) & collections.Counter(t)).values())
    if not p or not t or common == 0:
        return float(p == t)
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


def _batches(n: int, size: int, rng: random.Random) -> list[list[int]]:
    order = list(range(n))
    rng.shuffle(order)
    return [order[i : i + size] for i in range(0, n, size)]


def finetune(
    encoder: BertModel,
    variant: str,
    task: str,
    train: list[dict[str, Any]],
    test: list[dict[str, Any]],
    tokenizer: Any,
    budget: AblationBudget,
    seed: int,
) -> float:
    """Fine-tune a copy of ``encoder`` on ``task`` (a key of :data:`TASKS`) for
    ``budget.finetune_steps`` AdamW steps (lr 1e-4, linear decay, batches of 32) and return
    its test score: mean token F1 of the predicted spans, or accuracy."""
    import copy

    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    if variant not in VARIANTS:  # the variant decides causal attention and the BiLSTM
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    torch.manual_seed(seed)
    causal = variant in ("ltr", "ltr_bilstm")
    head = _Head(
        copy.deepcopy(encoder), causal, variant == "ltr_bilstm", 2,
        per_token=task != "pair",
    )  # fmt: skip
    if task != "pair":
        data = _encode_spans(train, tokenizer, budget.span_length)
        held = _encode_spans(test, tokenizer, budget.span_length)
    else:
        data = _encode_pairs(train, tokenizer, budget.max_length)
        held = _encode_pairs(test, tokenizer, budget.max_length)
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-4, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: max(0.0, 1 - s / budget.finetune_steps)
    )
    rng = random.Random(seed)
    n = data["input_ids"].size(0)
    step = 0
    head.train()
    while step < budget.finetune_steps:
        for index in _batches(n, budget.batch_size, rng):
            rows = torch.tensor(index)
            out = head(
                data["input_ids"][rows], data["token_type_ids"][rows], data["attention_mask"][rows]
            )
            if task != "pair":
                loss = (
                    F.cross_entropy(out[..., 0], data["start"][rows])
                    + F.cross_entropy(out[..., 1], data["end"][rows])
                ) / 2
            else:
                loss = F.cross_entropy(out, data["label"][rows])
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            schedule.step()
            step += 1
            if step == budget.finetune_steps:
                break
    head.eval()
    scores = []
    with torch.no_grad():
        for i in range(0, held["input_ids"].size(0), 64):
            part = slice(i, i + 64)
            ids = held["input_ids"][part]
            out = head(ids, held["token_type_ids"][part], held["attention_mask"][part])
            if task == "pair":
                scores += (out.argmax(-1) == held["label"][part]).float().tolist()
                continue
            context = held["token_type_ids"][part] == 1
            start = out[..., 0].masked_fill(~context, float("-inf")).argmax(-1)
            end_logits = out[..., 1].masked_fill(~context, float("-inf"))
            positions = torch.arange(end_logits.size(1))
            end = end_logits.masked_fill(positions[None] < start[:, None], float("-inf")).argmax(-1)
            for k in range(start.size(0)):
                predicted = tokenizer.decode(ids[k][int(start[k]) : int(end[k]) + 1])
                s, e = int(held["start"][part][k]), int(held["end"][part][k])
                scores.append(span_f1(predicted, tokenizer.decode(ids[k][s : e + 1])))
    return float(np.mean(scores))


def corpus_and_tasks(
    budget: AblationBudget,
    seed: int,
    pretrain_packages: Sequence[str] = PRETRAIN_PACKAGES,
    downstream_packages: Sequence[str] = DOWNSTREAM_PACKAGES,
    tokenizer: Any | None = None,
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The tokenizer, the next-sentence pairs of the pre-training corpus (95% of its
    documents) and up to 1,000 held-out pairs (the other 5%), and each task's train / test
    examples (split by docstring, 80 / 20, capped by the budget).

    The tokenizer is a WordPiece vocabulary trained on the corpus, or ``tokenizer`` where
    given: a resumed run passes the one it saved, because the trainer breaks ties between
    equally frequent merges differently in each process, so a vocabulary trained again on
    the same text is not the same one (and the saved encoders' embeddings would not fit)."""
    overlap = set(pretrain_packages) & set(downstream_packages)
    if overlap:
        raise ValueError(f"the downstream tasks' packages {sorted(overlap)} are pre-trained on")
    documents = package_documents(pretrain_packages, max_chars=budget.corpus_chars)
    if tokenizer is None:
        tokenizer = train_wordpiece(documents, vocab_size=budget.vocab_size)
    cut = max(2, len(documents) // 20)  # 5% of the documents: held-out pairs
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    held_docs = [documents[i] for i in order[:cut]]
    documents = [documents[i] for i in order[cut:]]
    pairs = make_next_sentence_pairs(documents, tokenizer, max_length=budget.max_length, seed=seed)
    heldout = make_next_sentence_pairs(
        held_docs, tokenizer, max_length=budget.max_length, seed=seed + 1
    )[:1000]
    tasks = {}
    for task, examples, cap in (
        ("span", span_examples(downstream_packages), budget.span_examples),
        ("name", span_examples(downstream_packages, answer="name"), budget.span_examples),
        ("pair", pair_examples(downstream_packages, seed=seed), budget.pair_examples),
    ):
        names = sorted({str(e["docstring"]) for e in examples})
        random.Random(seed).shuffle(names)
        held = set(names[: len(names) // 5])
        train = [e for e in examples if e["docstring"] not in held]
        test = [e for e in examples if e["docstring"] in held]
        rng = random.Random(seed)
        tasks[task] = (
            rng.sample(train, min(cap, len(train))),
            rng.sample(test, min(cap // 4, len(test))),
        )
    return tokenizer, pairs, heldout, tasks


FULL = AblationBudget(corpus_chars=20_000_000, pretrain_steps=3000, finetune_steps=600, seeds=3)
QUICK = AblationBudget(
    corpus_chars=300_000, pretrain_steps=20, finetune_steps=10, seeds=1, hidden_size=64,
    num_layers=1, max_length=64, span_length=192, vocab_size=1000, batch_size=8,
    span_examples=120, pair_examples=120,
)  # fmt: skip
TASKS = {
    "span": "span extraction of a description, token F1",
    "name": "span extraction of a name (read to the right), token F1",
    "pair": "sentence pairs, accuracy",
}
"""The fine-tuning tasks: SQuAD-style spans (:func:`span_examples`, the answer a parameter's
description asked by its name, or its name asked by the description) and sentence pairs."""
PAPER_COLUMN = {"span": "SQuAD F1", "name": "SQuAD F1", "pair": "MRPC"}
"""The paper's Table 5 column each of our tasks stands for."""


def _fingerprint(budget: AblationBudget, seed: int) -> str:
    """The budget, the seed and the code the runs depend on (as :func:`code_text` reads it:
    what runs, not its docstrings or comments): changing any starts afresh."""
    digest = hashlib.sha256(json.dumps([asdict(budget), seed], sort_keys=True).encode())
    for module in (
        paperports.adapters.text_corpus,
        paperports.adapters.docstring_tasks,
        paperports.adapters.bert_pretraining,
    ):
        digest.update(code_text(Path(str(module.__file__)).read_text()).encode())
    digest.update(code_text(Path(__file__).read_text()).encode())
    return digest.hexdigest()[:12]


def run_ablation(ctx: RunContext, budget: AblationBudget) -> dict[str, Any]:
    """Pre-train each variant once, fine-tune each on every task with ``budget.seeds``
    seeds; the vocabulary, the pre-trained encoders and the finished fine-tunings are kept
    under ``ctx.out / "runs"`` and read back by a later run with the same budget, seed and
    code (a stopped run resumes)."""
    key = _fingerprint(budget, ctx.seed)
    runs = ctx.out / "runs"
    ctx.log("bert ablation: reading the corpus and building the tasks ...")
    saved = runs / f"tokenizer_{key}"
    tokenizer, pairs, heldout, tasks = corpus_and_tasks(
        budget, ctx.seed, PRETRAIN_PACKAGES, DOWNSTREAM_PACKAGES, _saved_tokenizer(saved)
    )
    if not saved.is_dir():  # a new vocabulary: encoders pre-trained on another cannot be used
        for stale in sorted(runs.glob(f"pretrained_*_{key}.*")):
            damaged(stale, "it was pre-trained with a vocabulary that is gone")
            stale.unlink()
        partial = saved.with_name(saved.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        tokenizer.save_pretrained(partial)
        partial.replace(saved)  # whole or not at all
    scores: dict[str, dict[str, list[float]]] = {v: {t: [] for t in TASKS} for v in VARIANTS}
    measures: dict[str, dict[str, float]] = {}
    encoders: dict[str, BertModel] = {}
    seeds = [ctx.seed + k for k in range(budget.seeds)]
    jobs = [(v, t, s) for v in VARIANTS for t in TASKS for s in seeds]
    for variant, task, seed in ctx.progress(jobs, desc="bert ablation", total=len(jobs)):
        path = runs / f"{variant}_{task}_{seed}_{key}.json"
        record = read_record(path)
        if record is None:
            source = "ltr" if variant == "ltr_bilstm" else variant
            if source not in encoders:
                encoders[source], measures[source] = _pretrained(
                    source, runs / f"pretrained_{source}_{key}", pairs, heldout, tokenizer,
                    budget, ctx,
                )  # fmt: skip
            train, test = tasks[task]
            score = finetune(encoders[source], variant, task, train, test, tokenizer, budget, seed)
            record = {"score": score, "pretraining": measures[source]}
            write_record(path, record)
        scores[variant][task].append(float(record["score"]))
        measures.setdefault(variant, dict(record["pretraining"]))
    return {
        "budget": asdict(budget),
        "seeds": seeds,
        "pretrain_packages": list(PRETRAIN_PACKAGES),
        "downstream_packages": list(DOWNSTREAM_PACKAGES),
        "pretraining_pairs": len(pairs),
        "examples": {t: [len(tasks[t][0]), len(tasks[t][1])] for t in TASKS},
        "scores": scores,
        "pretraining": {v: measures.get(v, {}) for v in VARIANTS},
        "paper": PAPER_TABLE5,
    }


def _saved_tokenizer(folder: Path) -> Any | None:
    """The vocabulary a stopped run saved in ``folder`` (``None`` if there is none, or if it
    does not load: a ``RuntimeWarning`` names it, and the run starts afresh with a new one)."""
    if not folder.is_dir():
        return None
    from transformers import BertTokenizer

    try:
        return BertTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as err:
        damaged(folder, f"its vocabulary does not load ({type(err).__name__}: {err})")
        shutil.rmtree(folder)
        return None


def _pretrained(
    variant: str,
    stem: Path,
    pairs: list[dict[str, Any]],
    heldout: list[dict[str, Any]],
    tokenizer: Any,
    budget: AblationBudget,
    ctx: RunContext,
) -> tuple[BertModel, dict[str, float]]:
    """The variant's pre-trained encoder: read back from ``stem`` (``.pt`` weights, ``.json``
    measures) when a stopped run left it there, else pre-trained and saved, so that a
    resumed ablation does not pre-train again."""
    weights, record = stem.with_suffix(".pt"), read_record(stem.with_suffix(".json"))
    if record is not None and weights.is_file():
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)
            pooled = "pooler.dense.weight" in state  # pre-trained with NSP
            encoder = BertModel(_config(tokenizer, budget), add_pooling_layer=pooled)
            encoder.load_state_dict(state)
            return encoder, {k: float(v) for k, v in record.items()}
        except (RuntimeError, OSError, ValueError) as err:
            damaged(weights, f"its weights do not load ({type(err).__name__}: {err})")
    encoder, measures = pretrain_variant(
        variant, pairs, tokenizer, budget, ctx.seed, quiet=ctx.quiet, heldout=heldout
    )
    weights.parent.mkdir(parents=True, exist_ok=True)
    partial = weights.with_name(weights.name + ".partial")
    torch.save(encoder.state_dict(), partial)
    partial.replace(weights)
    write_record(stem.with_suffix(".json"), measures)
    return encoder, measures


def main(argv: Sequence[str] | None = None) -> int:
    # the report is written by a module of its own, outside the runs' key (_fingerprint)
    from paperports.experiments.bert.ablation_report import reproduce_ablation

    return experiment_main(
        "paperports.experiments.bert.ablation",
        __doc__,
        lambda ctx, args: reproduce_ablation(ctx),
        "runs/bert-ablation",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
