"""matmul float32 with a hand-written schedule (tiling, vectorize, unroll, parallel) against numpy's
OpenBLAS on the same two cores, and against the measured FMA peak; 1 vs 2 threads; fork/join cost."""

from __future__ import annotations

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from bench.peak import measure_peak
from compiler import Schedule, build, te
from compiler.ir import PrimFunc
from compiler.target import Target
from compiler.workloads import workload_from_spec
from runner.evaluate import evaluate


def hand_schedule(func: PrimFunc, ti: int = 8, tj: int = 32) -> PrimFunc:
    """Register blocking ti x tj (ti rows unrolled, tj columns vectorized): 16 zmm accumulators for
    8 x 32. Each parallel column stripe first packs its K x tj panel of B into a contiguous buffer
    (cache_read + compute_at; compaction shrinks it to the stripe), which then stays in cache while
    i sweeps all rows."""
    sch = Schedule(func)
    block = sch.get_child_blocks(sch.get_block("root"))[0]
    panel = sch.cache_read(block, 1)
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    sch.reorder(j0, i0, k, i1, j1)
    sch.compute_at(panel, j0)
    sch.vectorize(sch.get_loops(panel)[-1])
    sch.decompose_reduction(block, k)
    sch.vectorize(j1)
    sch.unroll(i1)
    sch.parallel(j0)
    return sch.func


def register_tile(target: Target) -> tuple[int, int]:
    """The hand schedule's accumulator tile for `target`: two vectors wide, 8 rows (16 of AVX-512's
    32 registers) or 4 (8 of AVX2's 16; 6 rows leave a tail on 1024). AVX-512's 8x32 on AVX2 is 32
    accumulators, which spill: 67 GFLOPS against 187 for 4x16 on a znver3 host
    (bench/results/2026-11-24-c.md)."""
    lanes = target.vector_lanes()
    return (8 if lanes >= 16 else 4), 2 * lanes


def trivial_kernel_seconds(parallel: bool) -> tuple[float, float]:
    """Per-call time of a kernel doing 2 additions (in one parallel region, or serially), timed by
    `evaluate` (native loop) and by calling it from Python: the timing floor and the fork/join cost."""
    X = te.placeholder((2,), name="X")
    Y = te.compute((2,), lambda i: X[i] + 1.0, name="Y")
    sch = Schedule(te.create_prim_func([X, Y]))
    if parallel:
        sch.parallel(sch.get_loops(sch.get_block("Y"))[0])
    kernel = build(sch.func, listings=False)
    x, y = np.ones(2, np.float32), np.zeros(2, np.float32)
    return min(evaluate(kernel, [x, y], repeat=7, min_repeat_ms=20)), best_seconds(lambda: kernel(x, y))


def main() -> None:
    peak1, peak_all, _ = measure_peak()
    print(f"FMA peak: {peak1:.0f} GFLOPS on 1 core, {peak_all:.0f} on all cores")
    target = Target.host()
    ti, tj = register_tile(target)
    print(f"register tile {ti}x{tj} for {target.mcpu}")
    for n in (512, 1024):
        workload = workload_from_spec({"op": "matmul", "params": {"M": n, "N": n, "K": n}})
        kernel = build(hand_schedule(workload.func, ti, tj), target, listings=False)
        a, b = workload.random_inputs(np.random.default_rng(0))
        c = np.empty((n, n), np.float32)
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-2)
        rates = {}
        for threads in (1, 2):
            set_kernel_threads(threads)
            rates[threads] = (
                workload.flops / min(evaluate(kernel, [a, b, c], repeat=7, min_repeat_ms=50)) / 1e9
            )
        numpy_rate = workload.flops / best_seconds(lambda a=a, b=b, c=c: np.matmul(a, b, out=c)) / 1e9
        print(
            f"matmul {n}^3: ours {rates[2]:.0f} GFLOPS (2 threads), numpy {numpy_rate:.0f} -> "
            f"{rates[2] / numpy_rate:.2f}x numpy, {rates[2] / peak_all:.0%} of peak; "
            f"1 thread {rates[1]:.0f} -> 2 threads {rates[2] / rates[1]:.2f}x"
        )
    serial, from_python = trivial_kernel_seconds(parallel=False)
    forked, _ = trivial_kernel_seconds(parallel=True)
    print(
        f"per-call floor of evaluate(): {serial * 1e9:.0f} ns (a Python call of the same kernel: "
        f"{from_python * 1e9:.0f} ns); parallel region fork/join: {(forked - serial) * 1e6:.2f} us"
    )
