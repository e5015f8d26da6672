"""What the transformers model families share: input checks, head losses and loading."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from transformers import PreTrainedConfig, PreTrainedModel
from transformers.utils.generic import ModelOutput

from paperports._checks import check_index_tensor, values_known

__all__ = [
    "CheckedPreTrainedModel",
    "check_attention_mask",
    "check_labels",
    "check_num_labels",
    "check_token_ids",
    "cross_entropy_ignoring",
    "finish_output",
    "sequence_classification_loss",
]

_Output = TypeVar("_Output", bound=ModelOutput)


def finish_output(
    output: _Output, return_dict: bool | None, config: PreTrainedConfig
) -> _Output | tuple[Any, ...]:
    """``output``, or its tuple where ``return_dict`` is ``False`` (the config's
    ``return_dict`` where it is ``None``), as transformers' models return."""
    if return_dict is None:
        return_dict = bool(getattr(config, "return_dict", True))
    return output if return_dict else output.to_tuple()


IGNORE_INDEX = -100
"""The label that transformers' losses skip (padding, sub-word continuations, unmasked)."""


def check_num_labels(config: PreTrainedConfig) -> int:
    """``config.num_labels`` as an int; raise unless it is at least 1."""
    if not config.num_labels or config.num_labels < 1:
        raise ValueError(f"num_labels must be >= 1, got {config.num_labels}")
    return int(config.num_labels)


def check_token_ids(name: str, ids: torch.Tensor, size: int, field: str) -> None:
    """Raise unless every entry of ``ids`` is an integer in ``[0, size)``.

    Value checks are skipped under ``torch.compile`` tracing and on the meta device, where
    reading values would break the graph or is impossible.
    """
    check_index_tensor(name, ids, low=0, high=size, what=f"config.{field} = {size}")


def check_attention_mask(attention_mask: torch.Tensor) -> None:
    """Raise unless every entry of ``attention_mask`` is 0 or 1 (booleans pass): other
    values (-1, 0.5, 2, NaN) have no meaning, and treating them as "attend" would be a
    silent guess."""
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(
            f"attention_mask must be a torch.Tensor, got {type(attention_mask).__name__}"
        )
    if attention_mask.dtype == torch.bool or attention_mask.numel() == 0:
        return
    if attention_mask.is_complex():
        raise TypeError(f"attention_mask must hold 0 and 1, got dtype {attention_mask.dtype}")
    if not values_known(attention_mask):
        return
    bad = (attention_mask != 0) & (attention_mask != 1)
    if bool(bad.any()):
        shown = attention_mask[bad].unique()[:5].tolist()
        raise ValueError(
            "attention_mask must hold 1 for tokens to attend to and 0 for padding; got "
            f"other values {shown}"
        )


def check_labels(name: str, labels: torch.Tensor, num_classes: int, *, ignore: bool) -> None:
    """Class labels in ``[0, num_classes)`` (or ``-100``, skipped, where ``ignore``)."""
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(labels).__name__}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class ids, got dtype {labels.dtype}")
    if labels.numel() == 0 or not values_known(labels):
        return
    kept = labels[labels != IGNORE_INDEX] if ignore else labels
    if kept.numel() and (int(kept.min()) < 0 or int(kept.max()) >= num_classes):
        skip = f" or {IGNORE_INDEX} (ignored)" if ignore else ""
        raise ValueError(
            f"{name} must lie in [0, {num_classes}){skip}; got values in "
            f"[{int(kept.min())}, {int(kept.max())}]"
        )


def cross_entropy_ignoring(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy over the labels that are not ``-100``.

    When every label is ``-100`` (a batch with nothing to predict), the loss is 0 with zero
    gradients, where ``F.cross_entropy``'s mean would be NaN and poison the optimiser state.
    """
    flat = labels.reshape(-1)
    total = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        flat,
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    return total / (flat != IGNORE_INDEX).sum().clamp(min=1).to(total.dtype)


def sequence_classification_loss(
    config: PreTrainedConfig, logits: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """The loss transformers' sequence classifiers use, chosen by ``config.problem_type``.

    When the problem type is unset it is inferred and stored, as transformers does: one label
    is regression (MSE), integer labels are single-label classification (cross-entropy),
    float labels with several classes are multi-label classification (BCE with logits).
    """
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels must be a torch.Tensor, got {type(labels).__name__}")
    num_labels = logits.shape[-1]
    batch = logits.shape[0]
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    if config.problem_type == "regression":
        _check_finite_labels(labels)
        expected = (batch,) if num_labels == 1 else (batch, num_labels)
        if labels.numel() != batch * num_labels:
            raise ValueError(
                f"labels for regression must have shape {expected}, got {tuple(labels.shape)}"
            )
        if num_labels == 1:
            return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).view(-1))
        return F.mse_loss(logits, labels.to(logits.dtype).view(batch, num_labels))
    if config.problem_type == "single_label_classification":
        check_labels("labels", labels, num_labels, ignore=False)
        if labels.numel() != batch:
            raise ValueError(
                f"labels must hold one class per sequence, shape ({batch},); got "
                f"{tuple(labels.shape)}"
            )
        return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    if config.problem_type == "multi_label_classification":
        _check_finite_labels(labels)
        if tuple(labels.shape) != (batch, num_labels):
            raise ValueError(
                f"multi-label labels must have shape ({batch}, {num_labels}), got "
                f"{tuple(labels.shape)}"
            )
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    raise ValueError(
        f"config.problem_type must be 'regression', 'single_label_classification' or "
        f"'multi_label_classification', got {config.problem_type!r}"
    )


def _check_finite_labels(labels: torch.Tensor) -> None:
    if labels.dtype == torch.bool or labels.is_complex():
        raise TypeError(f"labels must be real numbers, got dtype {labels.dtype}")
    if labels.is_floating_point() and values_known(labels) and not bool(labels.isfinite().all()):
        raise ValueError("labels hold NaN or infinite values")


class CheckedPreTrainedModel(PreTrainedModel):
    """``from_pretrained`` that refuses a checkpoint lacking the base model's own weights.

    transformers initialises whatever a checkpoint lacks and only logs a report, which is
    right for a new head on a pre-trained encoder and wrong for the encoder itself: a model
    loaded from the wrong checkpoint would run on random weights. Subclasses name the
    submodules that must load (``_required_weights``, under ``base_model_prefix``); heads
    missing from a checkpoint are initialised as in transformers.
    """

    _required_weights: tuple[str, ...] = ()
    """Prefixes, relative to the base model, of the parameters and buffers that must load."""

    accepts_loss_kwargs = False
    """Our heads' losses are means over their own batch and take no ``num_items_in_batch``.
    Without this, ``Trainer`` reads the ``**kwargs`` of ``forward`` as accepting it, and on
    several processes multiplies each loss by their number, expecting the model to divide by
    the global count: the gradients grew with the number of processes and the logged loss
    was that many times too large."""

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
        """:meth:`transformers.PreTrainedModel.from_pretrained`, refusing incomplete
        checkpoints.

        Raises:
            ValueError: the checkpoint lacks weights of the base model (a checkpoint of
                another architecture, or a truncated one), naming them.
        """
        wants_info = bool(kwargs.pop("output_loading_info", False))
        try:
            loaded: Any = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        except Exception as err:
            if not _is_unreadable_weights(err):
                raise
            where = args[0] if args else kwargs.get("pretrained_model_name_or_path")
            files = ", ".join(str(f) for f in _weights_files(where)) or str(where)
            raise ValueError(
                f"{cls.__name__}.from_pretrained: the weights in {files} could not be read "
                f"({type(err).__name__}: {err}); the file is empty, truncated or not a "
                "checkpoint"
            ) from err
        model, info = loaded
        missing = sorted(k for k in info["missing_keys"] if cls._is_required(k))
        if missing:
            unexpected = sorted(info["unexpected_keys"])
            raise ValueError(
                f"the checkpoint is incomplete for {cls.__name__}: {len(missing)} of the "
                f"{cls.base_model_prefix} model's weights are missing (for example "
                f"{missing[:5]}); {len(unexpected)} checkpoint keys were not recognised (for "
                f"example {unexpected[:5]}). Is it a checkpoint of this architecture?"
            )
        return (model, info) if wants_info else model

    @classmethod
    def _is_required(cls, key: str) -> bool:
        prefix = cls.base_model_prefix + "."
        if key.startswith(prefix):
            key = key[len(prefix) :]
        return key.startswith(cls._required_weights)


def _is_unreadable_weights(err: BaseException) -> bool:
    """An error of safetensors or ``torch.load`` reading a damaged weights file."""
    name = type(err).__name__
    text = str(err).lower()
    return name in ("SafetensorError", "UnpicklingError", "EOFError") or (
        isinstance(err, (RuntimeError, OSError))
        and any(k in text for k in ("deserializ", "zip archive", "unpickl", "header"))
    )


def _weights_files(where: Any) -> list[Path]:
    if where is None or not Path(str(where)).is_dir():
        return []
    folder = Path(str(where))
    return sorted([*folder.glob("*.safetensors"), *folder.glob("*.bin")])
