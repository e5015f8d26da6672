"""Benchmark of the torch integration: `paperports bench bnlstm` (BNLSTM against nn.LSTM).

    python benchmarks/torch_bnlstm.py

Writes benchmarks/results/bnlstm.json.
"""

from __future__ import annotations

import sys

from paperports.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "bnlstm", *sys.argv[1:]]))
