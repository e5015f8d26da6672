"""Documents of sentences from the standard library's topics and from users' files."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperports.adapters.text_corpus import read_documents, split_sentences, stdlib_documents


def test_split_sentences_keeps_abbreviations_and_collapses_space() -> None:
    text = 'Use e.g. a list.  Then stop!\nWhy? 3 more. "Quoted" too.'
    assert split_sentences(text) == [
        "Use e.g. a list.",
        "Then stop!",
        "Why?",
        "3 more.",
        '"Quoted" too.',
    ]


def test_stdlib_documents_are_the_pydoc_topics() -> None:
    from pydoc_data.topics import topics

    documents = stdlib_documents()
    assert 50 <= len(documents) <= len(topics)
    assert all(len(d) >= 2 for d in documents)
    assert sum(map(len, documents)) > 2000
    joined = [" ".join(d) for d in documents]
    assert any("Customizing attribute access" in d for d in joined)
    assert not any(s.startswith("****") for d in documents for s in d)  # rule lines dropped


def test_read_documents_uses_berts_text_format(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text(
        "First doc, one.\nFirst doc, two.\n\n\nLonely.\n\nSecond, one.\n Second, two.\n"
    )
    assert read_documents(path) == [
        ["First doc, one.", "First doc, two."],
        ["Second, one.", "Second, two."],
    ]
    assert len(read_documents(path, min_sentences=1)) == 3
    (tmp_path / "bad.txt").write_text("one line only\n")
    with pytest.raises(ValueError, match="blank line between documents"):
        read_documents(tmp_path / "bad.txt")


def test_a_corpus_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("Ein Satz.\nZweiter Satz mit \u00fc.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt: not UTF-8 text \(byte \d+, line 2"):
        read_documents(path)


def test_an_empty_or_missing_corpus_names_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.txt is empty"):
        read_documents(empty)
    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        read_documents(tmp_path / "missing.txt")
