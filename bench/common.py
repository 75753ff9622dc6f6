"""Shared measurement helpers: numpy baselines timed like our kernels, and thread control."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from compiler.runtime import load_runtime

if TYPE_CHECKING:
    from compiler.graph import CompiledModel, Module
    from tuner.model_tuning import ModelTuneResult


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


def with_and_without(module: Module, graph_pass: Callable[[Module], Module]) -> dict[str, CompiledModel]:
    """The module optimized and built twice: "with" the graph pass and "without" it. (Until
    2026-12-04 "without" swapped `passes.PASSES`, which `optimize`'s default had already bound:
    both builds ran the pass.)"""
    from compiler import graph
    from compiler.graph import passes

    without = tuple(p for p in passes.PASSES if p is not graph_pass)
    if len(without) == len(passes.PASSES):
        raise ValueError(f"{graph_pass.__name__} is not one of the passes `optimize` runs")
    return {
        "with": graph.build(graph.optimize(module)),
        "without": graph.build(graph.optimize(module, passes=without)),
    }


def alternated_ms(
    runs: dict[str, Callable[[], object]], rounds: int, calls: int, pause_s: float = 0.3
) -> dict[str, list[float]]:
    """Milliseconds of each of `calls` calls of every run per round, the runs alternated round by
    round so that a noisy neighbour hits them alike; a pause after each lets the threads of one
    library (OpenBLAS, libgomp, ONNX Runtime) stop spinning before the next one runs."""
    from tuner.cli.models import latencies

    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            times[key] += [t * 1e3 for t in latencies(run, calls)]
            time.sleep(pause_s)
    return times


def forward_passes(builds: dict[str, CompiledModel], inputs: list) -> dict[str, Callable[[], object]]:
    """Each build's forward pass on `inputs`, as runs for `alternated_ms`."""
    return {key: (lambda c=compiled: c(*inputs)) for key, compiled in builds.items()}


def zoo_model_ms(
    name: str, graph_pass: Callable[[Module], Module], rounds: int = 5
) -> dict[str, list[float]]:
    """Milliseconds per forward pass of a zoo model (`bench.model_latency.zoo_models`) built "with"
    and "without" the graph pass, both checked against PyTorch, alternated round by round."""
    import numpy as np
    import torch

    from bench.model_latency import zoo_models
    from compiler import frontend

    entry = {m.name: m for m in zoo_models()}[name]
    model, args = entry.make(), entry.inputs()
    builds = with_and_without(frontend.from_torch(model, args), graph_pass)
    inputs = [a.numpy() for a in args]
    with torch.no_grad():
        want = model(*args).numpy()
    for compiled in builds.values():
        np.testing.assert_allclose(compiled(*inputs)[0], want, rtol=1e-3, atol=1e-3)
    return alternated_ms(forward_passes(builds, inputs), rounds, calls=5)


def threads_from_env() -> int:
    """The THREADS environment variable (2 by default), made our kernels' thread count."""
    threads = int(os.environ.get("THREADS", "2"))
    set_kernel_threads(threads)
    return threads


def tuned_at_budgets(
    module: Module, budgets: list[int], database: str
) -> Iterator[tuple[int, ModelTuneResult, float]]:
    """The model tuned to each budget in turn (each continuing the last in `database`): the budget,
    the result and the tuning wall time so far."""
    from tuner import tune_model

    done, tuned_secs = 0, 0.0
    for budget in budgets:
        result = tune_model(module, trials=budget - done, database=database)
        tuned_secs += result.scheduled.wall_secs if result.scheduled else 0.0
        done = budget
        yield budget, result, tuned_secs


def budget_arguments(description: str) -> argparse.Namespace:
    """The command line of the whole-model benchmarks: --models, --budgets, --databases."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--budgets", nargs="*", type=int)
    parser.add_argument("--databases", help="keep each model's SQLite database in this directory")
    return parser.parse_args()
