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


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_page_snippets_run(page: Path) -> None:
    blocks = _python_blocks(page)
    assert blocks, f"{page.name} has no python snippet"
    namespace: dict[str, object] = {}
    for block in blocks:  # later blocks may use names from earlier ones, as a reader would
        exec(compile(block, str(page), "exec"), namespace)


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
