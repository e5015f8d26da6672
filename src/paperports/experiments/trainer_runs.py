"""What the experiments that train with ``transformers.Trainer`` share (BERT and BN-LSTM).

``Trainer`` reports in two ways of its own: with ``disable_tqdm=False`` a progress bar that
also writes every log dictionary (``{'loss': 2.1, 'grad_norm': ...}``) to the terminal, with
``disable_tqdm=True`` a printer of the same dictionaries. A reproduction shows one bar per
training run instead, with the latest loss beside it, and nothing else: the numbers that
matter go to the report. :func:`quiet_trainer` makes that change on a built ``Trainer``;
:func:`quiet_transformers` silences transformers' load reports around an experiment.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.utils import logging as hf_logging

__all__ = ["TrainerProgress", "quiet_trainer", "quiet_transformers"]


class TrainerProgress(TrainerCallback):
    """One progress bar over a run's ``max_steps``, with the latest logged training loss."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=state.max_steps, desc=self.desc, leave=False)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if self.bar is not None and logs and "loss" in logs:
            self.bar.set_postfix(loss=f"{float(logs['loss']):.3f}", refresh=False)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def quiet_trainer(trainer: Trainer, *, quiet: bool, desc: str) -> Trainer:
    """Replace ``trainer``'s own printing by one :class:`TrainerProgress` bar (none when
    ``quiet``). The logged history (``trainer.state.log_history``) is kept as it was."""
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if not quiet:
        trainer.add_callback(TrainerProgress(desc))
    return trainer


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-load reports and progress bars inside the experiments.

    Putting heads onto an encoder checkpoint is what these experiments mean to do;
    transformers reports it at warning level on every load. Errors still show.
    """
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
