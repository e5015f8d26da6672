"""``paperports reproduce jsma`` and ``paperports bench jsma``."""

from paperports.experiments.jsma.bench import bench
from paperports.experiments.jsma.reproduce import reproduce

__all__ = ["bench", "reproduce"]
