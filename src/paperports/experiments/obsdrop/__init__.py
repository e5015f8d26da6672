"""``paperports reproduce obsdrop`` and ``paperports bench obsdrop``."""

from paperports.experiments.obsdrop.bench import bench
from paperports.experiments.obsdrop.reproduce import reproduce

__all__ = ["bench", "reproduce"]
