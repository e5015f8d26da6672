from __future__ import annotations

import os

# Offline, always: nothing in the tests may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest


@pytest.fixture(scope="session", autouse=True)
def _paperports_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Train the embedded default models into a per-session cache, not the user's."""
    os.environ["PAPERPORTS_CACHE"] = str(tmp_path_factory.mktemp("paperports-cache"))
