"""``paperports reproduce ggnn`` and ``paperports bench ggnn``."""

from paperports.experiments.ggnn.bench import bench
from paperports.experiments.ggnn.reproduce import reproduce

__all__ = ["bench", "reproduce"]
