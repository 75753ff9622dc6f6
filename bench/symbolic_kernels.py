"""One kernel for every length (issue 40) against a kernel compiled for each length: three
transformer-layer shapes with the sequence length `n` symbolic (1..512), each built once, timed at
n = 1, 3, 7, 25, 64, 128, 333 and 512 beside the static kernel that the default schedule gives for
that very n, alternated in one process on all cores.

The symbolic kernel is `compiler.buckets.default_buckets`: the static default schedule replayed over
the range, made at n = 1, 2, 4, 6, 8, 12, 16, 24 and 32 (a matmul's register tile fits each), the
kernel choosing by n at the call. An elementwise or row-wise kernel should meet the static one; a
matmul shows what a few schedules for every length cost against a schedule chosen for each.

    python -m bench symbolic_kernels
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import build, te
from compiler.buckets import default_buckets
from compiler.ir import PrimFunc
from compiler.schedule_rules.default import default_schedule
from compiler.target import Target, host_hardware

LENGTHS = (1, 3, 7, 25, 64, 128, 333, 512)  # 3 and 25: between two buckets' sizes
WIDTH = 768
Dim = int | te.Var


def bias_gelu(n: Dim) -> PrimFunc:
    x, b = te.placeholder((n, WIDTH), name="X"), te.placeholder((WIDTH,), name="bias")
    y = te.compute((n, WIDTH), lambda i, j: te.tanh(x[i, j] + b[j]) * 0.5 * (x[i, j] + b[j]), name="Y")
    return te.create_prim_func([x, b, y], name="bias_gelu")


def row_max(n: Dim) -> PrimFunc:
    x = te.placeholder((n, WIDTH), name="X")
    k = te.reduce_axis((0, WIDTH), name="k")
    y = te.compute((n,), lambda i: te.max(x[i, k], axis=k), name="Y")
    return te.create_prim_func([x, y], name="row_max")


def matmul(n: Dim) -> PrimFunc:
    x, w = te.placeholder((n, WIDTH), name="X"), te.placeholder((WIDTH, WIDTH), name="W")
    k = te.reduce_axis((0, WIDTH), name="k")
    y = te.compute((n, WIDTH), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="Y")
    return te.create_prim_func([x, w, y], name="matmul")


def arrays(func: PrimFunc, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    shapes = [tuple(d if isinstance(d, int) else n for d in b.shape) for b in func.params]
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def compare(name: str, define: Callable[[Dim], PrimFunc], target: Target) -> None:
    symbolic_func = define(te.var("n", range=(1, 512)))
    start = time.perf_counter()
    bucketed = default_buckets(symbolic_func, target)
    symbolic = build(bucketed, target)
    uptos = ", ".join(str(b.upto) for b in bucketed.buckets)
    print(
        f"{name}: one kernel for n in 1..512 built in {time.perf_counter() - start:.2f} s, "
        f"schedules for n up to {uptos}"
    )
    rng = np.random.default_rng(0)
    for n in LENGTHS:
        static = build(default_schedule(define(n), target).func, target)
        args = arrays(symbolic_func, n, rng)
        outs = [np.empty_like(args[-1]) for _ in range(2)]
        symbolic(*args[:-1], outs[0])
        static(*args[:-1], outs[1])
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)
        runs = {
            "symbolic": partial(symbolic, *args[:-1], outs[0]),
            "static": partial(static, *args[:-1], outs[1]),
        }
        times: dict[str, list[float]] = {label: [] for label in runs}
        for _ in range(3):  # alternated, with a pause between them
            for label, run in runs.items():
                times[label].append(best_seconds(run, repeat=5))
                time.sleep(0.3)
        sym, sta = min(times["symbolic"]), min(times["static"])
        print(
            f"  n={n:>3}: symbolic {sym * 1e6:9.1f} us, static {sta * 1e6:9.1f} us,"
            f" symbolic at {sta / sym:.2f}x the static kernel's speed"
        )


def main() -> None:
    hardware = host_hardware()
    target = hardware.target
    set_kernel_threads(target.cores)
    print(f"{hardware.cpu_model}, {target.cores} cores, LLVM {target.mcpu}")
    kernels = {
        "bias+tanh-gelu (n, 768)": bias_gelu,
        "row max (n, 768)": row_max,
        "matmul (n, 768) x (768, 768)": matmul,
    }
    for name, define in kernels.items():
        compare(name, define, target)


if __name__ == "__main__":
    main()
