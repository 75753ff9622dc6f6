"""The tuner end to end, on fresh databases: matmul 512^3 for 64 trials with the cost model
(evolutionary) and without it (random), against numpy measured in this process (OpenBLAS at its
best, see bench/__main__.py); wall time, search overhead, trials to reach 90% of the final best; and a
warm start: a new workload (matmul 384^3) tuned from an empty database and from one holding the 512^3
records. The cost model's ranking quality needs far more held-out candidates than these runs make:
see bench/cost_model.py."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from bench.common import best_seconds
from compiler.workloads import workload_from_spec
from tuner.tune import TuneResult, tune

SPEC = {"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}
NEW_SPEC = {"op": "matmul", "params": {"M": 384, "N": 384, "K": 384}}


def trials_to_90(result: TuneResult) -> int:
    final = result.curve[-1]
    return next(i + 1 for i, g in enumerate(result.curve) if g >= 0.9 * final)


def numpy_gflops(spec: dict) -> float:
    workload = workload_from_spec(spec)
    a, b = workload.random_inputs(np.random.default_rng(0))
    c = np.empty((a.shape[0], b.shape[1]), np.float32)
    return workload.flops / best_seconds(lambda: np.matmul(a, b, out=c), repeat=15) / 1e9


def report(name: str, r: TuneResult, numpy_rate: float) -> None:
    ratio = r.best_gflops / numpy_rate
    print(
        f"tune {name}, {r.trials} trials: best {r.best_gflops:.0f} GFLOPS = {ratio:.2f}x "
        f"numpy ({numpy_rate:.0f}); wall {r.wall_secs:.0f} s, search overhead "
        f"{r.search_secs / r.wall_secs:.0%}; 90% of its final best after {trials_to_90(r)} trials"
    )


def main(trials: int = 64) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = {s: Path(tmp) / f"{s}.db" for s in ("evolutionary", "random", "cold", "warm")}
        url = {s: f"sqlite:///{path}" for s, path in db.items()}
        results = {
            s: tune(SPEC, trials=trials, database=url[s], strategy=s) for s in ("evolutionary", "random")
        }
        shutil.copy(db["evolutionary"], db["warm"])
        cold = tune(NEW_SPEC, trials=trials // 2, database=url["cold"])
        warm = tune(NEW_SPEC, trials=trials // 2, database=url["warm"])
    rate, new_rate = numpy_gflops(SPEC), numpy_gflops(NEW_SPEC)
    for strategy, r in results.items():
        report(f"matmul 512^3, {strategy}", r, rate)
    report("matmul 384^3, evolutionary, cold model", cold, new_rate)
    report("matmul 384^3, evolutionary, model warm-started from the 512^3 records", warm, new_rate)
