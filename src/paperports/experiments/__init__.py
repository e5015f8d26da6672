"""The experiments behind ``paperports reproduce`` and ``paperports bench``, one per method."""
