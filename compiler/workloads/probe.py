"""The probe of a workload's reference: its outputs' first few elements along every axis, computed from
random inputs (as workers draw them: standard normal floats) by the interpreter of unscheduled
PrimFuncs, over only the part of each block those elements depend on. It costs milliseconds where the
whole reference may cost minutes, so a coordinator can run it on every submission.

A reference that is not finite there (a division by zero, the log of a negative number, an overflow)
can only ever judge candidates wrong, or right for the wrong reason: `check_finite` refuses it.

Which part of a block is needed is found backwards from the outputs: a block that stores at its spatial
variables in order, each bound to a loop of its own (what te.create_prim_func makes, and what a
PrimFunc spec must be), is evaluated over the box of its output that later blocks read, and reads the
hull of its loads' index intervals (`bounds.expr_range`) over that box and its whole reductions. Any
other block (a scan step) is evaluated whole, and so is what it reads.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from compiler.interpret import Box, run
from compiler.ir import Block, Buffer, Expr, For, PrimFunc, SeqStmt, Stmt, Var, static_dim, static_shape
from compiler.visit import loads
from compiler.workloads.bounds import Range, expr_range
from compiler.workloads.workload import Workload, WorkloadError

PROBE_EXTENT = 4  # elements of each output axis the probe computes
# Block iterations (reductions included) one probe may evaluate: a full reduction over the largest
# input the limits allow (MAX_TOTAL_BYTES of float32) fits, in about a second of numpy.
PROBE_ITERATIONS = 1 << 28
_KINDS = ("op", "expr", "primfunc")


@dataclass(frozen=True)
class _ProbedBlock:
    loops: tuple[For, ...]
    block: Block

    @property
    def boxable(self) -> bool:
        """Evaluated over a box of its spatial variables: each iteration variable spatial or reduce,
        bound to a loop of its own, and the store at the spatial variables in order."""
        b = self.block
        if len(b.iter_vars) != len(self.loops) or any(iv.kind not in ("S", "R") for iv in b.iter_vars):
            return False
        for iv, binding, loop in zip(b.iter_vars, b.bindings, self.loops):
            if not (isinstance(binding, Var) and bool(binding == loop.var) and iv.extent == loop.extent):
                return False
        spatial = [iv.var for iv in b.iter_vars if iv.kind == "S"]
        store = b.body.indices
        return len(store) == len(spatial) and all(bool(i == v) for i, v in zip(store, spatial))


@dataclass(frozen=True)
class Plan:
    """What the probe evaluates: each needed block's box (None: all of it), each buffer's needed
    interval per axis, and how many block iterations that is."""

    boxes: dict[str, Box | None]
    needed: dict[Buffer, list[Range]]
    iterations: int


def plan(func: PrimFunc, num_inputs: int, extent: int = PROBE_EXTENT) -> Plan:
    """The blocks and the parts of them that the first `extent` elements of each output axis need."""
    needed: dict[Buffer, list[Range]] = {
        b: [(0, min(n, extent) - 1) for n in static_shape(b.shape, "a workload")]
        for b in func.params[num_inputs:]
    }
    boxes: dict[str, Box | None] = {}
    iterations = 0
    for nest in reversed(list(_nests(func.body, ()))):
        block, out = nest.block, nest.block.body.buffer
        spatial = [iv for iv in block.iter_vars if iv.kind == "S"]
        skip = tuple((0, 0) for _ in spatial)  # an empty box: the block is not evaluated at all
        if out not in needed:
            boxes[block.name] = skip  # nothing needed reads what it writes
            continue
        ranges: dict[Expr, Range]
        if nest.boxable:
            ranges = {
                iv.var: (lo, min(hi, static_dim(iv.extent, "a workload") - 1))
                for iv, (lo, hi) in zip(spatial, needed[out])
            }
            ranges |= {
                iv.var: (0, static_dim(iv.extent, "a workload") - 1)
                for iv in block.iter_vars
                if iv.kind == "R"
            }
            if any(lo > hi for lo, hi in ranges.values()):
                boxes[block.name] = skip
                continue
            box: Box | None = tuple((lo, hi - lo + 1) for lo, hi in (ranges[iv.var] for iv in spatial))
            iterations += math.prod(hi - lo + 1 for lo, hi in ranges.values())
        else:
            needed[out] = [
                (0, n - 1) for n in static_shape(out.shape, "a workload")
            ]  # every block writing it, whole
            ranges = {loop.var: (0, static_dim(loop.extent, "a workload") - 1) for loop in nest.loops}
            ranges |= {iv.var: (0, static_dim(iv.extent, "a workload") - 1) for iv in block.iter_vars}
            box = None
            iterations += math.prod(static_dim(loop.extent, "a workload") for loop in nest.loops)
        boxes[block.name] = box
        for buffer, indices in _reads(block):
            if buffer == out and nest.boxable:
                continue  # a reduction's accumulator: the block's own box
            read = [
                _clip(expr_range(i, ranges), n)
                for i, n in zip(indices, static_shape(buffer.shape, "a workload"))
            ]
            known = needed.get(buffer)
            needed[buffer] = read if known is None else [_hull(a, b) for a, b in zip(known, read)]
    return Plan(boxes, needed, iterations)


@dataclass(frozen=True)
class Probe:
    """The inputs (whole buffers, zero where nothing probed reads them) and each output's probed
    window (its first elements along every axis)."""

    inputs: list[np.ndarray]
    outputs: dict[Buffer, np.ndarray]


def probe(workload: Workload, rng: np.random.Generator) -> Probe:
    """The reference on random inputs, where the probe looks. Raises WorkloadError when even a
    one-element window needs more than PROBE_ITERATIONS."""
    func, n = workload.func, workload.num_inputs
    p = plan(func, n)
    if p.iterations > PROBE_ITERATIONS:
        p = plan(func, n, extent=1)
    if p.iterations > PROBE_ITERATIONS:
        raise WorkloadError(
            _kind(workload),
            f"its reference cannot be probed: one output element needs {p.iterations} iterations, "
            f"over the limit of {PROBE_ITERATIONS}",
        )
    arrays = {
        b: _untouched(static_shape(b.shape, "a workload"), b.dtype) for b in (*func.params, *func.allocs)
    }
    for b in func.params[:n]:
        window = _window(p.needed.get(b, []))
        if window:
            shape = arrays[b][window].shape
            draws = rng.standard_normal(shape) if b.dtype.startswith("float") else rng.integers(-8, 8, shape)
            arrays[b][window] = draws.astype(b.dtype)
    run(func, arrays, {name: box for name, box in p.boxes.items() if box is not None})
    return Probe(
        [arrays[b] for b in func.params[:n]], {b: arrays[b][_window(p.needed[b])] for b in func.params[n:]}
    )


def check_finite(workload: Workload, seed: int = 0) -> None:
    """Raise WorkloadError, naming the spec's kind (op, expr or primfunc), unless every probed output
    element of the reference is finite."""
    for buffer, values in probe(workload, np.random.default_rng(seed)).outputs.items():
        bad = ~np.isfinite(values)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise WorkloadError(
                _kind(workload),
                f"its reference is not finite on random inputs: {buffer.name}{list(where)} = "
                f"{values[where]} (a division by zero, a log or sqrt of a negative number, an overflow?); "
                "no candidate could ever be checked against it",
            )


def _untouched(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A zeroed array that takes memory only page by page as the probe writes it: anonymous memory
    without transparent huge pages, which would take 2 MiB for each element of a column written
    (a whole matrix: 340 MB of a 9459^3 matmul's buffers, against 37 MB of 4 KiB pages)."""
    count = math.prod(shape)
    memory = mmap.mmap(-1, max(1, count * np.dtype(dtype).itemsize))
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux
        memory.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(memory, dtype, count=count).reshape(shape)


def _nests(s: Stmt, loops: tuple[For, ...]) -> Iterator[_ProbedBlock]:
    """Every block with the loops around it, in program order."""
    if isinstance(s, SeqStmt):
        for k in s.stmts:
            yield from _nests(k, loops)
    elif isinstance(s, For):
        yield from _nests(s.body, (*loops, s))
    elif isinstance(s, Block):
        yield _ProbedBlock(loops, s)


def _reads(block: Block) -> Iterator[tuple[Buffer, tuple[Expr, ...]]]:
    values = [block.body.value, *block.body.indices]
    if block.init is not None:
        values.append(block.init.value)
    for value in values:
        for load in loads(value):
            yield load.buffer, load.indices


def _clip(r: Range | None, n: int) -> Range:
    """`r` inside [0, n): a load proven in bounds where it runs may reach outside where a select
    discards it (padding); an index of unknown range may be anything."""
    return (0, n - 1) if r is None else (max(r[0], 0), min(r[1], n - 1))


def _hull(a: Range, b: Range) -> Range:
    return min(a[0], b[0]), max(a[1], b[1])


def _window(ranges: list[Range]) -> tuple[slice, ...]:
    return tuple(slice(lo, hi + 1) for lo, hi in ranges)


def _kind(workload: Workload) -> str:
    return next((k for k in _KINDS if k in workload.spec), "spec")
