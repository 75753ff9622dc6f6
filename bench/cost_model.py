"""How well the cost model ranks: a few hundred random candidates of matmul 512^3 and of conv2d,
measured once into a database that later runs reuse, then scored by `evaluate_model` (repeated
random held-out splits, top-1/top-5 next to the exact expectation of a random ranking)."""

from __future__ import annotations

import os
import tempfile

from compiler.workloads import workload_from_spec
from tuner.database import Database
from tuner.hardware import host_hardware
from tuner.training_data import evaluate_model, groups_from_records, hardware_records
from tuner.tune import tune

SPECS = {
    "matmul 512^3": {"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}},
    "conv2d 1x64x56x56 k64 3x3": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1},
    },
}
DEFAULT_DATABASE = f"sqlite:///{os.path.join(tempfile.gettempdir(), 'tensor-tuner-bench-cost-model.db')}"


def collect(database: str, count: int) -> None:
    """Measure random candidates of each workload until it has `count` records on this machine."""
    hardware = host_hardware().key
    for spec in SPECS.values():
        key = workload_from_spec(spec).func.structural_hash()
        with Database.open(database) as db:
            have = len([r for r in hardware_records(db, hardware) if r.workload_hash == key])
        if have < count:
            tune(spec, trials=count - have, database=database, strategy="random", seed=have)


def main(database: str = DEFAULT_DATABASE, count: int = 320, splits: int = 10) -> None:
    collect(database, count)
    with Database.open(database) as db:
        groups = groups_from_records(hardware_records(db, host_hardware().key))
    scores = evaluate_model(groups, holdout=0.25, splits=splits)
    names = {workload_from_spec(s).func.structural_hash(): name for name, s in SPECS.items()}
    print(f"cost model, {splits} random splits, 25% of each workload's candidates held out ({database}):")
    rows = [(names.get(key, key[:12]), s) for key, s in scores["per_workload"].items()]
    for name, s in [*rows, ("all (mean over workloads)", scores)]:
        print(
            f"  {name}: top-1 {s['top1']:.2f} +- {s['top1_std']:.2f} (random ranking "
            f"{s['random_top1']:.2f}), top-5 {s['top5']:.2f} +- {s['top5_std']:.2f} (random "
            f"{s['random_top5']:.2f})" + (f"; {s['candidates']} candidates" if "workloads" not in s else "")
        )
