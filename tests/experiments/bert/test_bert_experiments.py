"""The BERT experiments on tiny budgets: pre-training runs and learns, and our fine-tuning
matches transformers' own BERT step for step."""

from __future__ import annotations

import math

import pytest

from paperports.adapters.checkpoints import minilm_checkpoint
from paperports.experiments.bert.finetuning import consecutive_sentence_pairs, finetune_both
from paperports.experiments.bert.pretraining import pretrain


def test_consecutive_sentence_pairs_are_labelled_by_position() -> None:
    documents = [[f"d{d} s{s}" for s in range(20)] for d in range(4)]
    pairs = consecutive_sentence_pairs(documents, seed=0)
    assert len(pairs) == 4 * 19
    positives = [p for p in pairs if p[2] == 1]
    assert 0.35 < len(positives) / len(pairs) < 0.65
    for first, second, label in pairs:
        d1, s1 = first.split()
        d2, s2 = second.split()
        if label == 1:
            assert d1 == d2 and int(s2[1:]) == int(s1[1:]) + 1
        else:
            assert d1 != d2


def test_pretraining_runs_with_trainer_and_records_the_curves() -> None:
    run = pretrain(
        steps=30,
        seed=0,
        quiet=True,
        hidden_size=32,
        num_layers=1,
        max_length=32,
        batch_size=16,
        evaluations=3,
        vocab_size=512,
    )
    assert run.steps == [10, 20, 30]
    assert len(run.mlm_loss) == len(run.mlm_accuracy) == len(run.nsp_accuracy) == 3
    assert all(math.isfinite(v) for v in run.mlm_loss)
    assert run.mlm_loss[-1] < run.mlm_loss[0]  # from ln(512) = 6.2 towards the unigram level
    assert 0.0 < run.unigram_accuracy < 0.5 and 0.5 <= run.nsp_majority < 0.95
    assert run.train_pairs > 1000 and run.heldout_pairs > 100


@pytest.mark.filterwarnings("ignore")
def test_fine_tuning_ours_and_transformers_agree() -> None:
    """Twenty optimiser steps from the same weights on the same batches: the two models'
    logged training losses agree to float rounding, and so do their predictions."""
    ours, theirs, data = finetune_both(
        minilm_checkpoint(), epochs=1.0, max_length=48, seed=0, quiet=True, train_limit=320
    )
    assert data["train_pairs"] == 320 and data["test_pairs"] > 200
    assert len(ours.losses) == len(theirs.losses) == 2  # logged every 10 of the 20 steps
    for a, b in zip(ours.losses, theirs.losses, strict=True):
        assert a == pytest.approx(b, rel=1e-4)
    agreement = sum(a == b for a, b in zip(ours.predictions, theirs.predictions, strict=True))
    assert agreement / len(ours.predictions) > 0.98
    assert abs(ours.accuracy - theirs.accuracy) < 0.01
