"""How one store touches memory: the per-buffer columns of `tuner.search.features`.

For each buffer a store reads or writes: the volume, the cache lines, the stride of the innermost
loop, reuse (the innermost loop that does not move the access, as TVM's LoopMultipleRead; or a read
and a write of the same element, its SerialMultipleReadWrite) and the footprint under the innermost
loops, which is what must stay in cache for that reuse to pay. A footprint is the bounding box of the
region the accesses cover, per dimension, with the loops outside the level held at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.arith import bound
from compiler.dtypes import ITEMSIZE
from compiler.ir import Buffer, BufferStore, Expr, Load, Var, static_shape
from compiler.visit import free_vars, walk_expr

CACHE_LINE_BYTES = 64
FOOTPRINT_LEVELS = 4  # footprints under the innermost 1..4 loops

BUFFER_FEATURE_NAMES = [
    "is_read", "is_write", "is_readwrite", "bytes", "unique_bytes", "lines", "unique_lines",
    "stride_zero", "stride_one", "stride_other", "stride_elems",
    "reuse_none", "reuse_loop", "reuse_serial", "reuse_level", "reuse_dist_iters", "reuse_dist_bytes",
    "reuse_count", "bytes_per_reuse", "lines_per_reuse",
    *(f"footprint_l{k}" for k in range(1, FOOTPRINT_LEVELS + 1)),
]  # fmt: skip


def log_scale(x: float) -> float:
    """log2(1 + x): counts and sizes span orders of magnitude, and trees split on those."""
    return math.log2(1.0 + x)


@dataclass(frozen=True)
class Loop:
    var: Var
    extent: int  # iterations for the store under consideration (1 under a `var == 0` guard)
    kind: str


@dataclass
class _Accesses:
    reads: list[tuple[Expr, ...]]
    writes: list[tuple[Expr, ...]]

    @property
    def all(self) -> list[tuple[Expr, ...]]:
        return self.reads + self.writes


def _buffer_accesses(store: BufferStore) -> dict[Buffer, _Accesses]:
    out: dict[Buffer, _Accesses] = {store.buffer: _Accesses([], [store.indices])}
    for expr in (node for e in (store.value, *store.indices) for node in walk_expr(e)):
        if isinstance(expr, Load):
            out.setdefault(expr.buffer, _Accesses([], [])).reads.append(expr.indices)
    return out


class AccessAnalysis:
    """Strides, footprints and reuse of a store's buffer accesses under its loop nest (memoized)."""

    def __init__(self, store: BufferStore, loops: Sequence[Loop], still: Sequence[Var]) -> None:
        self.loops = loops
        self.buffers = _buffer_accesses(store)
        self._origin = {v: (0, 0) for v in still} | {lp.var: (0, 0) for lp in loops}
        self._footprints: dict[tuple[Buffer, int], tuple[int, ...]] = {}
        self._start_cache: dict[Buffer, list[int]] = {}

    def iterations(self, levels: int) -> int:
        """Executions of the store under its innermost `levels` loops."""
        return math.prod(lp.extent for lp in self.loops[len(self.loops) - min(levels, len(self.loops)) :])

    def bytes_touched(self, buf: Buffer, executions: int) -> int:
        return executions * len(self.buffers[buf].all) * ITEMSIZE[buf.dtype]

    def most_touched(self, executions: int, count: int) -> list[Buffer]:
        """The `count` buffers with the most bytes touched (ties by name, so rows are deterministic)."""
        return sorted(self.buffers, key=lambda b: (-self.bytes_touched(b, executions), b.name))[:count]

    def box(self, buf: Buffer, levels: int) -> tuple[int, ...]:
        """Extent per dimension of the region the accesses cover while the innermost `levels` loops
        run (outer loop variables held at 0): a bounding box of all accesses to `buf`."""
        key = (buf, levels)
        if key not in self._footprints:
            inner = self.loops[len(self.loops) - min(levels, len(self.loops)) :]
            ranges = self._origin | {lp.var: (0, lp.extent - 1) for lp in inner}
            extents = []
            for d, size in enumerate(static_shape(buf.shape, buf.name)):
                spans = [bound(idx[d], ranges) for idx in self.buffers[buf].all]
                if any(s is None for s in spans):
                    extents.append(size)
                    continue
                lo = min(s[0] for s in spans if s is not None)
                hi = max(s[1] for s in spans if s is not None)
                extents.append(max(1, min(size, hi - lo + 1)))
            self._footprints[key] = tuple(extents)
        return self._footprints[key]

    def footprint(self, buf: Buffer, levels: int) -> int:
        return math.prod(self.box(buf, levels)) * ITEMSIZE[buf.dtype]

    def footprint_all(self, levels: int) -> int:
        return sum(self.footprint(buf, levels) for buf in self.buffers)

    def stride(self, buf: Buffer, loop: Loop) -> int:
        """Elements the flattened address moves when `loop` advances by one (largest over accesses)."""
        one = self._origin | {loop.var: (1, 1)}
        return max(
            abs(_flat_index(idx, static_shape(buf.shape, buf.name), one) - start)
            for idx, start in zip(self.buffers[buf].all, self._starts(buf))
        )

    def _starts(self, buf: Buffer) -> list[int]:
        """The flattened address of each access with every loop at 0 (the same for every loop's stride)."""
        if buf not in self._start_cache:
            self._start_cache[buf] = [
                _flat_index(idx, static_shape(buf.shape, buf.name), self._origin)
                for idx in self.buffers[buf].all
            ]
        return self._start_cache[buf]

    def reuse(self, buf: Buffer) -> tuple[str, int, int, int, int]:
        """The nearest reuse of `buf`: (kind, level, distance in iterations, distance in bytes, count).

        "loop" when some loop does not move the access: the innermost such loop re-touches the
        same elements once everything inside it (`level` loops) has run. "serial" when the store
        touches an element more than once itself (a read and a write of C[i, j]). Else "none"."""
        accesses = self.buffers[buf].all
        used = set().union(*(free_vars(i) for idx in accesses for i in idx))
        unused = [i for i, lp in enumerate(self.loops) if lp.var not in used]
        if unused:
            level = len(self.loops) - 1 - unused[-1]
            return (
                "loop",
                level,
                self.iterations(level),
                self.footprint_all(level),
                self.loops[unused[-1]].extent,
            )
        if len(accesses) > 1:
            return "serial", 0, 0, ITEMSIZE[buf.dtype], len(accesses) - 1
        return "none", 0, 0, 0, 0

    def buffer_features(self, buf: Buffer, executions: int) -> list[float]:
        """The BUFFER_FEATURE_NAMES columns of one buffer."""
        acc = self.buffers[buf]
        item = ITEMSIZE[buf.dtype]
        loops = self.loops
        n = len(loops)
        strides = [self.stride(buf, lp) for lp in loops]
        inner_stride = strides[-1] if loops else 0
        # Lines: each sweep of the innermost loop that moves the address touches ceil(span / line)
        # lines; loops inside it re-touch the same element.
        moving = [i for i, s in enumerate(strides) if s != 0]
        lines = 1
        if moving:
            p = moving[-1]
            sweep = min(loops[p].extent, math.ceil(loops[p].extent * strides[p] * item / CACHE_LINE_BYTES))
            lines = math.prod(lp.extent for lp in loops[:p]) * sweep
        box = self.box(buf, n)
        unique_lines = math.prod(box[:-1]) * math.ceil(box[-1] * item / CACHE_LINE_BYTES) if box else 1
        kind, level, distance_iters, distance_bytes, count = self.reuse(buf)
        touched = self.bytes_touched(buf, executions)
        return [
            float(bool(acc.reads) and not acc.writes),
            float(bool(acc.writes) and not acc.reads),
            float(bool(acc.reads) and bool(acc.writes)),
            log_scale(touched),
            log_scale(self.footprint(buf, n)),
            log_scale(lines),
            log_scale(unique_lines),
            float(inner_stride == 0),
            float(inner_stride == 1),
            float(inner_stride > 1),
            log_scale(inner_stride),
            *(float(kind == k) for k in ("none", "loop", "serial")),
            *(log_scale(x) for x in (level, distance_iters, distance_bytes, count)),
            log_scale(touched / max(1, count)),
            log_scale(lines / max(1, count)),
            *(log_scale(self.footprint(buf, k)) for k in range(1, FOOTPRINT_LEVELS + 1)),
        ]


def _flat_index(indices: tuple[Expr, ...], shape: tuple[int, ...], values: dict[Var, tuple[int, int]]) -> int:
    flat = 0
    for idx, size in zip(indices, shape):
        span = bound(idx, values)
        flat = flat * size + (span[0] if span is not None else 0)
    return flat
