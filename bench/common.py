"""Shared measurement helpers: numpy baselines timed like our kernels, and thread control."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import time
from collections.abc import Callable

from compiler.runtime import load_runtime


def best_seconds(fn: Callable[[], object], repeat: int = 7, min_repeat_s: float = 0.05) -> float:
    """The fastest of `repeat` batches, each as many calls as fill min_repeat_s (per call)."""
    fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= min_repeat_s:
            break
        number *= 2
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def set_kernel_threads(n: int) -> None:
    """Threads used by our parallel loops (libgomp's team size)."""
    load_runtime()
    ctypes.CDLL(ctypes.util.find_library("gomp")).omp_set_num_threads(n)


def random_matmul_traces(spec: dict, count: int, seed: int = 0) -> list[dict]:
    """`count` distinct traces of a stochastic matmul schedule (SSRSRS-like tiling with sampled
    tiles, a sampled unroll budget, vectorized inner tile, parallel outer tile): realistic candidates
    for the build and runner benchmarks."""
    from compiler import Schedule
    from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
    from compiler.workloads import workload_from_spec

    func = workload_from_spec(spec).func
    traces: dict[str, dict] = {}
    attempt = 0
    while len(traces) < count:
        sch = Schedule(func, seed=seed + attempt)
        attempt += 1
        block = sch.get_child_blocks(sch.get_block("root"))[0]
        i, j, k = sch.get_loops(block)
        i0, i1, i2 = sch.split(i, sch.sample_perfect_tile(i, n=3, max_innermost_factor=16))
        j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=64))
        k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=64))
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        sch.decompose_reduction(block, k0)
        sch.vectorize(j2)
        sch.parallel(sch.fuse(i0, j0))
        budget = sch.sample_categorical([0, 16, 64], [0.4, 0.3, 0.3])
        sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, budget)
        data = sch.trace.to_json()
        traces.setdefault(json.dumps(data, sort_keys=True), data)
    return list(traces.values())
