from __future__ import annotations

import os

# Offline, always: nothing in the tests may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

# What the tests and the docs' printed claims check (a trained model's accuracy, an attack's
# success on it) depends on torch's thread count: a model trained on one thread is not the
# one trained on eight. Every test session runs on the two threads of CI, on any machine.
TEST_THREADS = 2
torch.set_num_threads(TEST_THREADS)


@pytest.fixture(scope="session", autouse=True)
def _paperports_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Train the embedded default models into a per-session cache, not the user's."""
    os.environ["PAPERPORTS_CACHE"] = str(tmp_path_factory.mktemp("paperports-cache"))
