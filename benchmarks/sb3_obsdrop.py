"""Benchmark of the SB3 observational-dropout integration: `paperports bench obsdrop`.

    python benchmarks/sb3_obsdrop.py        # same as `paperports bench obsdrop`

Writes benchmarks/results/obsdrop.json (the figures quoted in the docs were measured so).
"""

from __future__ import annotations

import sys

from paperports.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "obsdrop", *sys.argv[1:]]))
