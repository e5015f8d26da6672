"""Character-level language modelling on the Python standard library's text.

The stand-in for the paper's Penn Treebank and text8: the reference text that ships with
Python (``pydoc_data.topics``, about 466 KB), as bytes (vocabulary 256). Both models are
trained with ``transformers.Trainer``: ``BnLstmForCausalLM``, and an ``nn.LSTM`` language
model of the same sizes. Bits per character are measured on the held-out last 10% along
training (the paper's validation curves; the BN-LSTM with its running averages) and after it
(with population statistics), then on held-out sequences up to 10x the training length (the
BN-LSTM reusing its last step's statistics past it).
"""

from __future__ import annotations

import math
import tempfile
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.modeling_outputs import CausalLMOutput

from paperports.experiments.trainer_runs import quiet_trainer
from paperports.integrations.torch import BNLSTM, update_bn
from paperports.integrations.transformers import BnLstmConfig, BnLstmForCausalLM

__all__ = ["LmTraining", "LstmLM", "bits_per_char", "make_model", "stdlib_bytes", "train_lm"]

VOCAB = 256


def stdlib_bytes() -> tuple[torch.Tensor, torch.Tensor]:
    """The standard library's reference text as byte ids: ``(train 90%, held-out 10%)``."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics)).encode("utf-8")
    ids = torch.tensor(list(text), dtype=torch.long)
    cut = int(0.9 * len(ids))
    return ids[:cut], ids[cut:]


def lstm_initialised_as_bn_lstm(input_size: int, hidden: int, **kwargs: Any) -> nn.LSTM:
    """An ``nn.LSTM`` with a BN-LSTM's initial weights (Xavier input weights, orthogonal
    recurrent weights per gate, forget-gate bias 1): the parameter names are the same, so
    the BN-LSTM's state dict, without its batch norms, loads into it. The comparison then
    isolates batch normalisation from the initialisation."""
    batch_first = bool(kwargs.get("batch_first", False))
    weights = BNLSTM(input_size, hidden, t_max=1, batch_first=batch_first).state_dict()
    with torch.random.fork_rng():  # its own draws are overwritten: leave the RNG as a
        lstm = nn.LSTM(input_size, hidden, **kwargs)  # BN-LSTM's construction leaves it
    lstm.load_state_dict({k: v for k, v in weights.items() if not k.startswith("bn_")})
    return lstm


def chunks(ids: torch.Tensor, length: int) -> torch.Tensor:
    """Non-overlapping ``(N, length)`` pieces of ``ids``."""
    n = len(ids) // length
    return ids[: n * length].reshape(n, length)


class LstmLM(nn.Module):
    """The baseline: embedding, ``nn.LSTM`` and a linear head, with the loss of
    ``BnLstmForCausalLM`` (shifted cross-entropy), so ``Trainer`` trains both alike."""

    def __init__(self, embedding: int, hidden: int) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, embedding)
        self.lstm = lstm_initialised_as_bn_lstm(embedding, hidden, batch_first=True)
        self.lm_head = nn.Linear(hidden, VOCAB)

    def forward(
        self, input_ids: torch.Tensor, labels: torch.Tensor | None = None, **kwargs: Any
    ) -> CausalLMOutput:
        out, _ = self.lstm(self.embeddings(input_ids))
        logits = self.lm_head(out)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return CausalLMOutput(loss=loss, logits=logits)


def make_model(
    kind: str, embedding: int, hidden: int, seq_len: int, random_t_max: float = 0.0
) -> nn.Module:
    """``LstmLM`` for ``kind == "LSTM"``, else ``BnLstmForCausalLM`` (with
    ``random_t_max``, see ``BNLSTM``)."""
    if kind == "LSTM":
        return LstmLM(embedding, hidden)
    config = BnLstmConfig(
        vocab_size=VOCAB,
        input_size=embedding,
        hidden_size=hidden,
        t_max=seq_len,
        random_t_max=random_t_max,
    )
    return BnLstmForCausalLM(config)


class LmTraining(NamedTuple):
    """What :func:`train_lm` hands back: the logged training losses (nats per byte), and
    ``(step, bits per character)`` on the held-out pieces at each logging step when given."""

    losses: list[float]
    held_out: list[tuple[int, float]]


class HeldOutBits(TrainerCallback):
    """Bits per character on held-out pieces every ``every`` steps, in evaluation mode (a
    BN-LSTM with its running averages), the model handed back in training mode."""

    def __init__(self, pieces: torch.Tensor, every: int) -> None:
        self.pieces, self.every = pieces, every
        self.curve: list[tuple[int, float]] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step % self.every == 0:
            model = kwargs["model"]
            self.curve.append((state.global_step, bits_per_char(model, self.pieces)))
            model.train()


def train_lm(
    model: nn.Module,
    train: torch.Tensor,
    *,
    steps: int,
    batch: int,
    seed: int,
    quiet: bool,
    held_out: torch.Tensor | None = None,
) -> LmTraining:
    """Train with ``Trainer`` (AdamW, lr 2e-3, clipping at 1); return the logged losses and,
    with ``held_out`` pieces, the held-out bits per character at the same steps."""
    data = [{"input_ids": c, "labels": c} for c in train]
    every = max(1, steps // 25)
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            max_steps=steps,
            per_device_train_batch_size=batch,
            # batch statistics over an epoch's last few leftover sequences are noise: the
            # gradient norm spiked to ~1e4 on them before
            dataloader_drop_last=True,
            learning_rate=2e-3,
            max_grad_norm=1.0,
            logging_steps=every,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            seed=seed,
            disable_tqdm=True,  # quiet_trainer shows our own bar
        )
        trainer = Trainer(model=model, args=args, train_dataset=data)
        quiet_trainer(trainer, quiet=quiet, desc=f"{type(model).__name__}")
        curve = None if held_out is None else HeldOutBits(held_out, every)
        if curve is not None:
            trainer.add_callback(curve)
        trainer.train()
    # population statistics over the whole training text (a no-op for the LSTM), not its
    # first 512 pieces, the alphabetically first topics
    update_bn(train.split(512), model)  # type: ignore[no-untyped-call]
    return LmTraining(
        [h["loss"] for h in trainer.state.log_history if "loss" in h],
        [] if curve is None else curve.curve,
    )


@torch.no_grad()
def bits_per_char(model: nn.Module, pieces: torch.Tensor, batch: int = 64) -> float:
    """Mean next-byte cross-entropy over ``pieces`` ``(N, L)``, in bits."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(pieces), batch):
        ids = pieces[i : i + batch]
        logits = model(input_ids=ids).logits
        total += float(
            F.cross_entropy(
                logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1), reduction="sum"
            )
        )
        count += ids[:, 1:].numel()
    return total / count / math.log(2)
