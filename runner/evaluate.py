"""Timing a loaded kernel: a warm-up call, then `repeat` measurements of `number` calls each.

The calls of one repeat run in the kernel's native repeat loop, so Python's ~1 us per call does not
weigh on microsecond kernels: one perf_counter pair per repeat is all the overhead.

A repeat during which the process's threads waited for a CPU (`runner.cpu_wait`) is timed again
after a short pause, up to `repeat` more times: on a worker beside a busy coordinator, one
measurement in 13 waited, some of them for 10x the kernel's time, and a would-be best measured
twice ranks by its slower median, so a disturbed block of repeats cost layers their best record
(bench/results/2026-11-26.md).
"""

from __future__ import annotations

import time
from functools import cache

import numpy as np

from compiler import Schedule, te
from compiler.build import Kernel, build
from runner.cpu_wait import waited_ns

FLUSH_BYTES = 64 << 20
# A repeat is disturbed when its threads waited for a CPU longer than this share of its time, or
# than the floor (waking a sleeping thread on an idle core waits a few microseconds).
MAX_WAIT_SHARE = 0.02
WAIT_FLOOR_NS = 10_000
# The pause before re-timing a disturbed repeat, doubled each time: the other task's burst ends.
RETRY_PAUSE_S, MAX_RETRY_PAUSE_S = 0.001, 0.032
WAKE_LANES = 256
_flush_buffer: np.ndarray | None = None


def evict_caches() -> None:
    """Evict the caches by writing a buffer larger than the last-level cache."""
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.zeros(FLUSH_BYTES // 8, dtype=np.int64)
    _flush_buffer += 1


@cache
def _team_waker() -> tuple[Kernel, list[np.ndarray]]:
    """A parallel loop that does next to nothing, and its arguments."""
    x = te.placeholder((WAKE_LANES,), name="x")
    y = te.compute((WAKE_LANES,), lambda i: x[i] + 1.0, name="y")
    sch = Schedule(te.create_prim_func([x, y]))
    (i,) = sch.get_loops(sch.get_block("y"))
    sch.parallel(i)
    kernel = build(sch.func, listings=False)
    return kernel, [np.zeros(WAKE_LANES, np.float32), np.zeros(WAKE_LANES, np.float32)]


def wake_threads() -> None:
    """Wake the parallel loops' thread team. libgomp's threads sleep ~0.4 ms after a parallel loop
    (GOMP_SPINCOUNT, compiler.runtime); a call timed after evicting the caches, which takes ms, found
    them asleep and paid for waking them (single 100 us calls measured at up to 1 ms), which a
    kernel inside a forward pass, called right after the layer before it, never does."""
    kernel, arrays = _team_waker()
    kernel.repeat(kernel.pointers(*arrays), 1)


def _time(kernel: Kernel, pointers: list[int], number: int) -> float:
    start = time.perf_counter()
    kernel.repeat(pointers, number)
    return time.perf_counter() - start


def evaluate(
    kernel: Kernel,
    args: list[np.ndarray],
    number: int = 1,
    repeat: int = 5,
    min_repeat_ms: float = 0.0,
    flush_cache: bool = False,
    keep_first_warm: bool = False,
) -> list[float]:
    """Seconds per call, one entry per repeat. `number` grows until one repeat lasts min_repeat_ms.
    `flush_cache` evicts the caches before each repeat; `keep_first_warm` then reads `args[0]` back
    into them (see `TimingConfig`)."""
    (secs,) = evaluate_side_by_side(
        [kernel], args, number, repeat, min_repeat_ms, flush_cache, keep_first_warm
    )
    return secs


def evaluate_side_by_side(
    kernels: list[Kernel],
    args: list[np.ndarray],
    number: int = 1,
    repeat: int = 5,
    min_repeat_ms: float = 0.0,
    flush_cache: bool = False,
    keep_first_warm: bool = False,
) -> list[list[float]]:
    """`evaluate` of kernels of one workload on the same arguments, their repeats alternated (one of
    each, round by round), so a slow phase of the host falls on all of them alike. The caches and
    memory bandwidth a cold kernel depends on are shared with the machine's other tenants: one
    memory-bound GEMV read 68-141 us from one block of repeats to the next in one process, while its
    blocks' own spread was a few percent (bench/results/2026-12-02-b.md); times taken side by side
    compare where times taken apart do not. Each kernel's `number` is grown on its own."""
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be >= 1, got number={number}, repeat={repeat}")
    pointers = [kernel.pointers(*args) for kernel in kernels]
    numbers = [_calibrated(kernel, p, number, min_repeat_ms) for kernel, p in zip(kernels, pointers)]
    out: list[list[float]] = [[] for _ in kernels]
    retries = [repeat] * len(kernels)  # each kernel's repeats may be timed again `repeat` times in all
    for _ in range(repeat):
        for i, (kernel, p, n) in enumerate(zip(kernels, pointers, numbers)):
            secs, retries[i] = _one_repeat(kernel, p, n, retries[i], args, flush_cache, keep_first_warm)
            out[i].append(secs)
    return out


def _calibrated(kernel: Kernel, pointers: list[int], number: int, min_repeat_ms: float) -> int:
    """One untimed call, then `number` grown until one repeat lasts min_repeat_ms."""
    kernel.repeat(pointers, 1)
    while min_repeat_ms > 0:
        elapsed_ms = _time(kernel, pointers, number) * 1e3
        if elapsed_ms >= min_repeat_ms:
            break
        scale = min_repeat_ms / max(elapsed_ms, 1e-6)
        number = max(number + 1, int(number * min(scale * 1.2, 100.0)))
    return number


def _one_repeat(
    kernel: Kernel,
    pointers: list[int],
    number: int,
    retries: int,
    args: list[np.ndarray],
    flush_cache: bool,
    keep_first_warm: bool,
) -> tuple[float, int]:
    """Seconds per call of one repeat, and the retries left: a repeat whose threads waited for a CPU
    is timed again after a pause, while retries are left."""
    pause = RETRY_PAUSE_S
    while True:
        if flush_cache:
            evict_caches()
            if keep_first_warm:
                args[0].sum()
            wake_threads()
        before = waited_ns()
        secs = _time(kernel, pointers, number)
        after = waited_ns()
        if retries > 0 and before is not None and after is not None and _disturbed(after - before, secs):
            retries -= 1
            time.sleep(pause)
            pause = min(2 * pause, MAX_RETRY_PAUSE_S)
            continue
        return secs / number, retries


def _disturbed(waited: int, secs: float) -> bool:
    return waited > max(WAIT_FLOOR_NS, MAX_WAIT_SHARE * secs * 1e9)
