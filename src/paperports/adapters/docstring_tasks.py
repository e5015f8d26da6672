"""Two downstream tasks built from numpy-style docstrings, for the BERT ablation (issue 25).

The paper's ablation (Table 5) fine-tunes each pre-trained model on sentence-pair
classification (MNLI, MRPC, ...) and on span extraction (SQuAD). Offline, both are built here
from the numpy-style docstrings of installed packages (scipy, scikit-learn, numpy, pandas),
which the pre-training corpus leaves out:

- :func:`span_examples`, SQuAD-style: the context is the docstring's whole ``Parameters``
  section (every parameter's name, type and description), the answer a character span of
  it (SQuAD's ``answers`` format, so transformers' question-answering recipe applies
  unchanged). With ``answer="description"`` the question is a parameter's name and the
  answer the first sentence of its description: the name just before the span says where
  it starts, so reading to the left suffices. With ``answer="name"`` the question is that
  sentence and the answer the parameter's name, which comes *before* the description that
  identifies it: a model must read to the right of the span to find it, as SQuAD's answers
  are often found by the words around them on both sides;
- :func:`pair_examples`: a function's summary line and a parameter's description; label 1
  when the parameter is that function's, 0 when it is drawn from another docstring.

Examples come with the docstring's qualified name, so that train and test can be split by
docstring.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from paperports._checks import check_choice, check_int
from paperports.adapters.text_corpus import docstrings, split_sentences

__all__ = [
    "DOWNSTREAM_PACKAGES",
    "Parameter",
    "pair_examples",
    "parameters_section",
    "span_examples",
]

DOWNSTREAM_PACKAGES = ("scipy", "sklearn", "numpy", "pandas")
"""Packages with numpy-style docstrings, kept out of the pre-training corpus."""

_RULE = re.compile(r"^-{3,}$")
_FIELD = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)\s*(?::\s*(.*))?$")


@dataclass(frozen=True)
class Parameter:
    """One entry of a ``Parameters`` section: its name, type and description."""

    name: str
    type: str
    description: str


def parameters_section(docstring: str) -> list[Parameter]:
    """The entries of the numpy-style ``Parameters`` section of ``docstring`` (empty when it
    has none): a line ``name : type`` at the section's indentation starts an entry, the
    more indented lines under it are its description."""
    lines = docstring.expandtabs().splitlines()
    start = next(
        (
            i + 2
            for i in range(len(lines) - 1)
            if lines[i].strip() == "Parameters" and _RULE.match(lines[i + 1].strip())
        ),
        None,
    )
    if start is None:
        return []
    entries: list[tuple[str, str, list[str]]] = []
    base: int | None = None
    for i in range(start, len(lines)):
        line = lines[i]
        if i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
            break  # the next section's header
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if base is None:
            base = indent
        if indent <= base:
            if indent < base:
                break
            field = _FIELD.match(line.strip())
            if field is None:
                break
            entries.append((field.group(1).lstrip("*"), (field.group(2) or "").strip(), []))
        elif entries and not line.strip().startswith(".."):  # not a reST directive
            entries[-1][2].append(line.strip())
    return [Parameter(n, t, " ".join(d)) for n, t, d in entries if d]


@dataclass(frozen=True)
class _Doc:
    name: str
    summary: str
    parameters: list[Parameter]


@functools.lru_cache(maxsize=8)
def _documented(packages: tuple[str, ...], min_parameters: int) -> tuple[_Doc, ...]:
    """The docstrings with ``min_parameters`` described parameters or more: read once per
    process for both tasks (the ablation builds both from the same packages)."""
    docs = []
    for package in packages:
        for name, text in docstrings(package):
            params = [
                p for p in parameters_section(text) if len(split_sentences(p.description)) >= 1
                and len(p.description.split()) >= 4
            ]  # fmt: skip
            summary = " ".join(text.strip().split("\n\n", 1)[0].split())
            if len(params) >= min_parameters and len(summary.split()) >= 3:
                docs.append(_Doc(name, summary, params))
    return tuple(docs)


def span_examples(
    packages: Sequence[str] = DOWNSTREAM_PACKAGES,
    min_parameters: int = 2,
    max_context_chars: int = 1000,
    answer: Literal["description", "name"] = "description",
) -> list[dict[str, object]]:
    """SQuAD-style examples: ``{"id", "docstring", "question", "context", "answers"}`` with
    ``answers = {"text": [answer], "answer_start": [character offset]}``, one per described
    parameter of every docstring with ``min_parameters`` or more whose section fits in
    ``max_context_chars`` characters (about a quarter as many tokens). ``answer``: the first
    sentence of the parameter's description, asked by its name, or the name, asked by that
    sentence (a sentence that two parameters of the section share asks nothing and is left
    out)."""
    who = "span_examples"
    min_parameters = check_int("min_parameters", min_parameters, minimum=1, who=who)
    max_context_chars = check_int("max_context_chars", max_context_chars, minimum=1, who=who)
    answer = check_choice("answer", answer, ("description", "name"), who=who)
    examples: list[dict[str, object]] = []
    for doc in _documented(tuple(packages), min_parameters):
        parts, names, starts = [], [], []
        offset = 0
        for p in doc.parameters:
            head = f"{p.name} : {p.type}. " if p.type else f"{p.name}. "
            body = " ".join(p.description.split())
            parts.append(head + body)
            names.append(offset)
            starts.append(offset + len(head))
            offset += len(head) + len(body) + 1
        context = " ".join(parts)
        if len(context) > max_context_chars:
            continue
        for p, at_name, start in zip(doc.parameters, names, starts, strict=True):
            sentence = split_sentences(p.description)[0]
            assert context[start : start + len(sentence)] == sentence
            if answer == "description":
                question, span, at = p.name, sentence, start
            elif context.count(sentence) > 1:
                continue
            else:
                question, span, at = sentence, p.name, at_name
            assert context[at : at + len(span)] == span
            examples.append(
                {
                    "id": f"{doc.name}:{p.name}",
                    "docstring": doc.name,
                    "question": question,
                    "context": context,
                    "answers": {"text": [span], "answer_start": [at]},
                }
            )
    return examples


def pair_examples(
    packages: Sequence[str] = DOWNSTREAM_PACKAGES, seed: int = 0, min_parameters: int = 2
) -> list[dict[str, object]]:
    """Sentence pairs ``{"docstring", "summary", "description", "label"}``: for every
    documented parameter, its function's summary line with its own description (label 1)
    and, drawn with ``seed``, with another docstring's (label 0)."""
    min_parameters = check_int("min_parameters", min_parameters, minimum=1, who="pair_examples")
    docs = _documented(tuple(packages), min_parameters)
    if len(docs) < 2:
        raise ValueError(f"fewer than two numpy-style docstrings in {list(packages)}")
    rng = random.Random(seed)
    examples: list[dict[str, object]] = []
    for i, doc in enumerate(docs):
        for p in doc.parameters:
            other = docs[(i + rng.randrange(1, len(docs))) % len(docs)]
            foreign = rng.choice(other.parameters)
            for description, label in ((p.description, 1), (foreign.description, 0)):
                examples.append(
                    {
                        "docstring": doc.name,
                        "summary": doc.summary,
                        "description": " ".join(description.split()),
                        "label": label,
                    }
                )
    return examples
