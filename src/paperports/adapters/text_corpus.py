"""Plain-text corpora as documents of sentences, the unit BERT's pre-training data is made of.

Two sources: the Python documentation topics that the standard library ships
(``pydoc_data.topics``, about 465,000 characters in 79 topics: the offline corpus of the
demos and tests), and a user's own text in the format of BERT's ``create_pretraining_data.py``
(one sentence per line, a blank line between documents).
"""

from __future__ import annotations

import re
from pathlib import Path

from paperports._checks import check_file, check_int

__all__ = ["read_documents", "split_sentences", "stdlib_documents"]

# A sentence ends at . ! or ? followed by white space and an upper-case letter, a quote or a
# digit; abbreviations such as "e.g. foo" stay whole because a lower-case word follows.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(0-9])")
_RULE = re.compile(r"^[*=\-~^]{3,}$")


def split_sentences(paragraph: str) -> list[str]:
    """Split one paragraph into sentences, with white space collapsed."""
    text = " ".join(paragraph.split())
    return [s for s in _SENTENCE_END.split(text) if s]


def _paragraphs(text: str) -> list[str]:
    blocks = re.split(r"\n\s*\n", text)
    kept = []
    for block in blocks:
        lines = [line for line in block.splitlines() if not _RULE.match(line.strip())]
        if lines:
            kept.append("\n".join(lines))
    return kept


def stdlib_documents(min_sentences: int = 2) -> list[list[str]]:
    """The standard library's documentation topics as documents of sentences.

    Each ``pydoc_data.topics`` entry (a section of the Python language reference, for
    example "Customizing attribute access") is one document; its paragraphs are split into
    sentences, headings and rule lines dropped. Documents with fewer than ``min_sentences``
    sentences are left out (next-sentence pairs need at least two).
    """
    from pydoc_data.topics import topics

    check_int("min_sentences", min_sentences, minimum=1, who="stdlib_documents")

    documents = []
    for name in sorted(topics):
        sentences = [s for p in _paragraphs(topics[name]) for s in split_sentences(p)]
        if len(sentences) >= min_sentences:
            documents.append(sentences)
    return documents


def read_documents(path: str | Path, min_sentences: int = 2) -> list[list[str]]:
    """Read a corpus in BERT's pre-training text format.

    One sentence per line; a blank line ends a document (the format of the paper's
    ``create_pretraining_data.py`` input). Lines are stripped; documents with fewer than
    ``min_sentences`` sentences are left out.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is empty, not UTF-8, or holds no document with
            ``min_sentences`` sentences.
    """
    min_sentences = check_int("min_sentences", min_sentences, minimum=1, who="read_documents")
    file = check_file("path", path, who="read_documents")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        number = file.read_bytes()[: err.start].count(b"\n") + 1
        raise ValueError(
            f"{file}: not UTF-8 text (byte {err.start}, line {number}: {err.reason}); save the "
            "corpus as UTF-8"
        ) from None
    documents: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            current.append(line)
            continue
        if current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    kept = [d for d in documents if len(d) >= min_sentences]
    if not kept:
        raise ValueError(
            f"{path}: no document with at least {min_sentences} sentences; expected one "
            "sentence per line and a blank line between documents"
        )
    return kept
