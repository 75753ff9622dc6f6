"""One kernel, several schedules: a function with a symbolic dimension compiled with a schedule per
bucket of its values, the kernel choosing by the value at the call (DietCode's dispatch, inside the
kernel, so a C caller gets it too).

One schedule does not fit every length. The symbolic default schedule (`symbolic_schedule`, at
n = 32) gives a (n, 768) x (768, 768) matmul an 8-row register tile: 1.00-1.10x the static kernels
from n = 64 to 512, but 0.26x at n = 1, where the static kernel streams W for its one row, and 0.60x
at n = 7 (bench/results/2026-11-29.md). Each bucket is the symbolic function scheduled at the
bucket's largest value, so its row tile fits that value (scratch runs: 0.97x at n = 1 with the
schedule made at 1, 0.87x at 3 with 4's, 0.88x at 7 with 8's). Every bucket's program is valid for
the whole range (its tiles cover the range's largest value), so the dispatch only chooses speed;
buckets whose schedules come out the same (an elementwise kernel's) are merged into one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from compiler.ir import Binary, IfThenElse, PrimFunc, SizeVar, Stmt, const, structural_equal
from compiler.lower import lower
from compiler.ops import Op
from compiler.schedule import ScheduleError, Trace, TraceError
from compiler.schedule_rules.default import REPRESENTATIVE_SIZE, symbolic_schedule
from compiler.target import Target

# The largest value of each bucket below REPRESENTATIVE_SIZE; the last bucket takes the rest.
BUCKET_BOUNDS = (1, 2, 4, 6, 8, 12, 16, 24)


@dataclass(frozen=True)
class Bucket:
    """`func` (scheduled) runs for values of the dimension up to `upto`; the last bucket's `upto`
    is the range's largest value."""

    upto: int
    func: PrimFunc
    tuned: bool = False  # the program is a tuned trace replayed (`default_buckets`'s `tuned`)


@dataclass(frozen=True)
class BucketedFunc:
    """A symbolic function (`func`, as defined) and its scheduled versions by buckets of `var`."""

    func: PrimFunc
    var: SizeVar
    buckets: tuple[Bucket, ...]

    def __post_init__(self) -> None:
        uptos = [b.upto for b in self.buckets]
        if not uptos or uptos != sorted(set(uptos)) or uptos[-1] != self.var.hi:
            raise ValueError(
                f"buckets of {self.var.name} must rise to its largest value {self.var.hi}: {uptos}"
            )
        for b in self.buckets:
            if b.func.params != self.func.params:
                raise ValueError(f"the bucket up to {b.upto} has other parameters than {self.func.name}")

    def renamed(self, name: str) -> BucketedFunc:
        """The same programs under another function name (a model's kernel's symbol)."""
        buckets = tuple(replace(b, func=replace(b.func, name=name)) for b in self.buckets)
        return replace(self, func=replace(self.func, name=name), buckets=buckets)


def default_buckets(func: PrimFunc, target: Target, tuned: Mapping[int, Trace] | None = None) -> BucketedFunc:
    """The symbolic default schedule per bucket of the function's first symbolic dimension (the
    others at `REPRESENTATIVE_SIZE`): a bucket per `BUCKET_BOUNDS` value inside its range, scheduled
    at that value, and one for the rest scheduled at `REPRESENTATIVE_SIZE` (or the range's largest
    value). `tuned` adds the sizes it has traces for (of the function at that size, as `tune` finds
    them) as buckets of their own, the trace replayed over the range; the largest of them at least
    `REPRESENTATIVE_SIZE` also schedules every larger size, and below it default buckets 1.33-1.5x
    apart above `REPRESENTATIVE_SIZE` keep each trace to the lengths near its own. A trace that
    does not replay (another function's, or a primitive that needs a number where the range has
    none) leaves its bucket the default schedule; `Bucket.tuned` says which replayed."""
    if not func.size_vars:
        raise ValueError(f"{func.name} has no symbolic dimension to choose a schedule by")
    var = func.size_vars[0]
    tuned = {size: trace for size, trace in (tuned or {}).items() if var.lo <= size <= var.hi}
    below_tuned = {b for b in _large_bounds(max(tuned, default=0)) if var.lo <= b < var.hi}
    uptos = sorted({b for b in BUCKET_BOUNDS if var.lo <= b < var.hi} | set(tuned) | below_tuned | {var.hi})
    large = max((size for size in tuned if size >= REPRESENTATIVE_SIZE), default=None)
    buckets: list[Bucket] = []
    for upto in uptos:
        trace = tuned.get(upto, tuned[large] if large is not None and upto > large else None)
        scheduled = _replayed(func, trace) if trace is not None else None
        from_trace = scheduled is not None
        if scheduled is None:
            at = {var: upto} if upto < var.hi else {}  # the last bucket: at the representative size
            scheduled = symbolic_schedule(func, target, at).func
        if buckets and structural_equal(buckets[-1].func, scheduled):
            from_trace = from_trace or buckets.pop().tuned  # the same program: one bucket
        buckets.append(Bucket(upto, scheduled, from_trace))
    return BucketedFunc(func, var, tuple(buckets))


def _large_bounds(below: int) -> list[int]:
    """Bucket bounds above REPRESENTATIVE_SIZE, each 1.33-1.5x the last (48, 64, 96, 128, 192, ...),
    up to `below`: between tuned sizes they keep a tuned trace to the lengths near its own. Replayed
    from 256 tokens down to 64, GPT-2's Q/K/V projection ran 1.74 ms against the default's 0.96
    (`bench.dynamic_lengths --trials`, stop 53)."""
    out: list[int] = []
    bound = REPRESENTATIVE_SIZE
    while True:
        bound = bound * 3 // 2 if bound & (bound - 1) == 0 else bound * 4 // 3
        if bound >= below:
            return out
        out.append(bound)


def _replayed(func: PrimFunc, trace: Trace) -> PrimFunc | None:
    try:
        return trace.apply(func).func
    except (ScheduleError, TraceError):
        return None


def lower_buckets(bucketed: BucketedFunc) -> PrimFunc:
    """Each bucket lowered, chosen at run time by `var <= upto`, the first bucket that holds."""
    lowered = [lower(b.func) for b in bucketed.buckets]
    body: Stmt = lowered[-1].body
    for bucket, low in zip(reversed(bucketed.buckets[:-1]), reversed(lowered[:-1])):
        body = IfThenElse(Binary(Op.LE, bucketed.var, const(bucket.upto)), low.body, body)
    return replace(lowered[-1], body=body)
