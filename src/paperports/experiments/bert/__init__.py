"""``paperports reproduce bert`` and ``paperports bench bert``."""

from paperports.experiments.bert.bench import bench
from paperports.experiments.bert.reproduce import reproduce

__all__ = ["bench", "reproduce"]
