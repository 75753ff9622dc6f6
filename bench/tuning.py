"""The tuner end to end: matmul 512^3 for 64 trials on a fresh database, against numpy measured in
this process (OpenBLAS at its best, see bench/__main__.py); wall time and search overhead; trials to
reach 90% of the final best with the cost model (evolutionary) and without it (random)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.common import best_seconds
from compiler.workloads import workload_from_spec
from tuner.tune import TuneResult, tune

SPEC = {"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}


def trials_to_90(result: TuneResult) -> int:
    final = result.curve[-1]
    return next(i + 1 for i, g in enumerate(result.curve) if g >= 0.9 * final)


def run(strategy: str, trials: int, database: str) -> TuneResult:
    return tune(SPEC, trials=trials, database=database, strategy=strategy, seed=0)


def main(trials: int = 64) -> None:
    workload = workload_from_spec(SPEC)
    a, b = workload.random_inputs(np.random.default_rng(0))
    c = np.empty((512, 512), np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        results = {s: run(s, trials, f"sqlite:///{Path(tmp) / s}.db") for s in ("evolutionary", "random")}
    numpy_rate = workload.flops / best_seconds(lambda: np.matmul(a, b, out=c), repeat=15) / 1e9
    for strategy, r in results.items():
        print(
            f"tune matmul 512^3, {strategy}, {r.trials} trials: best {r.best_gflops:.0f} GFLOPS = "
            f"{r.best_gflops / numpy_rate:.2f}x numpy ({numpy_rate:.0f}); wall {r.wall_secs:.0f} s, "
            f"search overhead {r.search_secs / r.wall_secs:.0%}; 90% of its final best after "
            f"{trials_to_90(r)} trials"
        )
