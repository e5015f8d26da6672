"""The BN-LSTM family behind transformers' Auto classes, with save/load, Trainer, generate."""

from __future__ import annotations

import json
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
    return [
        p
        for n, p in model.named_parameters()
        if n.rpartition(".")[0].endswith(
            ("bn_ih_l0", "bn_hh_l0", "bn_c_l0", "bn_ih_l1", "bn_hh_l1", "bn_c_l1")
        )
        and n.endswith(".weight")
    ]


@pytest.mark.parametrize(
    ("auto", "cls"),
    [
        (AutoModel, BnLstmModel),
        (AutoModelForSequenceClassification, BnLstmForSequenceClassification),
        (AutoModelForCausalLM, BnLstmForCausalLM),
    ],
)
def test_auto_classes_find_the_family(auto: type, cls: type, tmp_path: Path) -> None:
    config = AutoConfig.for_model("bn_lstm", vocab_size=30, hidden_size=16, t_max=6)
    assert isinstance(config, BnLstmConfig) and config.t_max == 6
    model = auto.from_config(config).eval()
    assert type(model) is cls
    model.save_pretrained(tmp_path)
    loaded = auto.from_pretrained(tmp_path).eval()
    assert type(loaded) is cls and loaded.config.t_max == 6
    ids = torch.randint(0, 30, (2, 5), generator=torch.Generator().manual_seed(0))
    first, second = model(ids), loaded(ids)
    for key in first:  # every output the same, from the same weights and statistics
        torch.testing.assert_close(first[key], second[key], msg=key)


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
    stats = model.bn_lstm.encoder.bn_hh_l0.running_mean
    assert stats[:10].abs().sum() > 0
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    for (k, v), (k2, v2) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(v, v2), k
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)


def _statistics_sizes(model: torch.nn.Module) -> set[int]:
    return {int(v.shape[0]) for k, v in model.state_dict().items() if k.endswith("running_mean")}


def _same_state(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (k, v), (k2, v2) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(v, v2), k


def test_a_checkpoint_holds_the_statistics_of_the_steps_trained(tmp_path: Path) -> None:
    """t_max = 1000, trained at 10 steps: the checkpoint holds 10 steps of statistics and
    its config says so, and from_pretrained builds buffers of that size."""
    torch.manual_seed(0)
    model = BnLstmForCausalLM(
        BnLstmConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, t_max=1000)
    )
    assert _statistics_sizes(model) == {1}
    ids = torch.randint(0, 30, (4, 10))
    model(ids, labels=ids).loss.backward()
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["statistics_steps"] == 10
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert _statistics_sizes(loaded) == {10}
    _same_state(model, loaded)
    small = (tmp_path / "model.safetensors").stat().st_size
    model.bn_lstm.encoder.reserve_steps(1000)
    model.save_pretrained(tmp_path / "full")
    assert small < 0.1 * (tmp_path / "full" / "model.safetensors").stat().st_size


def test_a_checkpoint_saved_before_statistics_grew_still_loads(tmp_path: Path) -> None:
    """Such a checkpoint held t_max steps and its config had no statistics_steps."""
    torch.manual_seed(0)
    model = BnLstmForCausalLM(_tiny())
    ids = torch.randint(0, 30, (4, 6))
    model(ids, labels=ids).loss.backward()
    model.bn_lstm.encoder.reserve_steps(12)  # t_max rows, as every model once had
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["statistics_steps"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.config.statistics_steps == 12
    _same_state(model, loaded)


def test_statistics_that_do_not_fit_the_config_are_refused_not_reinitialised(
    tmp_path: Path,
) -> None:
    """Statistics of another size than the config says are refused (transformers' own
    check), not silently re-initialised; ignore_mismatched_sizes=True accepts that."""
    torch.manual_seed(0)
    model = BnLstmForCausalLM(_tiny())
    ids = torch.randint(0, 30, (4, 6))
    model(ids, labels=ids).loss.backward()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["statistics_steps"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        BnLstmForCausalLM.from_pretrained(tmp_path)
    loaded = BnLstmForCausalLM.from_pretrained(tmp_path, ignore_mismatched_sizes=True)
    assert _statistics_sizes(loaded) == {3}


def test_hidden_states_and_tuples_as_transformers_models_give_them() -> None:
    """``output_hidden_states``: the embeddings and each layer's output; ``return_dict=False``
    a tuple (both were ignored)."""
    torch.manual_seed(0)
    model = BnLstmForSequenceClassification(_tiny(num_labels=3)).eval()
    ids = torch.randint(0, 30, (4, 6))
    out = model(ids, output_hidden_states=True)
    assert out.hidden_states is not None and len(out.hidden_states) == 3
    torch.testing.assert_close(out.hidden_states[0], model.bn_lstm.embeddings(ids))
    base = model.bn_lstm(ids)
    torch.testing.assert_close(out.hidden_states[-1], base.last_hidden_state)
    assert model(ids).hidden_states is None
    as_tuple = model(ids, return_dict=False)
    assert isinstance(as_tuple, tuple)
    torch.testing.assert_close(as_tuple[0], out.logits)


def test_causal_lm_takes_shift_labels_as_aligned_targets() -> None:
    """Sequence-parallel training hands the model targets already shifted: the loss is
    taken against them as they are, whatever ``labels`` say."""
    torch.manual_seed(0)
    model = BnLstmForCausalLM(_tiny()).eval()
    ids = torch.randint(0, 30, (3, 7))
    shifted = torch.randint(0, 30, (3, 7))
    shifted[:, -1] = -100
    out = model(ids, labels=ids, shift_labels=shifted)
    expected = torch.nn.functional.cross_entropy(
        out.logits.reshape(-1, 30), shifted.reshape(-1), ignore_index=-100
    )
    torch.testing.assert_close(out.loss, expected)
    with pytest.raises(ValueError, match="shift_labels must have the inputs' shape"):
        model(ids, shift_labels=shifted[:, :-1])


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
    with torch.no_grad():  # as generate runs: the same computation, so the same near-ties
        for _ in range(5):
            nxt = model(ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    assert torch.equal(generated, ids)
    torch.manual_seed(1)
    sampled = model.generate(prompt, max_new_tokens=5, do_sample=True, top_k=5)
    torch.manual_seed(1)
    assert torch.equal(model.generate(prompt, max_new_tokens=5, do_sample=True, top_k=5), sampled)
    assert torch.equal(sampled[:, :3], prompt)
    for t in range(3, 8):  # each sampled token is among the top 5 for its prefix
        top5 = model(sampled[:, :t]).logits[0, -1].topk(5).indices
        assert int(sampled[0, t]) in top5.tolist()
    assert torch.equal(
        model.generate(prompt, max_new_tokens=5, do_sample=True, top_k=1), generated
    )  # top-1 sampling is greedy


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
    assert losses[-1] < 0.5 * losses[0], losses
    xt, yt = load_digits_tensors(8, "test")
    model.eval()
    with torch.no_grad():
        acc = (model(inputs_embeds=xt[:, 0]).logits.argmax(-1) == yt).float().mean()
    assert acc > 0.7  # chance: 0.1
    assert all(torch.all(torch.isfinite(g)) for g in _gammas(model))


def _drop_keys(folder: Path, *names: str) -> None:
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    weights = {k: v for k, v in load_file(path).items() if k not in names}
    save_file(weights, path, metadata={"format": "pt"})


@pytest.mark.parametrize(
    "dropped",
    [
        "bn_lstm.encoder.weight_hh_l0",
        "bn_lstm.encoder.bn_c_l1.running_mean",  # a running statistic
        "bn_lstm.embeddings.weight",
    ],
)
def test_an_incomplete_checkpoint_is_refused_naming_the_keys(dropped: str, tmp_path: Path) -> None:
    """It once loaded random weights with only transformers' report in the log; the BERT
    family raised. Both raise now."""
    BnLstmForCausalLM(_tiny()).save_pretrained(tmp_path)
    _drop_keys(tmp_path, dropped)
    short = dropped.removeprefix("bn_lstm.")
    with pytest.raises(ValueError, match=rf"incomplete for BnLstmForCausalLM.*{short}"):
        BnLstmForCausalLM.from_pretrained(tmp_path)


def test_a_bert_checkpoint_is_refused(tmp_path: Path) -> None:
    from paperports.integrations.transformers import BertConfig, BertModel

    bert = BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32, vocab_size=30))  # fmt: skip
    bert.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="incomplete for BnLstmModel"):
        BnLstmModel.from_pretrained(tmp_path)


def test_a_missing_head_is_initialised_as_in_transformers(tmp_path: Path) -> None:
    BnLstmModel(_tiny()).save_pretrained(tmp_path)
    _, info = BnLstmForSequenceClassification.from_pretrained(
        tmp_path, num_labels=3, output_loading_info=True
    )
    assert info["missing_keys"] == {"classifier.weight", "classifier.bias"}


@pytest.mark.parametrize("value", [-1.0, 0.5, 2.0, float("nan")])
def test_attention_mask_values_other_than_0_and_1_are_refused(value: float) -> None:
    """They were all treated as "attend"."""
    model = BnLstmModel(_tiny())
    mask = torch.ones(2, 5)
    mask[0, 4] = value
    with pytest.raises(ValueError, match="attention_mask must hold 1 for tokens"):
        model(torch.randint(0, 30, (2, 5)), attention_mask=mask)


def test_a_batch_with_every_label_ignored_has_loss_zero_not_nan() -> None:
    model = BnLstmForCausalLM(_tiny())
    ids = torch.randint(0, 30, (2, 6))
    out = model(ids, labels=torch.full_like(ids, -100))
    assert out.loss is not None and float(out.loss) == 0.0
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bn_eps": -1e-5}, "bn_eps"),
        ({"bn_momentum": 2.0}, "bn_momentum"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_hidden_layers": 1.5}, "num_hidden_layers"),
        ({"dropout": 1.5}, "dropout"),
        ({"random_t_max": 1.5}, "random_t_max"),
    ],
)
def test_config_values_are_checked(kwargs: dict, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        BnLstmConfig(**kwargs)


def test_nn_lstms_names_configure_the_stack() -> None:
    """``BnLstmConfig(num_layers=2, bidirectional=True)`` once built one unidirectional
    layer without a word (the keyword is ``num_hidden_layers``)."""
    config = BnLstmConfig(vocab_size=30, hidden_size=8, num_layers=2, bidirectional=True)
    assert config.num_hidden_layers == 2 and config.num_layers == 2  # type: ignore[attr-defined]
    encoder = BnLstmModel(config).encoder
    assert encoder.num_layers == 2 and encoder.bidirectional
    with pytest.raises(ValueError, match="num_layers=2 and num_hidden_layers=3"):
        BnLstmConfig(num_layers=2, num_hidden_layers=3)
    with pytest.raises(TypeError, match="bidirectional"):
        BnLstmConfig(bidirectional="yes")
    with pytest.raises(ValueError, match="bidirectional=True would let each step read"):
        BnLstmForCausalLM(config)


def test_a_bidirectional_encoder_pools_both_directions_and_round_trips(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = _tiny(bidirectional=True, num_labels=3)
    model = BnLstmForSequenceClassification(config).eval()
    ids = torch.randint(0, 30, (4, 7))
    mask = torch.ones(4, 7, dtype=torch.long)
    mask[1, 5:] = 0
    mask[3, 2:] = 0
    out = model.bn_lstm(ids, attention_mask=mask)
    states = out.last_hidden_state
    assert states.shape == (4, 7, 32)
    last = mask.sum(1) - 1
    # the forward direction ends at each sequence's last token, the reverse one at its first
    torch.testing.assert_close(out.pooler_output[:, :16], states[torch.arange(4), last, :16])
    torch.testing.assert_close(out.pooler_output[:, 16:], states[:, 0, 16:])
    labels = torch.tensor([0, 1, 2, 1])
    logits = model(ids, attention_mask=mask, labels=labels).logits
    assert logits.shape == (4, 3)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert loaded.config.bidirectional
    torch.testing.assert_close(loaded(ids, attention_mask=mask).logits, logits)
    # and it trains: the loss falls over a few steps on a fixed batch
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = model(ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses


def test_random_t_max_reaches_the_encoder_and_survives_save_and_load(tmp_path: Path) -> None:
    model = BnLstmForCausalLM(BnLstmConfig(vocab_size=30, hidden_size=8, random_t_max=0.5))
    assert model.bn_lstm.encoder.random_t_max == 0.5
    model.save_pretrained(tmp_path)
    loaded = BnLstmForCausalLM.from_pretrained(tmp_path)
    assert loaded.config.random_t_max == 0.5 and loaded.bn_lstm.encoder.random_t_max == 0.5
    assert BnLstmModel(_tiny()).encoder.random_t_max == 0.0  # the paper's training
