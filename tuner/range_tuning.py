"""One kernel tuned for a range of sizes: a function with a symbolic dimension tuned at a few sizes
spread over its range, under one budget, and built as one kernel that runs every size in the range
with the schedule of the bucket it falls in (`compiler.buckets`).

The sizes are tuned as the static functions they specialize to (ordinary workloads and records, so
`tuner best` and the service see them), as one task set: the task scheduler spends the trials where
the sum of their latencies gains most, and the sizes share one cost model. Each tuned size's best
trace is replayed over the whole range (the symbolic function's tiles cover its largest value) and
runs the bucket that ends at that size; sizes between use the default schedules made for their
buckets, and sizes above the largest tuned one run its trace (when it is at least the default
schedule's own size, 32).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from compiler import Hardware, PrimFunc, Trace, build, host_hardware
from compiler.buckets import BucketedFunc, default_buckets
from compiler.build import Kernel
from compiler.graph.shape_family import size_between
from compiler.ir import SizeVar
from compiler.workloads.primfunc_spec import func_workload
from runner import Runner, TimingKind
from tuner.best import best_record
from tuner.database import Database, Record
from tuner.task_scheduler import TasksResult, WeightedWorkload, tune_tasks
from tuner.tune import DEFAULT_DATABASE, opened

# How many sizes spread over the range it is tuned at, unless told (as `tune_model` tunes a family).
RANGE_SIZES = 4


@dataclass
class RangeTuneResult:
    func: PrimFunc
    dimension: SizeVar
    sizes: list[int]
    best: dict[int, Record | None]  # each tuned size's best record
    buckets: BucketedFunc  # the schedules by size: `Bucket.tuned` where a best record's trace replayed
    kernel: Kernel  # one kernel for the whole range, built from the buckets
    scheduled: TasksResult | None
    wall_secs: float


def dimension_of(func: PrimFunc) -> SizeVar:
    """The one symbolic dimension a range is tuned over."""
    if len(func.size_vars) != 1:
        names = ", ".join(v.name for v in func.size_vars) or "none"
        raise ValueError(f"{func.name}: a range is tuned over one symbolic dimension; it has {names}")
    return func.size_vars[0]


def spread_sizes(low: int, high: int) -> list[int]:
    """RANGE_SIZES sizes from `low` to `high`, both included, evenly in the logarithm."""
    return sorted({size_between(low, high, k / (RANGE_SIZES - 1)) for k in range(RANGE_SIZES)})


def range_sizes(func: PrimFunc, sizes: Sequence[int] | None = None) -> list[int]:
    """`sizes` checked against the range, else RANGE_SIZES spread over it (both ends included, evenly
    in the logarithm)."""
    var = dimension_of(func)
    if sizes is None:
        return spread_sizes(var.lo, var.hi)
    outside = [s for s in sizes if not var.lo <= s <= var.hi]
    if outside or not sizes:
        raise ValueError(f"sizes {list(sizes)} must be in {var.name}'s range [{var.lo}, {var.hi}]")
    return sorted(set(sizes))


def tune_range(
    func: PrimFunc,
    *,
    trials: int,
    sizes: Sequence[int] | None = None,
    database: Database | str = DEFAULT_DATABASE,
    scheduler: str = "gradient",
    strategy: str = "evolutionary",
    seed: int = 0,
    runner: Runner | None = None,
    batch_size: int = 16,
    hardware: Hardware | None = None,
) -> RangeTuneResult:
    """Spend `trials` measurements on `func` at `sizes` of its symbolic dimension (`range_sizes`)
    together, then build the one kernel for the range (`compile_range`)."""
    start = time.perf_counter()
    var, tuned = dimension_of(func), range_sizes(func, sizes)
    hardware = hardware or host_hardware()
    workloads = [func_workload(func.specialize({var: s})) for s in tuned]
    with opened(database) as db:
        scheduled = None
        if trials > 0:
            scheduled = tune_tasks(
                [WeightedWorkload(wl) for wl in workloads],
                trials=trials,
                database=db,
                scheduler=scheduler,
                strategy=strategy,
                seed=seed,
                runner=runner,
                batch_size=batch_size,
                hardware=hardware,
            )
        best = {
            s: best_record(db, wl.func.structural_hash(), hardware.key, TimingKind.WARM)
            for s, wl in zip(tuned, workloads)
        }
        buckets = range_buckets(func, sizes=tuned, database=db, hardware=hardware)
    kernel = build(buckets, hardware.target, listings=False)
    return RangeTuneResult(func, var, tuned, best, buckets, kernel, scheduled, time.perf_counter() - start)


def compile_range(
    func: PrimFunc,
    *,
    sizes: Sequence[int] | None = None,
    database: Database | str = DEFAULT_DATABASE,
    hardware: Hardware | None = None,
) -> Kernel:
    """One kernel for every size in the range, built from `range_buckets`."""
    hardware = hardware or host_hardware()
    buckets = range_buckets(func, sizes=sizes, database=database, hardware=hardware)
    return build(buckets, hardware.target, listings=False)


def range_buckets(
    func: PrimFunc,
    *,
    sizes: Sequence[int] | None = None,
    database: Database | str = DEFAULT_DATABASE,
    hardware: Hardware | None = None,
) -> BucketedFunc:
    """The best records of `func` at `sizes` (as `tune_range` tuned them; by default its spread
    sizes) in their buckets, the default schedules elsewhere (`compiler.buckets.default_buckets`)."""
    var = dimension_of(func)
    hardware = hardware or host_hardware()
    traces: dict[int, Trace] = {}
    with opened(database) as db:
        for size in range_sizes(func, sizes):
            key = func.specialize({var: size}).structural_hash()
            best = best_record(db, key, hardware.key, TimingKind.WARM)
            if best is not None:
                traces[size] = Trace.from_json(best.trace)
    return default_buckets(func, hardware.target, traces)


__all__ = [
    "RANGE_SIZES",
    "RangeTuneResult",
    "compile_range",
    "dimension_of",
    "range_buckets",
    "range_sizes",
    "spread_sizes",
    "tune_range",
]
