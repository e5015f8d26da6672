"""The plugins, one subpackage per ecosystem.

Each subpackage imports its ecosystem on import and raises an :class:`ImportError` naming
the extra to install when it is missing:

- ``paperports.integrations.pyg``: PyTorch Geometric, ``paperports[pyg]``
- ``paperports.integrations.sb3``: Stable-Baselines3 and sb3-contrib, ``paperports[sb3]``
- ``paperports.integrations.transformers``: HuggingFace transformers, ``paperports[transformers]``
- ``paperports.integrations.foolbox``: foolbox 3, ``paperports[foolbox]``
- ``paperports.integrations.torch``: plain ``torch.nn``, no extra
"""
