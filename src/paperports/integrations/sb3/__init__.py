"""Stable-Baselines3 plugins (``pip install "paperports[sb3]"``)."""

from paperports._imports import require

require("sb3", "stable_baselines3", "sb3_contrib", "gymnasium")

__all__: list[str] = []
