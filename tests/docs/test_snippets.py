"""The usage snippets of the docs and the examples run as written."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "integrations").glob("*.md"))


def _python_blocks(page: Path) -> list[tuple[int, str]]:
    """Each python block and the number of the page's line before it."""
    text = page.read_text()
    return [
        (text.count("\n", 0, m.start(1)), m.group(1))
        for m in re.finditer(r"```python\n(.*?)```", text, flags=re.S)
    ]


def _claims(page: Path) -> dict[int, str]:
    """The printed claims: a snippet line ending with ``# prints: TEXT`` must print TEXT
    (``*`` matches anything), keyed by the page's line number."""
    claims = {}
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        found = re.search(r"#\s*prints:\s*(.*)$", line)
        if found:
            claims[number] = found.group(1).strip()
    return claims


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_page_snippets_run_and_print_what_they_say(page: Path) -> None:
    blocks = _python_blocks(page)
    assert blocks, f"{page.name} has no python snippet"
    printed: dict[int, list[str]] = {}

    def recording_print(*args: object, sep: str = " ", **kwargs: object) -> None:
        frame = sys._getframe(1)
        if frame.f_code.co_filename == str(page):
            printed.setdefault(frame.f_lineno, []).append(sep.join(str(a) for a in args))

    namespace: dict[str, object] = {"print": recording_print}
    for offset, block in blocks:  # later blocks use names from earlier ones, as a reader's
        # padded, so that the code's line numbers are the page's
        exec(compile("\n" * offset + block, str(page), "exec"), namespace)
    claims = _claims(page)
    for number, expected in claims.items():
        got = printed.get(number)
        assert got, f"{page.name}:{number} says it prints {expected!r}, but printed nothing"
        pattern = ".*".join(re.escape(part) for part in expected.split("*"))
        assert all(re.fullmatch(pattern, g) for g in got), (
            f"{page.name}:{number} says it prints {expected!r}, printed {got}"
        )
    unclaimed = set(printed) - set(claims)
    assert not unclaimed, f"{page.name}: lines {sorted(unclaimed)} print without a '# prints:'"


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("foolbox_jsma.py", ["--images", "8"]),
        ("torch_bnlstm.py", ["--epochs", "1"]),
        (
            "sb3_obsdrop_long_run.py",
            # the options of the docs' rows, on a tiny budget
            [
                *("--steps", "2048", "--every", "2048", "--episodes", "1", "--dream-steps", "256"),
                *("--critic-trains-model", "--acceleration-scale", "10", "--zero-init"),
                *("--vf-coef", "2"),
            ],
        ),
        (
            "sb3_obsdrop_long_run.py",
            [
                *("--steps", "2048", "--every", "2048", "--episodes", "2"),
                *("--privileged-critic", "--critic-reads-belief"),
            ],
        ),
    ],
)
def test_examples_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # whatever a script writes stays out of the tree
    monkeypatch.setattr(sys, "argv", [script, *args])
    threads = torch.get_num_threads()  # a script may set its own; the other tests keep theirs
    try:
        runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
