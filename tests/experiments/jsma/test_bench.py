"""The JSMA bench's memory measurement of the pair search (issue 29, item 4): its worst
case scores every pair, and its peak memory follows ``chunk_size``."""

from __future__ import annotations

import importlib

import torch

from paperports.benchmarking import peak_memory_mb

bench = importlib.import_module("paperports.experiments.jsma.bench")


def test_the_whole_front_case_finds_the_dense_searchs_pair() -> None:
    """Every feature is on the front (v = 1 - u): the best pair is the dense argmax of
    (u_p + u_q)(v_p + v_q) over p < q, which the bound search must reach by scoring all."""
    n = 64
    p, q, found = bench._whole_front_search(1 << 10, n)()
    u = torch.arange(n, dtype=torch.float32) / n
    score = (u[:, None] + u[None]) * ((1 - u)[:, None] + (1 - u)[None])
    score = torch.where(torch.ones(n, n, dtype=torch.bool).triu(1), score, -torch.inf)
    best = int(score.flatten().argmax())
    assert bool(found.raw.all())
    assert (int(p.raw[0]), int(q.raw[0])) == (best // n, best % n)


def test_the_pair_searchs_peak_memory_grows_with_chunk_size() -> None:
    small = peak_memory_mb(bench._whole_front_search, 1 << 14, 2048)
    large = peak_memory_mb(bench._whole_front_search, 1 << 21, 2048)
    assert large > small + 20  # 2^21 entries of scores, masks and keys: tens of MB
    assert small < 10
