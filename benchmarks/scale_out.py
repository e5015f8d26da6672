"""Throughput on one process and on two (gloo, CPU): `Trainer` for our BERT and the BN-LSTM
family (with `SyncRecurrentBatchNorm`), `examples/trainer_ddp.py`; GG-NN under
`DistributedDataParallel` on graph batches and on `NeighborLoader` subgraphs,
`examples/pyg_ddp.py`; each run both ways.

    python benchmarks/scale_out.py

Writes benchmarks/results/scale_out.json. Each configuration runs once, after one warm-up
run of the same configuration; the figure is `Trainer`'s `train_samples_per_second`, and
for GG-NN the graphs (or seed nodes) per second, loading and sampling included. Two
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
STEPS, BATCH = 30, 32
PYG_STEPS = 200  # a GG-NN step takes milliseconds: more of them for a steadier figure
# name -> the script, its arguments, the steps, the metric
CONFIGURATIONS = {
    "bert": ("trainer_ddp.py", ["--model", "bert"], STEPS, "train_samples_per_second"),
    "bn_lstm": ("trainer_ddp.py", ["--model", "bn_lstm"], STEPS, "train_samples_per_second"),
    "ggnn_graphs": ("pyg_ddp.py", ["--mode", "graphs"], PYG_STEPS, "examples_per_second"),
    "ggnn_neighbors": ("pyg_ddp.py", ["--mode", "neighbors"], PYG_STEPS, "examples_per_second"),
}


def run(model: str, processes: int, out: Path) -> dict[str, float]:
    """One training run; its metrics."""
    script, arguments, steps, _ = CONFIGURATIONS[model]
    threads = max(1, (os.cpu_count() or 1) // processes)  # the cores, shared out
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
        launcher += [str(processes)]
    command = [*launcher, str(ROOT / "examples" / script), *arguments, "--out", str(out)]
    command += ["--steps", str(steps), "--batch", str(BATCH)]
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads((out / "metrics.json").read_text()))


def pyg_graph() -> dict[str, object]:
    """The graph that `examples/pyg_ddp.py --mode neighbors` samples."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import pyg_ddp
    finally:
        sys.path.pop(0)
    return {
        "num_nodes": pyg_ddp.NUM_NODES,
        "num_edges": pyg_ddp.NUM_EDGES,
        "edge_types": pyg_ddp.NUM_TYPES,
        "neighbors_per_hop": pyg_ddp.NEIGHBORS,
    }


def main() -> Path:
    rows: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, (_, _, steps, metric) in CONFIGURATIONS.items():
            for processes in (1, 2):
                run(model, processes, Path(tmp) / "warm-up")
                metrics = run(model, processes, Path(tmp) / f"{model}-{processes}")
                rows.append(
                    {
                        "model": model,
                        "processes": processes,
                        "samples_per_second": float(metrics[metric]),
                        "seconds": float(metrics["train_runtime"]),
                        "steps": steps,
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
        "pyg_graph": pyg_graph(),
    }
    path = ROOT / "benchmarks" / "results" / "scale_out.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {path}")
    return path


if __name__ == "__main__":
    main()
