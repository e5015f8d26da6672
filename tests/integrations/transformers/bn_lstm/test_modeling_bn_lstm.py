"""The BN-LSTM family behind transformers' Auto classes, with save/load, Trainer, generate."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    Trainer,
    TrainingArguments,
)

from paperports.integrations.transformers import (
    BnLstmConfig,
    BnLstmForCausalLM,
    BnLstmForSequenceClassification,
    BnLstmModel,
)


def _tiny(**kw: object) -> BnLstmConfig:
    return BnLstmConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, t_max=12, **kw)


def _gammas(model: torch.nn.Module) -> list[torch.Tensor]:
    names = ("bn_ih.weight", "bn_hh.weight", "bn_c.weight")
    return [p for n, p in model.named_parameters() if n.endswith(names)]


@pytest.mark.parametrize(
    ("auto", "cls"),
    [
        (AutoModel, BnLstmModel),
        (AutoModelForSequenceClassification, BnLstmForSequenceClassification),
        (AutoModelForCausalLM, BnLstmForCausalLM),
    ],
)
def test_auto_classes_find_the_family(auto: type, cls: type, tmp_path: Path) -> None:
    config = AutoConfig.for_model("bn_lstm", vocab_size=30, hidden_size=16)
    assert isinstance(config, BnLstmConfig)
    model = auto.from_config(config)
    assert type(model) is cls
    model.save_pretrained(tmp_path)
    assert type(auto.from_pretrained(tmp_path)) is cls


@pytest.mark.parametrize("gamma_init", [0.1, 0.3])
def test_gamma_init_survives_construction_and_from_pretrained(
    gamma_init: float, tmp_path: Path
) -> None:
    model = BnLstmForCausalLM(_tiny(gamma_init=gamma_init))
    assert len(_gammas(model)) == 6
    assert all(torch.all(g == gamma_init) for g in _gammas(model))
    model.save_pretrained(tmp_path)
    loaded = BnLstmForCausalLM.from_pretrained(tmp_path)
    assert all(torch.all(g == gamma_init) for g in _gammas(loaded))


def test_save_and_load_round_trip_exactly_with_running_statistics(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = BnLstmForCausalLM(_tiny())
    ids = torch.randint(0, 30, (8, 10))
    model.train()
    for _ in range(3):
        model(ids, labels=ids).loss.backward()  # updates the per-step running statistics
    stats = model.bn_lstm.encoder.cells[0].bn_hh.running_mean
    assert stats[:10].abs().sum() > 0
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    for (k, v), (k2, v2) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(v, v2), k
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)


def test_causal_lm_loss_is_shifted_cross_entropy() -> None:
    torch.manual_seed(0)
    model = BnLstmForCausalLM(_tiny()).eval()
    ids = torch.randint(0, 30, (3, 7))
    labels = ids.clone()
    labels[0, 4:] = -100
    out = model(ids, labels=labels)
    logits = out.logits[:, :-1].reshape(-1, 30)
    expected = torch.nn.functional.cross_entropy(
        logits, labels[:, 1:].reshape(-1), ignore_index=-100
    )
    torch.testing.assert_close(out.loss, expected)


def test_generate_is_the_greedy_argmax_loop() -> None:
    torch.manual_seed(0)
    model = BnLstmForCausalLM(_tiny()).eval()
    prompt = torch.tensor([[3, 1, 4]])
    generated = model.generate(prompt, max_new_tokens=5, do_sample=False)
    ids = prompt
    for _ in range(5):
        nxt = model(ids).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    assert torch.equal(generated, ids)
    sampled = model.generate(prompt, max_new_tokens=5, do_sample=True, top_k=5)
    assert sampled.shape == (1, 8)


def test_right_padding_equals_each_sequence_alone_in_eval() -> None:
    torch.manual_seed(0)
    model = BnLstmForSequenceClassification(_tiny(num_labels=3))
    model(torch.randint(0, 30, (16, 10)))  # statistics to hold
    model.eval()
    ids = torch.randint(0, 30, (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    batch = model(ids, attention_mask=mask).logits
    torch.testing.assert_close(batch[1], model(ids[1:, :3]).logits[0])


def test_bad_input_is_rejected() -> None:
    model = BnLstmModel(_tiny())
    ids = torch.randint(0, 30, (2, 5))
    with pytest.raises(ValueError, match="right padding"):
        model(ids, attention_mask=torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]]))
    with pytest.raises(ValueError, match=r"\[0, 30\)"):
        model(ids + 30)
    with pytest.raises(ValueError, match="exactly one"):
        model()
    with pytest.raises(ValueError, match=r"\(batch, time, 16\)"):
        model(inputs_embeds=torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="t_max"):
        BnLstmConfig(t_max=0)


def test_trainer_trains_sequence_classification_on_digit_rows(tmp_path: Path) -> None:
    from paperports.adapters.digits import load_digits_tensors

    torch.manual_seed(0)
    x, y = load_digits_tensors(8, "train")
    rows = x[:, 0]  # (N, 8 rows as time steps, 8 pixels)
    train = [{"inputs_embeds": r, "labels": int(c)} for r, c in zip(rows, y, strict=True)]
    config = BnLstmConfig(input_size=8, hidden_size=32, num_labels=10, t_max=8)
    model = BnLstmForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=3,
        per_device_train_batch_size=64,
        learning_rate=1e-2,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        logging_steps=5,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=train)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses[-1] < 0.5 * losses[0]
    xt, yt = load_digits_tensors(8, "test")
    model.eval()
    with torch.no_grad():
        acc = (model(inputs_embeds=xt[:, 0]).logits.argmax(-1) == yt).float().mean()
    assert acc > 0.7  # chance: 0.1
    assert all(torch.all(torch.isfinite(g)) for g in _gammas(model))
