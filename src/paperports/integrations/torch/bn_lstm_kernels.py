"""The BN-LSTM's fused CPU step kernels (``csrc/bn_lstm_step.cpp``), built on first use.

A BN-LSTM step is one recurrent matrix product and some twenty elementwise operations and
reductions (three batch norms, the gates, the cell). Launched one by one from Python, those
cost more than the product at the sizes of ``paperports bench bnlstm``. The kernels do all
of a step but the product in a few passes over memory (sums over the batch for the
statistics, elementwise work along the rows, each split over the CPU's threads and
vectorised), and the loops over steps run in C++ (training's forward and backward, and
evaluation). Training keeps
:class:`~paperports.integrations.torch.bn_lstm_training.BNLSTMSequence`'s saved tensors,
so the kernels' forward and backward each pair with the Python ones.

They are compiled with the machine's C++ compiler the first time a BN-LSTM runs on CPU
(tens of seconds; :func:`torch.utils.cpp_extension.load` caches the build under
``TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``, one build per CPU kind;
a process in another environment rebuilds it). Where they cannot be
built (no compiler, no ``ninja``), or with ``PAPERPORTS_BNLSTM_KERNELS=0``, the same
function runs as separate torch operations: the results agree (the tests compare both),
only the speed differs. :func:`kernels_available` says whether they are built;
``with fused_kernels(False):`` switches them off for a block of code.
"""

from __future__ import annotations

import hashlib
import os
import platform
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["fused_kernels", "kernels", "kernels_available", "ops", "uses_kernels"]

_SOURCE = Path(__file__).with_name("csrc") / "bn_lstm_step.cpp"
_FLAGS = ["-O3", "-ffast-math", "-fno-finite-math-only", "-march=native", "-fopenmp"]
_lock = threading.Lock()
_state: dict[str, Any] = {}


def _cpu_tag() -> str:
    """A short tag of this CPU's instruction sets: the build uses ``-march=native``, so a
    build cache shared by machines (a home directory on a cluster) keeps one per CPU kind."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            flags = next((line for line in info if line.startswith("flags")), "")
    except OSError:
        flags = ""
    key = flags or platform.machine() + platform.processor()
    return hashlib.sha1(key.encode()).hexdigest()[:10]


def _build() -> Any:
    from torch.utils import cpp_extension

    cpp_extension.load(
        name=f"paperports_bnlstm_step_{_cpu_tag()}",
        sources=[str(_SOURCE)],
        extra_cflags=_FLAGS,
        extra_ldflags=["-fopenmp"],
        is_python_module=False,
        verbose=False,
    )
    return torch.ops.paperports_bnlstm


_ENABLED: ContextVar[bool] = ContextVar("paperports_bnlstm_kernels", default=True)


@contextmanager
def fused_kernels(enabled: bool) -> Iterator[None]:
    """Inside ``with fused_kernels(False):``, BN-LSTMs run as separate torch operations
    even where the kernels are built (the same function; for comparison and debugging)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"fused_kernels: enabled must be True or False, got {enabled!r}")
    token = _ENABLED.set(enabled)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def kernels() -> Any | None:
    """The ``torch.ops.paperports_bnlstm`` namespace, building it on first call; ``None``
    where the kernels are switched off or cannot be built (the reason is warned once)."""
    if "ops" in _state:
        return _state["ops"]
    with _lock:
        if "ops" not in _state:
            ops = None
            setting = os.environ.get("PAPERPORTS_BNLSTM_KERNELS", "1")
            if setting not in ("0", "1"):
                raise ValueError(
                    f"PAPERPORTS_BNLSTM_KERNELS must be 0 (off) or 1 (on), got {setting!r}"
                )
            if setting == "1":
                try:
                    ops = _build()
                except Exception as error:  # no compiler, no ninja, a failed build
                    warnings.warn(
                        "BNLSTM: the fused CPU kernels could not be built, so the BN-LSTM "
                        f"runs as separate torch operations (same results, slower): {error}",
                        RuntimeWarning,
                        stacklevel=3,
                    )
            _state["ops"] = ops
    return _state["ops"]


def ops() -> Any:
    """The built kernels' namespace, for code that :func:`uses_kernels` has cleared."""
    built = kernels()
    if built is None:
        raise RuntimeError("BNLSTM: the fused CPU kernels are not available here")
    return built


def kernels_available() -> bool:
    """Whether the fused CPU kernels are built and switched on (builds them if needed)."""
    return kernels() is not None


def uses_kernels(*tensors: Tensor) -> bool:
    """Whether a computation on ``tensors`` runs the kernels: CPU, float32 or float64, not
    inside ``fused_kernels(False)``, and the kernels available."""
    first = tensors[0]
    return (
        _ENABLED.get()
        and first.device.type == "cpu"
        and first.dtype in (torch.float32, torch.float64)
        and all(t.dtype == first.dtype and t.device == first.device for t in tensors)
        and kernels_available()
    )
