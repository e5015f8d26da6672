"""Our transformers models trained by `Trainer` on one process or several, with the same
global batch: the way HF users scale out.

    python examples/trainer_ddp.py --model bert --out /tmp/one
    torchrun --nproc_per_node 2 examples/trainer_ddp.py --model bert --out /tmp/two

On CPU the processes talk through gloo; on GPUs, nccl (`torchrun` on each machine with
`--nnodes`, `--node_rank` and `--rdzv-endpoint` for several machines). The global batch is 8
sequences: 8 / (number of processes) on each. The BN-LSTM family's recurrent batch norms are
converted to `SyncRecurrentBatchNorm` (`--local-statistics` leaves them per process, as
`nn.BatchNorm` is without `nn.SyncBatchNorm`). The first process writes `losses.json` (the
loss `Trainer` logged at each step, averaged over the processes), `weights.pt` and
`metrics.json` (`Trainer`'s own, `train_runtime` and throughput among them).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
from torch.utils.data import Sampler, SequentialSampler
from transformers import Trainer, TrainingArguments

from paperports.integrations.torch import SyncRecurrentBatchNorm
from paperports.integrations.transformers import (
    BertConfig,
    BertForSequenceClassification,
    BnLstmConfig,
    BnLstmForSequenceClassification,
)

GLOBAL_BATCH, EXAMPLES, LENGTH, VOCAB = 8, 32, 8, 30


class InOrderTrainer(Trainer):
    """Batches in dataset order, so that one process and several see the same global
    batches (several processes split each run of consecutive batches between them)."""

    def _get_train_sampler(self, train_dataset: object = None) -> Sampler[int] | None:
        return SequentialSampler(self.train_dataset)  # type: ignore[arg-type]


def make_model(name: str, local_statistics: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "bert":
        config = BertConfig(
            vocab_size=VOCAB,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=LENGTH,
            hidden_dropout_prob=0.0,  # no randomness that would differ between processes
            attention_probs_dropout_prob=0.0,
            num_labels=2,
        )
        return BertForSequenceClassification(config)
    model = BnLstmForSequenceClassification(
        BnLstmConfig(vocab_size=VOCAB, hidden_size=16, t_max=LENGTH, num_labels=2)
    )
    if local_statistics:
        return model
    return SyncRecurrentBatchNorm.convert_sync_batchnorm(model)


def examples(count: int = EXAMPLES) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (count, LENGTH), generator=generator)
    labels = (ids[:, 0] < VOCAB // 2).long()  # learnable from the first token
    return [{"input_ids": i, "labels": y} for i, y in zip(ids, labels, strict=True)]


def main(
    model_name: str,
    out: Path,
    local_statistics: bool = False,
    steps: int = EXAMPLES // GLOBAL_BATCH,
    batch: int = GLOBAL_BATCH,
) -> list[float]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    model = make_model(model_name, local_statistics)
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=batch // world,
        max_steps=steps,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        ddp_backend="gloo" if world > 1 else None,
        ddp_find_unused_parameters=False,
        seed=0,
        disable_tqdm=True,
    )
    trainer = InOrderTrainer(model=model, args=args, train_dataset=examples(steps * batch))
    metrics = trainer.train().metrics
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        (out / "losses.json").write_text(json.dumps(losses))
        torch.save(model.state_dict(), out / "weights.pt")
        (out / "metrics.json").write_text(json.dumps(metrics))
        print(f"{model_name}, {world} process(es): losses {[round(v, 4) for v in losses]}")
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["bert", "bn_lstm"], default="bert")
    parser.add_argument("--out", type=Path, default=Path("trainer_ddp"))
    parser.add_argument("--local-statistics", action="store_true")
    parser.add_argument("--steps", type=int, default=EXAMPLES // GLOBAL_BATCH)
    parser.add_argument("--batch", type=int, default=GLOBAL_BATCH, help="the global batch")
    cli = parser.parse_args()
    main(cli.model, cli.out, cli.local_statistics, cli.steps, cli.batch)
    if torch.distributed.is_initialized():  # Trainer leaves it; gloo's threads must end first
        torch.distributed.destroy_process_group()
