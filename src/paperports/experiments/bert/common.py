"""What the BERT experiments share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from transformers.utils import logging as hf_logging

__all__ = ["quiet_transformers"]


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-load reports and progress bars inside the experiments.

    Loading the ``"bert"`` MiniLM checkpoint into ``"paperports-bert"`` classes, and heads
    onto an encoder checkpoint, is what these experiments mean to do; transformers reports
    both at warning level on every load. Errors still show.
    """
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
