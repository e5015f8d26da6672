"""foolbox 3 plugins (``pip install "paperports[foolbox]"``).

* :class:`SaliencyMapAttack` (alias :data:`JSMA`): Papernot et al. (2016), the
  Jacobian-based saliency map attack, as an L0 minimisation attack.
* :func:`adversarial_distance` and :func:`hardness_matrix`: the paper's measures of how hard
  a sample or a source/target class pair is to attack.
* :mod:`~paperports.integrations.foolbox.saliency`: the forward derivative, the saliency
  map and the exact pair search on their own.
"""

from paperports._imports import require

require("foolbox", "foolbox", "eagerpy")

from paperports.integrations.foolbox.hardness import (  # noqa: E402
    adversarial_distance,
    adversarial_distance_matrix,
    hardness_matrix,
)
from paperports.integrations.foolbox.saliency import forward_derivative, saliency_map  # noqa: E402
from paperports.integrations.foolbox.saliency_map_attack import (  # noqa: E402
    JSMA,
    SaliencyMapAttack,
)

__all__ = [
    "JSMA",
    "SaliencyMapAttack",
    "adversarial_distance",
    "adversarial_distance_matrix",
    "forward_derivative",
    "hardness_matrix",
    "saliency_map",
]
