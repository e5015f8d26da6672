"""Our transformers models trained by `Trainer` under `torchrun --nproc_per_node 2` (gloo,
CPU) end where one process with the same global batch ends: `examples/trainer_ddp.py`, run
both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "trainer_ddp.py"


def _train(processes: int, model: str, out: Path, *extra: str) -> tuple[list[float], dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["TRANSFORMERS_OFFLINE"] = "1"
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
        launcher += [str(processes)]
    command = [*launcher, str(SCRIPT), "--model", model, "--out", str(out), *extra]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    losses = json.loads((out / "losses.json").read_text())
    return losses, torch.load(out / "weights.pt")


@pytest.mark.parametrize("model", ["bert", "bn_lstm"])
def test_two_processes_train_as_one_with_the_same_global_batch(model: str, tmp_path: Path) -> None:
    """For BERT, DDP alone; for the BN-LSTM family, with `SyncRecurrentBatchNorm`. Trainer
    once multiplied our losses by the number of processes (it took our `**kwargs` for
    `num_items_in_batch`), so the weights drifted apart."""
    one_losses, one = _train(1, model, tmp_path / "one")
    two_losses, two = _train(2, model, tmp_path / "two")
    assert one_losses == pytest.approx(two_losses, abs=2e-4)  # logged to 4 digits
    assert one.keys() == two.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-4, atol=1e-5, msg=name)
    if model == "bn_lstm":  # without synchronisation each process has its own statistics
        local_losses, local = _train(2, model, tmp_path / "local", "--local-statistics")
        assert local_losses != pytest.approx(one_losses, abs=2e-4)
        assert not torch.allclose(
            local["bn_lstm.encoder.bn_c_l0.running_mean"],
            one["bn_lstm.encoder.bn_c_l0.running_mean"],
        )
