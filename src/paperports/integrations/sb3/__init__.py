"""Stable-Baselines3 plugins (``pip install "paperports[sb3]"``)."""

from paperports._imports import require

require("sb3", "stable_baselines3", "sb3_contrib", "gymnasium")

import paperports.adapters  # noqa: E402, F401  (registers the cart-pole swing-up envs)

__all__: list[str] = []
