"""The BERT bench's padded batch: right-padded, lengths in range, with a long tail."""

from __future__ import annotations

import torch

from paperports.experiments.bert.bench import MIXED_BATCH, MIXED_RANGE, mixed_length_batch


def test_the_mixed_length_batch_is_right_padded_with_lengths_in_range() -> None:
    batch = mixed_length_batch(0)
    mask = batch["attention_mask"]
    lengths = mask.sum(1)
    assert mask.shape[0] == MIXED_BATCH and int(lengths.max()) == mask.shape[1]
    assert int(lengths.min()) >= MIXED_RANGE[0] and int(lengths.max()) <= MIXED_RANGE[1]
    assert torch.equal(mask, (torch.arange(mask.shape[1])[None] < lengths[:, None]).long())
    assert bool((batch["input_ids"][mask == 0] == 0).all())
    assert float(mask.float().mean()) < 0.6  # most of the padded batch is padding
    assert torch.equal(mixed_length_batch(0)["input_ids"], batch["input_ids"])
