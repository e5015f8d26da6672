"""BN-LSTM as a drop-in for nn.LSTM: digits read row by row, then population statistics.

python examples/torch_bnlstm.py --epochs 3
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from paperports.adapters.digits import load_digits_tensors
from paperports.integrations.torch import BNLSTM, update_bn


def main(epochs: int = 3) -> float:
    torch.manual_seed(0)
    x, y = load_digits_tensors(8, "train")
    rows = x[:, 0]  # (N, 8 rows = time steps, 8 pixels)
    lstm, head = BNLSTM(8, 32, batch_first=True), nn.Linear(32, 10)  # as nn.LSTM(8, 32, ...)
    opt = torch.optim.Adam([*lstm.parameters(), *head.parameters()], lr=1e-2)
    for _ in range(epochs):
        for i in range(0, len(rows), 64):
            _, (h, _) = lstm(rows[i : i + 64])
            loss = F.cross_entropy(head(h[-1]), y[i : i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()

    update_bn([rows], lstm)  # exact population statistics for evaluation
    lstm.eval()
    xt, yt = load_digits_tensors(8, "test")
    with torch.no_grad():
        _, (h, _) = lstm(xt[:, 0])
        accuracy = float((head(h[-1]).argmax(-1) == yt).float().mean())
    print(f"test accuracy {accuracy:.1%}")
    return accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    main(parser.parse_args().epochs)
