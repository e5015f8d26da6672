"""Stable-Baselines3 plugins (``pip install "paperports[sb3]"``): observational dropout.

- :class:`ObservationalDropoutPolicy`: a recurrent policy for sb3-contrib's ``RecurrentPPO``
  whose memory is a world model's belief of the observation (Freeman, Metz, Ha 2019);
- :class:`MlpWorldModel`, :class:`CartPoleWorldModel`: world models M.

Importing this module also registers the cart-pole swing-up environments
(``paperports/CartPoleSwingUp-v0``, ``paperports/CartPoleSwingUpHarder-v0``).
"""

from paperports._imports import require

require("sb3", "stable_baselines3", "sb3_contrib", "gymnasium")

import paperports.adapters  # noqa: E402, F401  (registers the cart-pole swing-up envs)
from paperports.adapters.observational_dropout import ObservationalDropoutWrapper  # noqa: E402
from paperports.integrations.sb3.policies import (  # noqa: E402
    ObservationalDropoutPolicy,
    WorldModelCore,
)
from paperports.integrations.sb3.world_models import (  # noqa: E402
    CartPoleWorldModel,
    MlpWorldModel,
    WorldModel,
)

__all__ = [
    "CartPoleWorldModel",
    "MlpWorldModel",
    "ObservationalDropoutPolicy",
    "ObservationalDropoutWrapper",
    "WorldModel",
    "WorldModelCore",
]
