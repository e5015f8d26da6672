"""Benchmark of the foolbox integration: `paperports bench jsma`.

    python benchmarks/foolbox_jsma.py      # same as `paperports bench jsma`

Writes benchmarks/results/jsma.json (the figures quoted in the docs were measured so).
"""

from __future__ import annotations

import sys

from paperports.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "jsma", *sys.argv[1:]]))
