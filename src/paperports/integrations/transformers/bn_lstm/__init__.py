"""The BN-LSTM family for transformers (Cooijmans et al. 2016)."""

from paperports.integrations.transformers.bn_lstm.configuration_bn_lstm import BnLstmConfig
from paperports.integrations.transformers.bn_lstm.modeling_bn_lstm import (
    BnLstmForCausalLM,
    BnLstmForSequenceClassification,
    BnLstmModel,
    BnLstmPreTrainedModel,
)

__all__ = [
    "BnLstmConfig",
    "BnLstmForCausalLM",
    "BnLstmForSequenceClassification",
    "BnLstmModel",
    "BnLstmPreTrainedModel",
]
