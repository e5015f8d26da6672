"""``paperports reproduce bnlstm`` and ``paperports bench bnlstm``."""

from paperports.experiments.bnlstm.bench import bench
from paperports.experiments.bnlstm.reproduce import reproduce

__all__ = ["bench", "reproduce"]
