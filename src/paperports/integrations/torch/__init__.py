"""Plain ``torch.nn`` modules; they need nothing beyond torch.

* :class:`BNLSTM` and :class:`BNLSTMCell`: Cooijmans et al. (2016), "Recurrent Batch
  Normalization", as a drop-in for ``torch.nn.LSTM``.
* :class:`RecurrentBatchNorm`: batch normalisation with statistics per time step, and
  :class:`SyncRecurrentBatchNorm`, its statistics shared across processes.
* :func:`update_bn`: recompute their population statistics after training.
* :func:`fused_kernels`: switch the BN-LSTM's fused CPU kernels off for a block of code.
"""

from paperports.integrations.torch.bn_lstm import BNLSTM, BNLSTMCell
from paperports.integrations.torch.bn_lstm_kernels import fused_kernels
from paperports.integrations.torch.recurrent_batch_norm import RecurrentBatchNorm
from paperports.integrations.torch.sync_recurrent_batch_norm import SyncRecurrentBatchNorm
from paperports.integrations.torch.update_bn import update_bn

__all__ = [
    "BNLSTM",
    "BNLSTMCell",
    "RecurrentBatchNorm",
    "SyncRecurrentBatchNorm",
    "fused_kernels",
    "update_bn",
]
