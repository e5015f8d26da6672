"""HuggingFace transformers plugins (``pip install "paperports[transformers]"``).

``accelerate`` is part of the extra because ``transformers.Trainer`` needs it.

Importing this module registers two model families with the Auto classes:

- BERT (model type ``"bert"``, which then maps to our classes instead of transformers'
  own) with ``AutoConfig``, ``AutoModel``, ``AutoModelForPreTraining``,
  ``AutoModelForMaskedLM``, ``AutoModelForNextSentencePrediction``,
  ``AutoModelForSequenceClassification``, ``AutoModelForTokenClassification``,
  ``AutoModelForQuestionAnswering`` and ``AutoModelForMultipleChoice``
  (``AutoModelForCausalLM`` refuses it with a clear error: the paper's encoder has no
  causal head);
- BN-LSTM (model type ``"bn_lstm"``) with ``AutoConfig``, ``AutoModel``,
  ``AutoModelForSequenceClassification`` and ``AutoModelForCausalLM``.
"""

from paperports._imports import require

require("transformers", "transformers", "accelerate")

from transformers import (  # noqa: E402
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from paperports.integrations.transformers.bert import (  # noqa: E402
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForPreTrainingOutput,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertPreTrainedModel,
)
from paperports.integrations.transformers.bert.modeling_bert import (  # noqa: E402
    BertNotACausalLM,
)
from paperports.integrations.transformers.bn_lstm import (  # noqa: E402
    BnLstmConfig,
    BnLstmForCausalLM,
    BnLstmForSequenceClassification,
    BnLstmModel,
    BnLstmPreTrainedModel,
)


def _register() -> None:
    AutoConfig.register(BertConfig.model_type, BertConfig, exist_ok=True)
    for auto, model in [
        (AutoModel, BertModel),
        (AutoModelForPreTraining, BertForPreTraining),
        (AutoModelForMaskedLM, BertForMaskedLM),
        (AutoModelForNextSentencePrediction, BertForNextSentencePrediction),
        (AutoModelForSequenceClassification, BertForSequenceClassification),
        (AutoModelForTokenClassification, BertForTokenClassification),
        (AutoModelForQuestionAnswering, BertForQuestionAnswering),
        (AutoModelForMultipleChoice, BertForMultipleChoice),
    ]:
        auto.register(BertConfig, model, exist_ok=True)
    AutoModelForCausalLM.register(BertConfig, BertNotACausalLM, exist_ok=True)
    AutoConfig.register(BnLstmConfig.model_type, BnLstmConfig, exist_ok=True)
    AutoModel.register(BnLstmConfig, BnLstmModel, exist_ok=True)
    AutoModelForSequenceClassification.register(
        BnLstmConfig, BnLstmForSequenceClassification, exist_ok=True
    )
    AutoModelForCausalLM.register(BnLstmConfig, BnLstmForCausalLM, exist_ok=True)


_register()

__all__ = [
    "BertConfig",
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForNextSentencePrediction",
    "BertForPreTraining",
    "BertForPreTrainingOutput",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPreTrainedModel",
    "BnLstmConfig",
    "BnLstmForCausalLM",
    "BnLstmForSequenceClassification",
    "BnLstmModel",
    "BnLstmPreTrainedModel",
]
