"""Bad input to the adapters (data, corpora, checkpoints) and the command line."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import transformers

from paperports import cli
from paperports.adapters import babi, docstring_tasks, heap_graphs, text_corpus
from paperports.adapters.bert_pretraining import (
    DataCollatorForPreTraining,
    make_next_sentence_pairs,
    train_wordpiece,
)
from paperports.adapters.checkpoints import minilm_checkpoint
from paperports.adapters.digits import DigitsCNN, digits_classifier, load_digits_tensors
from paperports.adapters.foolbox_models import LogitsModel
from paperports.adapters.text_corpus import read_documents, stdlib_documents

from .conftest import assert_refused, case

_TOKENIZER: dict[str, Any] = {}


def tokenizer() -> Any:
    if "t" not in _TOKENIZER:
        _TOKENIZER["t"] = transformers.AutoTokenizer.from_pretrained(minilm_checkpoint())
    return _TOKENIZER["t"]


DOCS = [[f"Document {d} sentence {s} says something." for s in range(6)] for d in range(3)]
SPEC = babi.TASKS["babi15"]


def pairs(**kw: Any) -> Any:
    return make_next_sentence_pairs(**({"documents": DOCS, "tokenizer": tokenizer()} | kw))


def collate(label: Any) -> Any:
    example = pairs()[0] | {"next_sentence_label": label}
    return DataCollatorForPreTraining(tokenizer())([example])


CONFIG = [
    case("generate_task unknown task", lambda: babi.generate_task("babi99", 2), "babi99"),
    case("generate_task num_stories=0", lambda: babi.generate_task("babi15", 0), "num_stories"),
    case("generate_task num_stories=1.5", lambda: babi.generate_task("babi15", 1.5), "num_stories"),
    case(
        "generate_task question_type=3",
        lambda: babi.generate_task("babi15", 2, question_type=3),
        "question types",
    ),
    case("generate_task seed='0'", lambda: babi.generate_task("babi15", 2, seed="0"), "seed"),
    case("BabiGraphs unknown task", lambda: babi.BabiGraphs("babi99"), "babi99"),
    case(
        "BabiGraphs num_examples=0",
        lambda: babi.BabiGraphs("babi15", num_examples=0),
        "num_stories",
    ),
    case(
        "BabiGraphs question_type=1.0",
        lambda: babi.BabiGraphs("babi15", question_type=1.0),
        "question_type",
    ),
    case(
        "parse_symbolic answers_per_question=0",
        lambda: babi.parse_symbolic("1 1 2\n", answers_per_question=0),
        "answers_per_question",
    ),
    case("pairs max_length=4", lambda: pairs(max_length=4), "max_length"),
    case("pairs max_length=64.0", lambda: pairs(max_length=64.0), "max_length"),
    case("pairs short_seq_prob=1.5", lambda: pairs(short_seq_prob=1.5), "short_seq_prob"),
    case("pairs dupe_factor=0", lambda: pairs(dupe_factor=0), "dupe_factor"),
    case("pairs seed=0.5", lambda: pairs(seed=0.5), "seed"),
    case(
        "collator mlm_probability=0",
        lambda: DataCollatorForPreTraining(tokenizer(), mlm_probability=0.0),
        "mlm_probability",
    ),
    case(
        "collator mlm_probability=1.5",
        lambda: DataCollatorForPreTraining(tokenizer(), mlm_probability=1.5),
        "mlm_probability",
    ),
    case(
        "collator pad_to_multiple_of=0",
        lambda: DataCollatorForPreTraining(tokenizer(), pad_to_multiple_of=0),
        "pad_to_multiple_of",
    ),
    case("wordpiece vocab_size=10", lambda: train_wordpiece(DOCS, vocab_size=10), "vocab_size"),
    case("digits size=4", lambda: load_digits_tensors(4), "size"),
    case("digits size=28.0", lambda: load_digits_tensors(28.0), "size"),
    case("digits split='validation'", lambda: load_digits_tensors(8, "validation"), "split"),
    case(
        "digits test_fraction=0", lambda: load_digits_tensors(8, test_fraction=0.0), "test_fraction"
    ),
    case(
        "digits test_fraction=1", lambda: load_digits_tensors(8, test_fraction=1.0), "test_fraction"
    ),
    case("DigitsCNN size=10", lambda: DigitsCNN(10), "divisible by 4"),
    case("DigitsCNN size=0", lambda: DigitsCNN(0), "size"),
    case("digits_classifier epochs=0", lambda: digits_classifier(8, epochs=0), "epochs"),
    case("digits_classifier size=7", lambda: digits_classifier(7), "size"),
    case("digits strokes='bold'", lambda: load_digits_tensors(28, strokes="bold"), "strokes"),
    case("digits sharp at size 8", lambda: load_digits_tensors(8, strokes="sharp"), "strokes"),
    case("DigitsCNN channels=0", lambda: DigitsCNN(28, channels=0), "channels"),
    case(
        "digits_classifier architecture='resnet'",
        lambda: digits_classifier(28, architecture="resnet"),
        "architecture",
    ),
    case(
        "digits_classifier lenet at size 8",
        lambda: digits_classifier(8, architecture="lenet"),
        "architecture='lenet'",
    ),
    case(
        "digits_classifier strokes='bold'",
        lambda: digits_classifier(28, strokes="bold"),
        "strokes",
    ),
    case("stdlib_documents min_sentences=0", lambda: stdlib_documents(0), "min_sentences"),
    case("LogitsModel of a function", lambda: LogitsModel(lambda x: x), "model"),
]

EMPTY = [
    case("pairs one document", lambda: pairs(documents=DOCS[:1]), "at least two documents"),
    case(
        "pairs documents without text",
        lambda: pairs(documents=[DOCS[0], [], [""]]),
        "at least two documents with text",
    ),
    case("pairs no documents", lambda: pairs(documents=[]), "at least two documents"),
    case("wordpiece no text", lambda: train_wordpiece([[""], [" "]]), "no text"),
    case(
        "collator no examples",
        lambda: DataCollatorForPreTraining(tokenizer())([]),
        "next_sentence_label",
    ),
    case("BabiGraphs no stories", lambda: babi.BabiGraphs("babi15", stories=[]), "no question"),
    case(
        "to_data no answer",
        lambda: babi.to_data(babi.Story([(0, 0, 1)]), babi.Question(0, (0,), ()), SPEC),
        "no answer",
    ),
]

VALUES = [
    case(
        "pairs documents as strings",
        lambda: pairs(documents=["one. two.", "three. four."]),
        "documents[0]",
        "list or tuple",
    ),
    case(
        "pairs a document of numbers", lambda: pairs(documents=[[1, 2], [3, 4]]), "documents[0][0]"
    ),
    case("pairs documents a string", lambda: pairs(documents="text"), "documents"),
    case(
        "pairs tokenizer without [CLS]",
        lambda: pairs(tokenizer=SimpleNamespace(cls_token_id=None, sep_token_id=3)),
        "[CLS]",
    ),
    *[
        case(f"collator label {v!r}", lambda v=v: collate(v), "next_sentence_label")
        for v in (2, -1, 0.5, True, None, "0")
    ],
    case("parse_symbolic id 0", lambda: babi.parse_symbolic("0 1 2\n"), "line 1", "1-based"),
    case("parse_symbolic negative id", lambda: babi.parse_symbolic("1 -1 2\n"), "line 1"),
    case("parse_symbolic a word", lambda: babi.parse_symbolic("1 is 2\n"), "line 1"),
    case("parse_symbolic two numbers", lambda: babi.parse_symbolic("1 2\n"), "line 1"),
    case(
        "parse_symbolic question too short", lambda: babi.parse_symbolic("1 1 2\n? 1 2\n"), "line 2"
    ),
    case("parse_symbolic bytes", lambda: babi.parse_symbolic(b"1 1 2\n"), "text"),
    case("parse_dictionary id 0", lambda: babi.parse_dictionary("mouse=0\n"), "line 1"),
    case("parse_dictionary no =", lambda: babi.parse_dictionary("mouse 1\n"), "line 1"),
    case(
        "parse_dictionary a name twice",
        lambda: babi.parse_dictionary("mouse=1\ncat=2\nmouse=3\n"),
        "line 3",
        "'mouse'",
        "line 1",
    ),
    case(
        "parse_dictionary an id twice",
        lambda: babi.parse_dictionary("mouse=1\ncat=1\n"),
        "line 2",
        "id 1",
        "'mouse'",
    ),
    case(
        "to_data edge type beyond",
        lambda: babi.to_data(babi.Story([(0, 5, 1)]), babi.Question(0, (0,), (1,)), SPEC),
        "edge type 5",
    ),
    case(
        "to_data question type beyond",
        lambda: babi.to_data(babi.Story([(0, 0, 1)]), babi.Question(3, (0,), (1,)), SPEC),
        "question type 3",
    ),
    case(
        "to_data negative node",
        lambda: babi.to_data(babi.Story([(-1, 0, 1)]), babi.Question(0, (0,), (1,)), SPEC),
        "node ids",
    ),
    case(
        "to_data answer not in the story",
        lambda: babi.to_data(babi.Story([(0, 0, 1)]), babi.Question(0, (0,), (7,)), SPEC),
        "answer nodes",
    ),
    case(
        "to_data class beyond",
        lambda: babi.to_data(
            babi.Story([(0, 0, 1)]), babi.Question(0, (0, 1), (2,)), babi.TASKS["babi18"]
        ),
        "answer classes",
    ),
    case(
        "to_data direction beyond",
        lambda: babi.to_data(
            babi.Story([(0, 0, 1)]), babi.Question(0, (0, 1), (0, 4)), babi.TASKS["babi19"]
        ),
        "answer classes",
    ),
    case(
        "to_data arguments count",
        lambda: babi.to_data(babi.Story([(0, 0, 1)]), babi.Question(0, (0, 1), (1,)), SPEC),
        "argument",
    ),
    case(
        "to_data a tuple as story",
        lambda: babi.to_data((0, 0, 1), babi.Question(0, (0,), (1,)), SPEC),
        "story",
    ),
    case(
        "BabiGraphs stories of tuples",
        lambda: babi.BabiGraphs("babi15", stories=[(0, 0, 1)]),
        "stories[0]",
    ),
    case(
        "to_data padding shorter than the answer",
        lambda: babi.to_data(
            babi.Story([(0, 0, 1), (1, 0, 2)]),
            babi.Question(0, (0, 2), (1, 2)),
            babi.TASKS["shortest_path"],
            length=1,
        ),
        "length",
    ),
    case(
        "parse_heap dangling pointer",
        lambda: heap_graphs.parse_heap("0x10: next=0x20\nx = 0x10"),
        "0x10.next",
        "0x20",
        "dangling",
    ),
    case(
        "parse_heap field out of range",
        lambda: heap_graphs.parse_heap("0x10: down=0\nx = 0x10"),
        "'down'",
        "out of range",
    ),
    case(
        "parse_heap variable dangling",
        lambda: heap_graphs.parse_heap("0x10: next=0\nx = 0x40"),
        "variable x",
        "0x40",
    ),
    case(
        "parse_heap not a line of either form",
        lambda: heap_graphs.parse_heap("0x10: next=0\nnext 0x10"),
        "line 2",
    ),
    case("parse_heap bytes", lambda: heap_graphs.parse_heap(b"0x10: next=0"), "text"),
    case(
        "heap_from_cells pointer as text",
        lambda: heap_graphs.heap_from_cells({16: {"next": "0"}}, {"x": 16}),
        "cell 0x10.next",
    ),
    case(
        "describe a cell of list and tree fields",
        lambda: heap_graphs.describe(heap_graphs.parse_heap("0x10: next=0 left=0\nx = 0x10")),
        "0x10",
        "list cell",
    ),
    case(
        "pair_examples min_parameters=0",
        lambda: docstring_tasks.pair_examples(["json"], min_parameters=0),
        "min_parameters",
    ),
    case(
        "span_examples answer='type'",
        lambda: docstring_tasks.span_examples(["json"], answer="type"),  # type: ignore[arg-type]
        "answer",
        "'name'",
    ),
    case(
        "package_documents max_chars=0",
        lambda: text_corpus.package_documents(["json"], max_chars=0),
        "max_chars",
    ),
    case(
        "LogitsModel output without logits", lambda: LogitsModel(_Words())(torch.ones(1)), "logits"
    ),
]


class _Words(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, str]:
        return {"text": "not logits"}


@pytest.mark.parametrize(("call", "words", "error"), CONFIG + EMPTY + VALUES)
def test_refused(call: Any, words: tuple[str, ...], error: Any) -> None:
    assert_refused(call, words, error)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", ("is empty",)),
        ("Satz eins.\nZwei mit \u00fc.\n".encode("latin-1"), ("not UTF-8", "line 2")),
        (b"one line only\n", ("no document with at least 2 sentences",)),
    ],
)
def test_corpus_files_name_the_file_and_what_is_wrong(
    content: bytes, words: tuple[str, ...], tmp_path: Path
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    assert_refused(lambda: read_documents(path), (*words, "corpus.txt"))


def test_a_missing_corpus_is_named(tmp_path: Path) -> None:
    assert_refused(lambda: read_documents(tmp_path / "nope.txt"), ("nope.txt",), FileNotFoundError)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["reproduce", "nonsense"], ("invalid choice", "nonsense")),
        (["reproduce", "jsma", "--jobs", "0"], ("--jobs", ">= 1")),
        (["reproduce", "jsma", "--seed", "-1"], ("--seed", ">= 0")),
        (["bench", "jsma", "--seed", "abc"], ("--seed",)),
        (["frobnicate"], ("invalid choice",)),
    ],
)
def test_the_command_line_refuses_bad_arguments(
    argv: list[str], words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_a_digits_cache_of_nan_weights_is_trained_again(tmp_path: Path) -> None:
    os.environ["PAPERPORTS_CACHE"], old = str(tmp_path), os.environ["PAPERPORTS_CACHE"]
    try:
        model = digits_classifier(8, epochs=1)
        (path,) = tmp_path.glob("digits_cnn_*.pt")
        torch.save({k: v * float("nan") for k, v in model.state_dict().items()}, path)
        with pytest.warns(RuntimeWarning, match="NaN"):
            again = digits_classifier(8, epochs=1)
        assert all(torch.isfinite(v).all() for v in again.state_dict().values())
    finally:
        os.environ["PAPERPORTS_CACHE"] = old
