"""HuggingFace transformers plugins (``pip install "paperports[transformers]"``).

``accelerate`` is part of the extra because ``transformers.Trainer`` needs it.
"""

from paperports._imports import require

require("transformers", "transformers", "accelerate")

__all__: list[str] = []
