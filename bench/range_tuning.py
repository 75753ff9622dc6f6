"""One kernel tuned for a range against tuning each length alone (issue 40): a (n, 768) x (768, 768)
matmul with n symbolic (1..512), tuned once at four lengths spread over the range under one budget
(`tuner.tune_range`: one task set, one cost model, one kernel with a schedule per bucket of lengths),
against the static kernel tuned alone at each measured length with a quarter of that budget (as
one would tune each length without a range), and against the untuned kernels (the default buckets,
and the static default schedule per length). Tuning time is the wall time of each; the latencies
are alternated round by round in one process on all cores, 0.3 s pauses between kernels.

    python -m bench.range_tuning [--trials 256]
"""

from __future__ import annotations

import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # an honest baseline (bench/__main__.py)

import argparse
import tempfile
import time
from functools import partial

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import build, te
from compiler.buckets import default_buckets
from compiler.ir import PrimFunc
from compiler.schedule_rules.default import default_schedule
from compiler.target import host_hardware
from tuner import compile_best, tune, tune_range

LENGTHS = (1, 7, 64, 128, 333, 512)
WIDTH = 768


def matmul(n: int | te.Var) -> PrimFunc:
    x, w = te.placeholder((n, WIDTH), name="X"), te.placeholder((WIDTH, WIDTH), name="W")
    k = te.reduce_axis((0, WIDTH), name="k")
    y = te.compute((n, WIDTH), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="Y")
    return te.create_prim_func([x, w, y], name="matmul")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=256, help="the range's budget; each length gets 1/4")
    args = parser.parse_args(argv)
    hardware = host_hardware()
    target = hardware.target
    set_kernel_threads(target.cores)
    print(
        f"{hardware.cpu_model}, {target.cores} cores, LLVM {target.mcpu}; {args.trials} trials for the range"
    )
    func = matmul(te.var("n", range=(1, 512)))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        ranged = tune_range(func, trials=args.trials, database=f"sqlite:///{tmp}/range.db", hardware=hardware)
        range_secs = time.perf_counter() - start
        assert ranged.scheduled is not None
        split = ", ".join(f"{s}: {r.trials}" for s, r in zip(ranged.sizes, ranged.scheduled.results))
        print(f"range tuned at n = {ranged.sizes} (trials {split}) in {range_secs:.0f} s")
        alone, alone_secs = {}, 0.0
        for n in LENGTHS:
            start = time.perf_counter()
            db = f"sqlite:///{tmp}/alone.db"
            tune(matmul(n), trials=args.trials // 4, database=db, hardware=hardware)
            alone[n] = compile_best(matmul(n), database=db, hardware=hardware)
            alone_secs += time.perf_counter() - start
        print(f"{len(LENGTHS)} lengths tuned alone, {args.trials // 4} trials each, in {alone_secs:.0f} s")
    untuned = build(default_buckets(func, target), target)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((WIDTH, WIDTH)).astype("float32")
    for n in LENGTHS:
        x = rng.standard_normal((n, WIDTH)).astype("float32")
        static = build(default_schedule(matmul(n), target).func, target)
        kernels = {
            "range tuned": ranged.kernel,
            "tuned alone": alone[n],
            "buckets": untuned,
            "static": static,
        }
        outs = {}
        for label, kernel in kernels.items():
            outs[label] = np.empty((n, WIDTH), "float32")
            kernel(x, w, outs[label])
            np.testing.assert_allclose(outs[label], x @ w, rtol=1e-3, atol=1e-3, err_msg=label)
        times: dict[str, list[float]] = {label: [] for label in kernels}
        for _ in range(3):
            for label, kernel in kernels.items():
                times[label].append(best_seconds(partial(kernel, x, w, outs[label]), repeat=5))
                time.sleep(0.3)
        best = {label: min(t) * 1e6 for label, t in times.items()}
        ref = best["tuned alone"]
        cells = ", ".join(f"{label} {us:.1f} us ({ref / us:.2f}x)" for label, us in best.items())
        print(f"  n={n:3d}: {cells}  (x: speed relative to tuned alone)")


if __name__ == "__main__":
    main()
