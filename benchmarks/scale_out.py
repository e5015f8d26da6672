"""Throughput of `Trainer` on one process and on two (gloo, CPU), for our BERT and the
BN-LSTM family (with `SyncRecurrentBatchNorm`): `examples/trainer_ddp.py` run both ways.

    python benchmarks/scale_out.py

Writes benchmarks/results/scale_out.json. Each configuration runs once, after one warm-up
run of the same configuration; the figure is `Trainer`'s `train_samples_per_second`. Two
processes on a 2-core machine share the cores that one process would use alone, so this
shows what the communication costs, not a speed-up a machine with more cores would give.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from paperports.benchmarking import machine_info
from paperports.reporting import provenance

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "trainer_ddp.py"
STEPS, BATCH = 30, 32


def run(model: str, processes: int, out: Path) -> dict[str, float]:
    """One training run; `Trainer`'s metrics."""
    threads = max(1, (os.cpu_count() or 1) // processes)  # the cores, shared out
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
        launcher += [str(processes)]
    command = [*launcher, str(SCRIPT), "--model", model, "--out", str(out)]
    command += ["--steps", str(STEPS), "--batch", str(BATCH)]
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads((out / "metrics.json").read_text()))


def main() -> Path:
    rows: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("bert", "bn_lstm"):
            for processes in (1, 2):
                run(model, processes, Path(tmp) / "warm-up")
                metrics = run(model, processes, Path(tmp) / f"{model}-{processes}")
                rows.append(
                    {
                        "model": model,
                        "processes": processes,
                        "samples_per_second": float(metrics["train_samples_per_second"]),
                        "seconds": float(metrics["train_runtime"]),
                    }
                )
                print(rows[-1])
    throughput: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        one = next(r for r in rows if r["model"] == row["model"] and r["processes"] == 1)
        row["throughput_vs_one_process"] = row["samples_per_second"] / one["samples_per_second"]
        throughput.setdefault(str(row["model"]), {})[str(row["processes"])] = row
    result = {
        "provenance": provenance("python benchmarks/scale_out.py"),
        "machine": machine_info(),
        "steps": STEPS,
        "global_batch": BATCH,
        "throughput": throughput,  # model -> processes -> the row
    }
    path = ROOT / "benchmarks" / "results" / "scale_out.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {path}")
    return path


if __name__ == "__main__":
    main()
