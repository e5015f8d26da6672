"""foolbox 3 plugins (``pip install "paperports[foolbox]"``)."""

from paperports._imports import require

require("foolbox", "foolbox", "eagerpy")

__all__: list[str] = []
