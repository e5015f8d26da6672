"""One place that turns a missing optional ecosystem into an actionable error."""

from __future__ import annotations

import importlib

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ImportError):
    """An optional dependency of paperports is not installed.

    The message names the package that is missing and the exact extra that installs it.
    """


def require(extra: str, *modules: str, feature: str | None = None) -> None:
    """Import ``modules`` or raise :class:`MissingExtraError` naming ``paperports[extra]``.

    Args:
        extra: The paperports extra that installs the modules, e.g. ``"pyg"``.
        *modules: Importable module names, e.g. ``"torch_geometric"``.
        feature: What needs them, for the message (default: ``paperports.integrations.<extra>``).
    """
    what = feature or f"paperports.integrations.{extra}"
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise MissingExtraError(
                f"{what} needs the package '{module}', which could not be imported ({err}). "
                f'Install it with: pip install "paperports[{extra}]"'
            ) from err
