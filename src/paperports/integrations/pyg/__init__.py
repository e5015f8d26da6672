"""PyTorch Geometric plugins (``pip install "paperports[pyg]"``)."""

from paperports._imports import require

require("pyg", "torch_geometric")

__all__: list[str] = []
