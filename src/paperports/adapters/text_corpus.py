"""Plain-text corpora as documents of sentences, the unit BERT's pre-training data is made of.

Three sources: the Python documentation topics that the standard library ships
(``pydoc_data.topics``, about 465,000 characters in 79 topics: the offline corpus of the
demos and tests), the docstrings of installed packages (:func:`package_documents`: tens of
MB of English prose, read from their source files without importing them), and a user's
own text in the format of BERT's ``create_pretraining_data.py`` (one sentence per line, a
blank line between documents).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from paperports._checks import check_file, check_int

__all__ = [
    "docstrings",
    "package_documents",
    "read_documents",
    "split_sentences",
    "stdlib_documents",
]

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


# Prose, not code or tables: a sentence of at least four words, mostly letters and spaces.
_WORD = re.compile(r"[A-Za-z]{2,}")


def _is_prose(sentence: str) -> bool:
    if len(_WORD.findall(sentence)) < 4 or sentence.startswith((">>>", "...", "..")):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in sentence)
    return letters >= 0.8 * len(sentence)


# numpy-style field lines ("name : type") and section headers (a line over a rule)
_FIELD = re.compile(r"^\s*\*{0,2}[A-Za-z_][\w, ]*\s:(\s|$)")


def _docstring_prose(text: str) -> str:
    """``text`` without its section headers, numpy-style field lines and doctest lines."""
    lines = text.splitlines()
    kept = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        after = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if _RULE.match(after) or _FIELD.match(line) or stripped.startswith((">>>", "...")):
            kept.append("")  # a header, a field or code ends the paragraph
            continue
        kept.append(line)
    return "\n".join(kept)


def _package_root(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"package {package!r} is not installed (or is a single module)")
    return Path(next(iter(spec.submodule_search_locations)))


def docstrings(package: str) -> Iterator[tuple[str, str]]:
    """``(qualified name, docstring)`` of every module, class and function of an installed
    ``package``, read from its source files with :mod:`ast` (nothing is imported), in a
    fixed order; files that do not parse are skipped.

    Raises:
        ValueError: ``package`` is not an installed package.
    """
    root = _package_root(package)
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join((package, *path.relative_to(root).with_suffix("").parts))
        nodes: list[tuple[str, ast.AST]] = [(module, tree)]
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                nodes.append((f"{module}.{node.name}", node))
        for name, node in nodes:
            text = ast.get_docstring(node)  # type: ignore[arg-type]
            if text:
                yield name, text


def package_documents(
    packages: Sequence[str], min_sentences: int = 2, max_chars: int | None = None
) -> list[list[str]]:
    """The docstrings of installed ``packages`` as documents of sentences: one document per
    docstring, its prose paragraphs split into sentences (code, doctests, tables and
    section rules left out), documents of fewer than ``min_sentences`` sentences dropped;
    at most ``max_chars`` characters in all when given.

    Raises:
        ValueError: a package that is not installed, or no document at all.
    """
    min_sentences = check_int("min_sentences", min_sentences, minimum=1, who="package_documents")
    if max_chars is not None:
        max_chars = check_int("max_chars", max_chars, minimum=1, who="package_documents")
    if isinstance(packages, str):
        raise TypeError("packages must be a list of package names, not one string")
    documents: list[list[str]] = []
    total = 0
    for package in packages:
        for _, text in docstrings(package):
            prose = _docstring_prose(text)
            sentences = [s for p in _paragraphs(prose) for s in split_sentences(p) if _is_prose(s)]
            if len(sentences) < min_sentences:
                continue
            documents.append(sentences)
            total += sum(map(len, sentences))
            if max_chars is not None and total >= max_chars:
                return documents
    if not documents:
        raise ValueError(f"no docstring of {list(packages)} has {min_sentences} prose sentences")
    return documents
