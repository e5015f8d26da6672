"""SyncRecurrentBatchNorm: two processes (gloo, CPU), each with half the batch, train a
BN-LSTM as one process with the whole batch does; without synchronisation they do not."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from paperports.integrations.torch import (
    BNLSTM,
    BNLSTMCell,
    RecurrentBatchNorm,
    SyncRecurrentBatchNorm,
    update_bn,
)

from .._distributed import gloo_group, spawn

STEPS, BATCH, LENGTHS = 5, 8, [5, 2, 4, 5, 3, 5, 1, 4]


def _model() -> BNLSTM:
    torch.manual_seed(0)
    model = BNLSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, t_max=6).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, STEPS, 3, generator=generator, dtype=torch.float64)
    return x, torch.tensor(LENGTHS)


def _step(model: torch.nn.Module, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out, (h, _) = model(x, lengths=lengths)
    loss = out.pow(2).sum() + h.sum()
    loss.backward()
    return out  # type: ignore[no-any-return]


def _worker(rank: int, port: int, sync: bool, out_dir: str) -> None:
    with gloo_group(rank, port, world_size=2):
        model = _model()
        if sync:
            model = SyncRecurrentBatchNorm.convert_sync_batchnorm(model)  # type: ignore[assignment]
        x, lengths = _data()
        half = slice(rank * BATCH // 2, (rank + 1) * BATCH // 2)
        out = _step(model, x[half], lengths[half])
        grads = [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]
        for g in grads:
            dist.all_reduce(g)  # the gradient of the sum of both processes' losses
        torch.save(
            {
                "out": out.detach(),
                "grads": grads,
                "buffers": [b.clone() for b in model.buffers()],
            },
            Path(out_dir) / f"rank{rank}.pt",
        )


def _update_bn_worker(rank: int, port: int, sync: bool, out_dir: str) -> None:
    """Each process recomputes the statistics over its own two batches of four."""
    with gloo_group(rank, port, world_size=2):
        model = _model()
        if sync:
            model = SyncRecurrentBatchNorm.convert_sync_batchnorm(model)  # type: ignore[assignment]
        update_bn(_batches()[2 * rank : 2 * rank + 2], model)
        torch.save(
            {"buffers": [b.clone() for b in model.buffers()]}, Path(out_dir) / f"rank{rank}.pt"
        )


def _batches() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    return [
        torch.randn(4, STEPS, 3, generator=generator, dtype=torch.float64) + k for k in range(4)
    ]


def _two_processes(
    sync: bool, tmp_path: Path, worker: object = _worker
) -> list[dict[str, list[torch.Tensor]]]:
    tmp_path.mkdir()
    spawn(worker, sync, str(tmp_path))  # type: ignore[arg-type]
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]


def _same_statistics(got: list[torch.Tensor], model: torch.nn.Module) -> None:
    """A process's buffers against one process's ``model``: equal over the steps ``model``
    holds; in a process group every process holds all ``t_max`` steps (so that DDP's buffer
    broadcast meets one size everywhere), and the steps past the trained ones are the
    untracked start (mean 0, variance 1, no batch)."""
    names = [name for name, _ in model.named_buffers()]
    for name, a, b in zip(names, got, model.buffers(), strict=True):
        if a.dim() > 0 and a.shape[0] != b.shape[0]:
            assert a.shape[0] == model.bn_c_l0.t_max > b.shape[0], name  # type: ignore[operator]
            untracked = {"running_mean": 0.0, "running_var": 1.0, "batches_tracked": 0}
            assert bool((a[b.shape[0] :] == untracked[name.rpartition(".")[2]]).all()), name
            a = a[: b.shape[0]]
        torch.testing.assert_close(a, b, msg=name)


def test_two_synchronised_processes_train_as_one_with_the_whole_batch(tmp_path: Path) -> None:
    model = _model()
    x, lengths = _data()
    out = _step(model, x, lengths)
    ranks = _two_processes(True, tmp_path / "sync")
    torch.testing.assert_close(torch.cat([r["out"] for r in ranks]), out.detach())  # type: ignore[misc]
    for got, p in zip(ranks[0]["grads"], model.parameters(), strict=True):
        torch.testing.assert_close(got, p.grad)
    for rank in ranks:  # the same running statistics on every process, the whole batch's
        _same_statistics(rank["buffers"], model)
    # without synchronisation, each process normalises with its own half: what
    # nn.BatchNorm users know from DDP without SyncBatchNorm
    local = _two_processes(False, tmp_path / "local")
    assert not torch.allclose(torch.cat([r["out"] for r in local]), out.detach())  # type: ignore[misc]
    assert not all(
        torch.allclose(a.double(), b.double())
        for a, b in zip(local[0]["buffers"], local[1]["buffers"], strict=True)
    )


def test_conversion_shares_parameters_and_statistics_and_is_exact_outside_a_group() -> None:
    """Outside a process group (or in a group of one) the converted model is the local
    one: the fast path, the same results."""
    model = _model()
    with torch.no_grad():
        model(torch.randn(4, STEPS, 3, dtype=torch.float64))
    local = copy.deepcopy(model)
    converted = SyncRecurrentBatchNorm.convert_sync_batchnorm(model)
    assert converted is model
    norms = [m for m in model.modules() if isinstance(m, RecurrentBatchNorm)]
    assert len(norms) == 12 and all(isinstance(m, SyncRecurrentBatchNorm) for m in norms)
    assert not any(m.synchronises() for m in norms)
    for (name, a), b in zip(model.state_dict().items(), local.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    x, lengths = _data()
    torch.testing.assert_close(_step(model, x, lengths), _step(local, x, lengths))
    for a, b in zip(model.parameters(), local.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)
    cell = SyncRecurrentBatchNorm.convert_sync_batchnorm(BNLSTMCell(3, 4))
    assert isinstance(cell.bn_c, SyncRecurrentBatchNorm)  # type: ignore[union-attr]
    handle = cell.bn_c._swa_update_bn  # type: ignore[union-attr]
    assert handle._owner is cell.bn_c  # its own handle, not the replaced norm's
    with pytest.raises(TypeError, match=r"must be a torch\.nn\.Module"):
        SyncRecurrentBatchNorm.convert_sync_batchnorm("model")  # type: ignore[arg-type]


def test_update_bn_on_two_processes_averages_over_all_their_batches(tmp_path: Path) -> None:
    """Local norms: each process's cumulative statistics, all-reduced, are those of one
    process over the four batches; synchronised norms (two half-batches make one batch
    of eight) agree on every process."""
    single = _model()
    update_bn(_batches(), single)
    for rank in _two_processes(False, tmp_path / "local", _update_bn_worker):
        _same_statistics(rank["buffers"], single)
    synced = _two_processes(True, tmp_path / "sync", _update_bn_worker)
    one_batch = _model()
    update_bn([torch.cat(_batches()[0::2]), torch.cat(_batches()[1::2])], one_batch)
    for rank in synced:
        _same_statistics(rank["buffers"], one_batch)


def _ragged_update_bn_worker(rank: int, port: int, sync: bool, out_dir: str) -> None:
    """Process 0 sees sequences of 3 steps, process 1 of 5: their statistics have grown to
    different sizes before they are summed."""
    with gloo_group(rank, port, world_size=2):
        model = _model()
        update_bn(_ragged_batches()[2 * rank : 2 * rank + 2], model)
        torch.save(
            {"buffers": [b.clone() for b in model.buffers()]}, Path(out_dir) / f"rank{rank}.pt"
        )


def _ragged_batches() -> list[torch.Tensor]:
    return [b[:, : 3 if k < 2 else 5] for k, b in enumerate(_batches())]


def test_update_bn_on_two_processes_that_saw_different_lengths(tmp_path: Path) -> None:
    single = _model()
    update_bn(_ragged_batches(), single)
    assert single.bn_c_l0.allocated_steps == 5
    for rank in _two_processes(False, tmp_path / "ragged", _ragged_update_bn_worker):
        _same_statistics(rank["buffers"], single)


def _group_of_one_worker(rank: int, port: int, sync: bool, out_dir: str) -> None:
    """One process in an initialised group: packed input, converted model, training."""
    with gloo_group(rank, port, world_size=1):
        model = SyncRecurrentBatchNorm.convert_sync_batchnorm(_model())
        assert not any(
            m.synchronises() for m in model.modules() if isinstance(m, RecurrentBatchNorm)
        )
        x, lengths = _data()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, _) = model(packed)
        (pad_packed_sequence(out, batch_first=True)[0].pow(2).sum() + h.sum()).backward()
        torch.save(
            {"grads": [p.grad for p in model.parameters()], "buffers": list(model.buffers())},
            Path(out_dir) / "rank0.pt",
        )


def test_a_group_of_one_is_no_group_packed_input_included(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    spawn(_group_of_one_worker, True, str(tmp_path), nprocs=1)
    got = torch.load(tmp_path / "rank0.pt")
    model = _model()
    x, lengths = _data()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h, _) = model(packed)
    (pad_packed_sequence(out, batch_first=True)[0].pow(2).sum() + h.sum()).backward()
    for a, p in zip(got["grads"], model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad)
    for a, b in zip(got["buffers"], model.buffers(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_process_group_that_is_not_one_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match="SyncRecurrentBatchNorm: process_group must be"):
        SyncRecurrentBatchNorm(4, 5, process_group="gloo")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="convert_sync_batchnorm: process_group must be"):
        SyncRecurrentBatchNorm.convert_sync_batchnorm(BNLSTM(3, 4), process_group=2)  # type: ignore[arg-type]
    model = _model()
    before = [b.clone() for b in model.buffers()]
    with pytest.raises(TypeError, match="update_bn: process_group must be"):
        update_bn([torch.randn(4, STEPS, 3, dtype=torch.float64)], model, process_group="x")  # type: ignore[arg-type]
    assert all(torch.equal(a, b) for a, b in zip(model.buffers(), before, strict=True))


def _mixed_worker(rank: int, port: int, cell: bool, out_dir: str) -> None:
    """Rank 0 synchronises its statistics, rank 1 does not: both refuse the first step."""
    with gloo_group(rank, port, world_size=2):
        model: torch.nn.Module = BNLSTMCell(3, 4, t_max=6).double() if cell else _model()
        if rank == 0:
            model = SyncRecurrentBatchNorm.convert_sync_batchnorm(model)
        before = [b.clone() for b in model.buffers()]
        x, lengths = _data()
        try:
            if cell:
                model(x[:4, 0])
            else:
                _step(model, x[:4], lengths[:4])
            message = ""
        except RuntimeError as err:
            message = str(err)
        unchanged = all(torch.equal(a, b) for a, b in zip(model.buffers(), before, strict=True))
        torch.save({"message": message, "unchanged": unchanged}, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.parametrize("cell", [False, True], ids=["bnlstm", "cell"])
def test_processes_that_mix_synchronised_and_local_norms_are_refused(
    cell: bool, tmp_path: Path
) -> None:
    # without the check, rank 0 would wait in its all-reduce until the group's timeout
    for got in _two_processes(cell, tmp_path / "ranks", _mixed_worker):
        assert "mix synchronised and local" in got["message"], got["message"]
        assert "1 of 2 processes hold SyncRecurrentBatchNorm" in got["message"]
        assert got["unchanged"]  # refused before any statistics moved
