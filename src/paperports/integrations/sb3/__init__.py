"""Stable-Baselines3 plugins (``pip install "paperports[sb3]"``): observational dropout.

- :class:`ObservationalDropoutPolicy`: a recurrent policy for sb3-contrib's ``RecurrentPPO``
  whose memory is a world model's belief of the observation (Freeman, Metz, Ha 2019);
- :class:`MlpWorldModel`, :class:`CartPoleWorldModel`: world models M;
- :class:`WorldModelEnv`: the "dream", an environment whose dynamics are a world model;
- :func:`train_with_es`: the evolution-strategy route (the paper's PGPE from evotorch, or
  CMA-ES from ``cma``; :func:`train_with_cma` is the latter), evaluating each generation side
  by side with :func:`population_returns`, in this process or on Ray workers.

Importing this module also registers the cart-pole swing-up environments
(``paperports/CartPoleSwingUp-v0``, ``paperports/CartPoleSwingUpHarder-v0``).
"""

from paperports._imports import require

require("sb3", "stable_baselines3", "sb3_contrib", "gymnasium")

import paperports.adapters  # noqa: E402, F401  (registers the cart-pole swing-up envs)
from paperports.adapters.observational_dropout import ObservationalDropoutWrapper  # noqa: E402
from paperports.integrations.sb3.dream import (  # noqa: E402
    WorldModelEnv,
    cartpole_reward,
    cartpole_terminated,
)
from paperports.integrations.sb3.evolution import (  # noqa: E402
    EvolutionResult,
    population_returns,
    train_with_cma,
    train_with_es,
)
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
    "EvolutionResult",
    "MlpWorldModel",
    "ObservationalDropoutPolicy",
    "ObservationalDropoutWrapper",
    "WorldModel",
    "WorldModelCore",
    "WorldModelEnv",
    "cartpole_reward",
    "cartpole_terminated",
    "population_returns",
    "train_with_cma",
    "train_with_es",
]
