"""The paper's sequence baselines: an RNN or LSTM reading the story as symbols.

Each fact ``source relation target`` becomes three tokens, then a question marker and the
question's arguments follow; the final state predicts the answer (a node id or a class),
one head per output for sequence answers (told the answer's length: heads past it are not
read). These stand for the paper's RNN and LSTM baselines on the symbolic stories; its
figures for bAbI 19 with 950 training examples are RNN 24.7% and LSTM 28.2%.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from paperports.adapters.babi import TASKS, Story, generate_task

__all__ = ["SequenceBaseline", "baseline_accuracy", "encode_stories"]

_SPECIAL = 2  # 0: padding, 1: the question marker


def encode_stories(
    stories: list[Story], num_nodes: int, num_relations: int
) -> tuple[Tensor, Tensor]:
    """Token sequences ``(N, L)`` (left-padded with 0) and answers ``(N, K)`` (padded with
    ``-1`` past the end of shorter answers).

    Tokens: nodes ``2 .. 2 + num_nodes``, relations after them, 1 before the arguments.
    """
    sequences, answers = [], []
    for story in stories:
        question = story.questions[0]
        tokens = []
        for s, r, t in story.facts:
            tokens += [_SPECIAL + s, _SPECIAL + num_nodes + r, _SPECIAL + t]
        tokens.append(1)
        tokens += [_SPECIAL + a for a in question.args]
        sequences.append(tokens)
        answers.append(list(question.answer))
    length = max(map(len, sequences))
    padded = torch.zeros(len(sequences), length, dtype=torch.long)
    for i, tokens in enumerate(sequences):
        padded[i, length - len(tokens) :] = torch.tensor(tokens)
    steps = max(map(len, answers))
    return padded, torch.tensor([a + [-1] * (steps - len(a)) for a in answers], dtype=torch.long)


class SequenceBaseline(nn.Module):
    """Embedding, an ``nn.RNN`` or ``nn.LSTM``, one linear head per output step."""

    def __init__(self, kind: str, vocab: int, hidden: int, classes: int, steps: int) -> None:
        super().__init__()
        if kind not in ("RNN", "LSTM"):
            raise ValueError(f"kind must be 'RNN' or 'LSTM', got {kind!r}")
        self.embedding = nn.Embedding(vocab, hidden, padding_idx=0)
        self.rnn: nn.Module = (nn.LSTM if kind == "LSTM" else nn.RNN)(
            hidden, hidden, batch_first=True
        )
        self.heads = nn.ModuleList(nn.Linear(hidden, classes) for _ in range(steps))

    def forward(self, tokens: Tensor) -> Tensor:
        out, _ = self.rnn(self.embedding(tokens))
        last = out[:, -1]
        return torch.stack([head(last) for head in self.heads], dim=1)  # (N, K, classes)


def baseline_accuracy(
    task: str, kind: str, num_train: int, seed: int, updates: int, test_size: int = 500
) -> float:
    """Train the ``kind`` baseline on ``num_train`` generated stories; test accuracy."""
    spec = TASKS[task]
    train_stories = generate_task(task, num_train, seed)
    test_stories = generate_task(task, test_size, 10_000 + seed)
    all_stories = train_stories + test_stories
    num_nodes = 1 + max(max(max(s, t) for s, _, t in story.facts) for story in all_stories)
    classes = len(spec.classes) if spec.answer.startswith("class") else num_nodes
    x_train, y_train = encode_stories(train_stories, num_nodes, len(spec.edge_types))
    x_test, y_test = encode_stories(test_stories, num_nodes, len(spec.edge_types))
    steps = max(y_train.shape[1], y_test.shape[1])
    y_train, y_test = (nn.functional.pad(y, (0, steps - y.shape[1]), value=-1)
                       for y in (y_train, y_test))  # fmt: skip
    torch.manual_seed(seed)
    model = SequenceBaseline(
        kind, _SPECIAL + num_nodes + len(spec.edge_types), 32, max(classes, 2), steps
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(updates):
        batch = torch.randint(0, len(x_train), (32,), generator=generator)
        logits = model(x_train[batch])
        loss = nn.functional.cross_entropy(
            logits.flatten(0, 1), y_train[batch].flatten(), ignore_index=-1
        )
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    model.eval()
    with torch.no_grad():
        # one head per step: the answer's steps must be right (heads past it are not read)
        right = ((model(x_test).argmax(-1) == y_test) | (y_test < 0)).all(dim=1)
    return float(right.float().mean())
