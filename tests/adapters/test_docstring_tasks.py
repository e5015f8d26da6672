"""Downstream tasks from numpy-style docstrings and the docstring corpus (issue 25, item 1)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from paperports.adapters.docstring_tasks import pair_examples, parameters_section, span_examples
from paperports.adapters.text_corpus import docstrings, package_documents

SOURCE = '''
"""A toy module. It exists for the tests of the docstring tasks."""


def scale(x, factor=2.0, *, clip=None):
    """Scale an array by a factor.

    Parameters
    ----------
    x : array_like
        The values to scale. They may be of any shape.
    factor : float, default=2.0
        The factor to multiply by. Negative factors flip the sign.
        .. versionadded:: 1.2
    clip : float or None
        Upper bound of the result. None leaves it unbounded.

    Returns
    -------
    out : ndarray
        The scaled values.
    """


class Window:
    """A sliding window over a sequence of readings.

    Parameters
    ----------
    size : int
        Number of readings the window holds at once.
    step : int
        How far the window moves between two readings.
    """


def undocumented(a):
    """No sections here, only a line."""
'''


@pytest.fixture
def toy_package(tmp_path: Path) -> Iterator[str]:
    package = tmp_path / "toy_docs_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(SOURCE))
    (package / "broken.py").write_text("def (:\n")  # does not parse: skipped
    sys.path.insert(0, str(tmp_path))
    yield "toy_docs_pkg"
    sys.path.remove(str(tmp_path))
    sys.modules.pop("toy_docs_pkg", None)


def test_parameters_section_reads_names_types_and_descriptions() -> None:
    doc = textwrap.dedent(SOURCE.split('"""Scale')[1].split('"""')[0])
    params = parameters_section("Scale" + doc)
    assert [(p.name, p.type) for p in params] == [
        ("x", "array_like"), ("factor", "float, default=2.0"), ("clip", "float or None"),
    ]  # fmt: skip
    assert params[1].description == "The factor to multiply by. Negative factors flip the sign."
    assert parameters_section("No sections at all.") == []


def test_docstrings_are_read_without_importing_and_broken_files_skipped(toy_package: str) -> None:
    names = [name for name, _ in docstrings(toy_package)]
    assert names == [
        "toy_docs_pkg.__init__", "toy_docs_pkg.__init__.scale", "toy_docs_pkg.__init__.Window",
        "toy_docs_pkg.__init__.undocumented",
    ]  # fmt: skip
    assert "toy_docs_pkg" not in sys.modules
    with pytest.raises(ValueError, match="not installed"):
        list(docstrings("no_such_package_here"))


def test_span_examples_are_squad_spans_of_the_parameters_section(toy_package: str) -> None:
    examples = span_examples([toy_package])
    assert [e["question"] for e in examples] == ["x", "factor", "clip", "size", "step"]
    for e in examples:
        context, answers = e["context"], e["answers"]
        assert isinstance(context, str) and isinstance(answers, dict)
        start, text = answers["answer_start"][0], answers["text"][0]
        assert context[start : start + len(text)] == text
    first = examples[0]
    assert first["answers"]["text"] == ["The values to scale."]  # type: ignore[index]
    assert "versionadded" not in str(examples[1]["context"])
    assert span_examples([toy_package], min_parameters=3)[0]["docstring"].endswith("scale")  # type: ignore[union-attr]
    assert span_examples([toy_package], max_context_chars=50) == []


def test_name_spans_are_asked_by_the_description_that_follows_them(toy_package: str) -> None:
    by_description = span_examples([toy_package])
    examples = span_examples([toy_package], answer="name")
    assert [e["answers"]["text"] for e in examples] == [  # type: ignore[index]
        ["x"], ["factor"], ["clip"], ["size"], ["step"]
    ]  # fmt: skip
    for e, d in zip(examples, by_description, strict=True):
        context, answers = str(e["context"]), e["answers"]
        assert isinstance(answers, dict) and context == d["context"]
        start = answers["answer_start"][0]
        assert context[start : start + len(answers["text"][0])] == answers["text"][0]
        # the question is the description's first sentence, which follows the name
        assert e["question"] == d["answers"]["text"][0]  # type: ignore[index]
        assert context.index(str(e["question"])) > start
    assert examples[0]["question"] == "The values to scale."


def test_a_description_two_parameters_share_asks_for_no_name(tmp_path: Path) -> None:
    package = tmp_path / "toy_shared_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        'def f(a, b, c):\n    """Add three numbers together.\n\n    Parameters\n    ----------\n'
        "    a : int\n        A number to add in.\n    b : int\n        A number to add in.\n"
        '    c : int\n        The last one of the three.\n    """\n'
    )
    sys.path.insert(0, str(tmp_path))
    try:
        names = span_examples(["toy_shared_pkg"], answer="name")
        assert [e["answers"]["text"] for e in names] == [["c"]]  # type: ignore[index]
        assert len(span_examples(["toy_shared_pkg"])) == 3
    finally:
        sys.path.remove(str(tmp_path))


def test_pair_examples_pair_a_summary_with_its_own_and_a_foreign_description(
    toy_package: str,
) -> None:
    examples = pair_examples([toy_package], seed=0)
    assert [e["label"] for e in examples] == [1, 0] * 5
    own, foreign = examples[0], examples[1]
    assert own["summary"] == foreign["summary"] == "Scale an array by a factor."
    assert own["description"] == "The values to scale. They may be of any shape."
    assert foreign["description"] in {
        "Number of readings the window holds at once.",
        "How far the window moves between two readings.",
    }
    with pytest.raises(ValueError, match="fewer than two"):
        pair_examples([toy_package], min_parameters=3)


def test_package_documents_keep_prose_and_drop_fields_and_code(toy_package: str) -> None:
    documents = package_documents([toy_package], min_sentences=1)
    text = " ".join(s for d in documents for s in d)
    assert "The values to scale." in text
    assert "A sliding window over a sequence of readings." in text
    assert "array_like" not in text and "Parameters" not in text and "----" not in text
    with pytest.raises(TypeError, match="not one string"):
        package_documents(toy_package)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no docstring"):
        package_documents([toy_package], min_sentences=50)
