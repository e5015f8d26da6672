"""Glue between the plugins and data or other tools.

Each adapter module imports what it needs on its own, so importing one never pulls in an
ecosystem the user did not ask for. The one exception: when gymnasium is installed,
importing this package imports it to register the cart-pole swing-up environments.
"""

import importlib.util as _util

# The gymnasium environments register on import of paperports.adapters when gymnasium is
# installed, so that gymnasium.make("paperports/CartPoleSwingUpHarder-v0") works.
if _util.find_spec("gymnasium") is not None:
    from paperports.adapters.cartpole_swingup import register_envs as _register_envs

    _register_envs()
