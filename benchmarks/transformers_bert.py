"""Benchmark of the transformers BERT integration: `paperports bench bert`.

    python benchmarks/transformers_bert.py   # same as `paperports bench bert`

Writes benchmarks/results/bert.json (the figures quoted in the docs were measured so).
"""

from __future__ import annotations

import sys

from paperports.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "bert", *sys.argv[1:]]))
