"""HuggingFace transformers plugins (``pip install "paperports[transformers]"``).

``accelerate`` is part of the extra because ``transformers.Trainer`` needs it.

Importing this module registers the BN-LSTM family (model type ``"bn_lstm"``) with
``AutoConfig``, ``AutoModel``, ``AutoModelForSequenceClassification`` and
``AutoModelForCausalLM``.
"""

from paperports._imports import require

require("transformers", "transformers", "accelerate")

from transformers import (  # noqa: E402
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
)

from paperports.integrations.transformers.bn_lstm import (  # noqa: E402
    BnLstmConfig,
    BnLstmForCausalLM,
    BnLstmForSequenceClassification,
    BnLstmModel,
    BnLstmPreTrainedModel,
)


def _register() -> None:
    AutoConfig.register(BnLstmConfig.model_type, BnLstmConfig, exist_ok=True)
    AutoModel.register(BnLstmConfig, BnLstmModel, exist_ok=True)
    AutoModelForSequenceClassification.register(
        BnLstmConfig, BnLstmForSequenceClassification, exist_ok=True
    )
    AutoModelForCausalLM.register(BnLstmConfig, BnLstmForCausalLM, exist_ok=True)


_register()

__all__ = [
    "BnLstmConfig",
    "BnLstmForCausalLM",
    "BnLstmForSequenceClassification",
    "BnLstmModel",
    "BnLstmPreTrainedModel",
]
