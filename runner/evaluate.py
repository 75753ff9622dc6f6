"""Timing a loaded kernel: a warm-up call, then `repeat` measurements of `number` calls each.

The calls of one repeat run in the kernel's native repeat loop, so Python's ~1 us per call does not
weigh on microsecond kernels: one perf_counter pair per repeat is all the overhead.
"""

from __future__ import annotations

import time

import numpy as np

from compiler.build import Kernel

FLUSH_BYTES = 64 << 20
_flush_buffer: np.ndarray | None = None


def evict_caches() -> None:
    """Evict the caches by writing a buffer larger than the last-level cache."""
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.zeros(FLUSH_BYTES // 8, dtype=np.int64)
    _flush_buffer += 1


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
) -> list[float]:
    """Seconds per call, one entry per repeat. `number` grows until one repeat lasts min_repeat_ms."""
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be >= 1, got number={number}, repeat={repeat}")
    pointers = kernel.pointers(*args)
    kernel.repeat(pointers, 1)
    while min_repeat_ms > 0:
        elapsed_ms = _time(kernel, pointers, number) * 1e3
        if elapsed_ms >= min_repeat_ms:
            break
        scale = min_repeat_ms / max(elapsed_ms, 1e-6)
        number = max(number + 1, int(number * min(scale * 1.2, 100.0)))
    out = []
    for _ in range(repeat):
        if flush_cache:
            evict_caches()
        out.append(_time(kernel, pointers, number) / number)
    return out
