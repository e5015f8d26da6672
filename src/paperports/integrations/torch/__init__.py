"""Plain ``torch.nn`` modules; they need nothing beyond torch."""

__all__: list[str] = []
