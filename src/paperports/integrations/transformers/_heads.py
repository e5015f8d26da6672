"""Helpers shared by the transformers model families: input checks and head losses."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedConfig

__all__ = ["check_num_labels", "check_token_ids", "sequence_classification_loss"]


def check_num_labels(config: PreTrainedConfig) -> int:
    """``config.num_labels`` as an int; raise unless it is at least 1."""
    if not config.num_labels or config.num_labels < 1:
        raise ValueError(f"num_labels must be >= 1, got {config.num_labels}")
    return int(config.num_labels)


def check_token_ids(name: str, ids: torch.Tensor, size: int, field: str) -> None:
    """Raise unless every entry of ``ids`` is an integer in ``[0, size)``.

    Skipped under ``torch.compile`` tracing, where reading values would break the graph.
    """
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids, got dtype {ids.dtype}")
    if torch.compiler.is_compiling() or ids.numel() == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        raise ValueError(
            f"{name} must lie in [0, {size}) (config.{field} = {size}); got values in "
            f"[{low}, {high}]"
        )


def sequence_classification_loss(
    config: PreTrainedConfig, logits: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """The loss transformers' sequence classifiers use, chosen by ``config.problem_type``.

    When the problem type is unset it is inferred and stored, as transformers does: one label
    is regression (MSE), integer labels are single-label classification (cross-entropy),
    float labels with several classes are multi-label classification (BCE with logits).
    """
    num_labels = logits.shape[-1]
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    if config.problem_type == "regression":
        if num_labels == 1:
            return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).view(-1))
        return F.mse_loss(logits, labels.to(logits.dtype))
    if config.problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    if config.problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    raise ValueError(
        f"config.problem_type must be 'regression', 'single_label_classification' or "
        f"'multi_label_classification', got {config.problem_type!r}"
    )
