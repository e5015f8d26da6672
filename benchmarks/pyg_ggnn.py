"""Benchmark of the PyG GG-NN integration: `paperports bench ggnn`.

    python benchmarks/pyg_ggnn.py           # same as `paperports bench ggnn`

Writes benchmarks/results/ggnn.json (the figures quoted in the docs were measured so).
"""

from __future__ import annotations

import sys

from paperports.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "ggnn", *sys.argv[1:]]))
