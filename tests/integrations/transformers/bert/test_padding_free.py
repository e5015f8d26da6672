"""The padding-free encoder path (issue 25, item 2): a right-padded batch runs on its real
tokens only, with the padded computation's values there, and zeros at the padding."""

from __future__ import annotations

import copy

import pytest
import torch

from paperports.integrations.transformers import BertConfig, BertForMaskedLM, BertModel
from paperports.integrations.transformers.bert.modeling_bert import Packing

from .test_modeling_bert import tiny


def _batch(lengths: list[int], seq: int = 10) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, 99, (len(lengths), seq), generator=g)
    mask = (torch.arange(seq)[None] < torch.tensor(lengths)[:, None]).long()
    token_type_ids = (torch.arange(seq)[None] >= 3).long().expand(len(lengths), seq)
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": token_type_ids}


def _padded(model: torch.nn.Module) -> torch.nn.Module:
    other = copy.deepcopy(model)
    other.config.padding_free = False
    return other


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_the_real_tokens_get_the_padded_computations_values(attn_implementation: str) -> None:
    torch.manual_seed(0)
    model = BertModel(tiny(attn_implementation=attn_implementation)).eval()
    batch = _batch([10, 3, 7, 1])
    with torch.no_grad():
        free = model(**batch, output_hidden_states=True)
        padded = _padded(model)(**batch, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    for a, b in zip(free.hidden_states, padded.hidden_states, strict=True):
        torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=0)
        assert bool((a[~real] == 0).all())
    torch.testing.assert_close(free.pooler_output, padded.pooler_output, atol=1e-5, rtol=0)


def test_training_gives_the_padded_computations_loss_and_gradients() -> None:
    """Labels at the real tokens only (-100 at the padding, as collators make them)."""
    torch.manual_seed(0)
    model = BertForMaskedLM(tiny()).train()
    other = _padded(model)
    batch = _batch([10, 4, 8])
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    for m in (model, other):
        m(**batch, labels=labels).loss.backward()
    for (name, a), (_, b) in zip(model.named_parameters(), other.named_parameters(), strict=True):
        assert a.grad is not None and b.grad is not None, name
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_it_runs_only_where_it_applies() -> None:
    """Right padding packs; no padding, left padding (the pooler reads a padding token
    there), a 3-D mask, attentions asked for, or the switch off run the padded path."""
    config = tiny()
    right = _batch([10, 4])["attention_mask"]
    assert Packing.of(config, right) is not None
    assert Packing.of(config, right).lengths == [10, 4]  # type: ignore[union-attr]
    assert Packing.of(config, torch.ones_like(right)) is None
    assert Packing.of(config, right.flip(1)) is None
    assert Packing.of(config, right[:, None].expand(2, 10, 10)) is None
    assert Packing.of(tiny(padding_free=False), right) is None
    model = BertModel(config).eval()
    batch = _batch([10, 4])
    with torch.no_grad():
        with_attentions = model(**batch, output_attentions=True).last_hidden_state
    assert bool((with_attentions[1, 4:] != 0).any())  # the padded computation ran


@pytest.mark.parametrize("shape", [(3, 10), (1, 10), (10,)])
def test_position_ids_and_inputs_embeds_are_packed_too(shape: tuple[int, ...]) -> None:
    """``position_ids`` of each shape the model takes: per sequence, or one row for all."""
    torch.manual_seed(0)
    model = BertModel(tiny()).eval()
    batch = _batch([6, 9, 2])
    embeds = model.embeddings.word_embeddings(batch.pop("input_ids"))
    positions = torch.arange(10).flip(0).expand(*shape)
    with torch.no_grad():
        free = model(inputs_embeds=embeds, position_ids=positions, **batch).last_hidden_state
        padded = _padded(model)(inputs_embeds=embeds, position_ids=positions, **batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(free[real], padded.last_hidden_state[real], atol=1e-5, rtol=0)


def test_the_switch_is_checked() -> None:
    with pytest.raises(TypeError, match="padding_free"):
        BertConfig(padding_free="yes")  # type: ignore[arg-type]


def test_a_traced_model_keeps_the_padded_computation() -> None:
    """``torch.jit.trace`` (and the ONNX export built on it) records one call: a packing
    of that call's lengths would be replayed for every other mask."""
    torch.manual_seed(0)
    model = BertModel(tiny(), add_pooling_layer=False).eval()
    first, second = _batch([10, 3]), _batch([4, 8])
    args = (first["input_ids"], first["attention_mask"])
    traced = torch.jit.trace(model, args, strict=False, check_trace=False)
    with torch.no_grad():
        got = traced(second["input_ids"], second["attention_mask"])["last_hidden_state"]
        want = model(second["input_ids"], attention_mask=second["attention_mask"])
    real = second["attention_mask"].bool()
    torch.testing.assert_close(got[real], want.last_hidden_state[real], atol=1e-5, rtol=0)
