"""Adapters that let foolbox attack models whose forward pass does not return a tensor."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["LogitsModel"]


class LogitsModel(nn.Module):
    """Wrap a model that returns an object with ``.logits`` (HF ``ModelOutput``) or a
    tuple whose first element is the logits, so it returns the logits tensor itself.

    Example::

        fmodel = foolbox.PyTorchModel(LogitsModel(hf_model).eval(), bounds=(0, 1))

    Args:
        model: The wrapped ``nn.Module``; its other outputs are dropped.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"LogitsModel: model must be a torch.nn.Module, got {type(model).__name__}"
            )
        self.model = model

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = self.model(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            return out
        logits = getattr(out, "logits", None)
        if logits is None and isinstance(out, (tuple, list)) and out:
            logits = out[0]
        if not isinstance(logits, torch.Tensor):
            raise TypeError(
                f"{type(self.model).__name__} returned {type(out).__name__}, which has no "
                "tensor `.logits` and is not a tuple starting with the logits"
            )
        return logits
