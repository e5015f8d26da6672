"""transformers' own model test suite over our BN-LSTM family (issue 25, item 4).

The same ``ModelTesterMixin`` as for our BERT (see
``tests/integrations/transformers/bert/test_transformers_model_tester.py``), over
``BnLstmModel``, ``BnLstmForSequenceClassification`` and ``BnLstmForCausalLM``. A recurrent
model has no attentions: ``has_attentions = False``, as transformers' own recurrent models
(Mamba, RWKV) declare, and its config no ``num_attention_heads``. The suite decides which
classes are base models, classifiers and language models (who gets labels, who trains,
whose loss must honour ``shift_labels``) from transformers' internal lists of its own class
names, which a registered third-party model is not in: the three are added to those lists
for the run and taken out after. transformers' generation tests are not in its source
distribution, so ``all_generative_model_classes`` is empty (``generate`` is tested in
``test_modeling_bn_lstm.py``). Batches are right-padded, which the recurrent family
requires. As for our BERT, the one test that expects a checkpoint without the base model's
weights to load is held to our refusal instead.
"""

from __future__ import annotations

import unittest
from typing import Any

import pytest
import torch

from paperports.integrations.transformers import (
    BnLstmConfig,
    BnLstmForCausalLM,
    BnLstmForSequenceClassification,
    BnLstmModel,
)

from ...ecosystem_suites import use_suite

use_suite("transformers")

from transformers.models.auto import modeling_auto  # noqa: E402
from transformers_tests.test_configuration_common import ConfigTester  # noqa: E402
from transformers_tests.test_modeling_common import ModelTesterMixin, ids_tensor  # noqa: E402

NAME_LISTS = {
    "MODEL_MAPPING_NAMES": "BnLstmModel",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "BnLstmForSequenceClassification",
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES": "BnLstmForCausalLM",
}


class BnLstmModelTester:
    def __init__(self, parent: unittest.TestCase) -> None:
        self.parent = parent
        self.batch_size, self.seq_length, self.vocab_size = 13, 7, 99
        self.hidden_size, self.num_hidden_layers = 32, 2
        self.num_labels = 3
        self.is_training = True

    def get_config(self) -> BnLstmConfig:
        return BnLstmConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_labels=self.num_labels,
            t_max=self.seq_length,
            # embeddings of scale 1: an untrained model evaluates with running statistics at
            # mean 0 and variance 1, through which 0.02-scale embeddings give logits flat to
            # 1e-8, and the suite compares losses that must differ
            initializer_range=1.0,
        )

    def prepare_config_and_inputs_for_common(self) -> tuple[BnLstmConfig, dict[str, Any]]:
        shape = [self.batch_size, self.seq_length]
        lengths = 1 + ids_tensor([self.batch_size], self.seq_length)  # 1 .. T, right-padded
        mask = (torch.arange(self.seq_length)[None] < lengths[:, None]).long()
        return self.get_config(), {
            "input_ids": ids_tensor(shape, self.vocab_size),
            "attention_mask": mask,
        }


class BnLstmModelTest(ModelTesterMixin, unittest.TestCase):  # type: ignore[misc]
    all_model_classes = (BnLstmModel, BnLstmForSequenceClassification, BnLstmForCausalLM)
    all_generative_model_classes = ()  # transformers' generation tests are not in its sdist
    has_attentions = False

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        for name, class_name in NAME_LISTS.items():
            getattr(modeling_auto, name)["bn_lstm"] = class_name

    @classmethod
    def tearDownClass(cls) -> None:
        for name in NAME_LISTS:
            getattr(modeling_auto, name).pop("bn_lstm", None)
        super().tearDownClass()

    def setUp(self) -> None:
        self.model_tester = BnLstmModelTester(self)
        self.config_tester = ConfigTester(
            self,
            config_class=BnLstmConfig,
            hidden_size=37,
            common_properties=["hidden_size", "num_hidden_layers"],
        )

    def test_config(self) -> None:
        self.config_tester.run_common_tests()

    def test_model_weights_reload_no_missing_tied_weights(self) -> None:
        """The suite's test loads a checkpoint without the base model's weights and
        expects them initialised: ours refuses it, naming them."""
        with pytest.raises(ValueError, match="checkpoint is incomplete for BnLstm"):
            super().test_model_weights_reload_no_missing_tied_weights()
