"""paperports: five classic deep-learning papers as native plugins of their ecosystems.

Importing :mod:`paperports` needs only torch and numpy. Each plugin lives in
``paperports.integrations.<ecosystem>`` and needs that ecosystem's extra, for example
``pip install "paperports[foolbox]"``; the glue to data and other tools lives in
:mod:`paperports.adapters`.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
