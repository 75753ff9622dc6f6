"""Build cost per candidate: trace replay, lowering + LLVM O3 + object code, and loading, for
random tiled schedules of a 512^3 matmul (the kind of candidate the search builds by thousands)."""

from __future__ import annotations

import statistics
import time

from bench.common import random_matmul_traces
from compiler.build import compile_kernel, load
from compiler.schedule import Trace
from compiler.target import Target
from compiler.workloads import workload_from_spec

SPEC = {"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}


def main(count: int = 40) -> None:
    func = workload_from_spec(SPEC).func
    target = Target.host()
    phases: dict[str, list[float]] = {"replay": [], "compile": [], "load": [], "total": []}
    for data in random_matmul_traces(SPEC, count, seed=1):
        t0 = time.perf_counter()
        scheduled = Trace.from_json(data).apply(func).func
        t1 = time.perf_counter()
        compiled = compile_kernel(scheduled, target)
        t2 = time.perf_counter()
        load(compiled)
        t3 = time.perf_counter()
        for name, secs in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
            phases[name].append(secs * 1e3)
    summary = ", ".join(f"{name} {statistics.median(ms):.1f}" for name, ms in phases.items())
    worst = max(phases["total"])
    print(
        f"build cost per candidate, median ms over {count} matmul 512^3 schedules: {summary}; max {worst:.0f}"
    )
