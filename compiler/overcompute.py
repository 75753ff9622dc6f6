"""Guarded tiles over-computed: a block that accumulates into a scratch tile computes its last, partial
tile whole, clamped to the last valid element, instead of testing its guard at every step.

A split whose tiles do not divide the extent (a loop over a symbolic length n split into tiles of
8 rows) guards its blocks by `row < n`. In a matmul's register tile that test runs for every row at
every step of the reduction and keeps LLVM from holding the tile in registers: a (n, 768) x
(768, 768) matmul ran at 0.43-0.51x the static kernels from n = 64 to 512 (scratch runs, stop 52).
A block that only writes a scratch buffer (an intermediate, compacted to the tile) may compute rows
past n: nothing reads them but a guarded write-back. The guarded variable is clamped to the valid
domain (`min(row, n - 1)`) everywhere in the computed value (loads, conditions, arithmetic), all but
where the block writes its tile, so a row past n computes exactly what row n - 1 does: nothing is
read outside a buffer and no operation sees a value the program would not (no new integer division
by zero, no select taking a branch it never takes). The guarded variable must be spatial and write
elements of its own (a reduction step past the guard would add into valid sums), and the block must
not read another tile along it, unless every block writing that tile is unguarded (over-computed
itself, as a staged panel of a matmul's weights is): that tile holds the clamped rows' values past
the guard, and is read unclamped, inside the tile. A matmul reading its staged panel with its
tile guarded ran 4.8x slower (BERT's attention scores at 512 tokens,
bench/results/2026-12-02-b.md). Only the write-back keeps its guard, once per element of the tile,
and a reduction variable's guard stays on the block (checked once per step of the reduction once
lowering hoists it out of the tile's loops).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from compiler.arith import Extents, Ranges, bound, conjuncts, extent_expr, extent_range, linear, simplify
from compiler.ir import (
    TRUE,
    Allocate,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Expr,
    For,
    Load,
    PrimFunc,
    Stmt,
    Var,
    const,
    structural_equal,
)
from compiler.ops import Op
from compiler.visit import block_loads, blocks, free_vars, map_block_exprs, map_blocks, map_expr, substitute

PADDED_BYTES = 64 << 20  # an intermediate grown past this keeps the size of the call


@dataclass(frozen=True)
class _Loops:
    """The loops around a statement: their variables' numeric ranges, and their symbolic extents
    (a fused loop's variable divided by one of its factors is bounded by the other)."""

    ranges: Ranges = field(default_factory=dict)
    extents: Extents = field(default_factory=dict)

    def inside(self, loop: For) -> _Loops:
        ranges = {**self.ranges, loop.var: extent_range(loop.extent, self.ranges)}
        if isinstance(loop.extent, int):
            return _Loops(ranges, self.extents)
        return _Loops(ranges, {**self.extents, loop.var: loop.extent})

    def bound(self, index: Expr) -> tuple[int, int] | None:
        return bound(simplify(index, self.ranges), self.ranges, self.extents)


def overcompute_guarded_tiles(func: PrimFunc) -> PrimFunc:
    """Drop the guard of every block that writes a compacted tile (`compact_buffers` ran) and is
    guarded only by its iteration variables' domains; clamp its reads instead (module docstring).
    An intermediate of symbolic rows that such a block writes is allocated for the range's largest
    tiles instead (`_rows_padded`), where that lets a guard go."""
    padded = _rows_padded(func)
    if not padded:
        return replace(func, body=_visit(func.body, _Loops(), set(), set()))
    grown = replace(func, allocs=tuple(padded.get(b, b) for b in func.allocs))
    body = map_blocks(grown.body, lambda b: _moved(b, padded))
    relaxed = _visit(body, _Loops(), set(padded.values()), set())
    if _guarded_writers(relaxed, padded.values()) == _guarded_writers(body, padded.values()):
        return replace(func, body=_visit(func.body, _Loops(), set(), set()))  # the size of the call
    return replace(grown, body=relaxed)


def _rows_padded(func: PrimFunc) -> dict[Buffer, Buffer]:
    """Each intermediate of the function whose first dimension alone is symbolic, with as many rows
    as any of its writers' tiles reaches over the range (at least the dimension's largest value),
    where that is bounded and at most PADDED_BYTES. Its writers may then compute every row of their
    last tile: a tuned trace that accumulates straight into the intermediate (no scratch tile)
    kept its guard in the register tile over a range: GPT-2's MLP up-projection at 64 tokens ran
    39.6 ms against 6.5 with the same trace on the static kernel (bench/results/2026-12-02-c.md).
    Only the first dimension grows, so no other element moves."""
    out: dict[Buffer, Buffer] = {}
    for buffer in func.allocs:
        first, rest = buffer.shape[0], buffer.shape[1:]
        if isinstance(first, int) or not all(isinstance(d, int) for d in rest):
            continue
        reach = _rows_written(func.body, buffer, _Loops())
        largest = bound(first, {})
        if reach is None or largest is None:
            continue
        rows = max(reach, largest[1])
        if (
            rows * math.prod(d for d in rest if isinstance(d, int)) * np.dtype(buffer.dtype).itemsize
            <= PADDED_BYTES
        ):
            out[buffer] = replace(buffer, shape=(rows, *rest))
    return out


def _rows_written(stmt: Stmt, buffer: Buffer, loops: _Loops) -> int | None:
    """One past the largest first index any block under `stmt` writes `buffer` at (0: none writes
    it), or None where one cannot be bounded."""
    if isinstance(stmt, Block):
        if stmt.body.buffer != buffer:
            return 0
        bindings = dict(zip((iv.var for iv in stmt.iter_vars), stmt.bindings))
        span = loops.bound(substitute(stmt.body.indices[0], bindings))
        return None if span is None else span[1] + 1
    if isinstance(stmt, For):
        loops = loops.inside(stmt)
    reach = 0
    for kid in stmt.children():
        rows = _rows_written(kid, buffer, loops)
        if rows is None:
            return None
        reach = max(reach, rows)
    return reach


def _moved(block: Block, padded: dict[Buffer, Buffer]) -> Block:
    """The block reading and writing the padded buffers in place of the intermediates."""
    out = map_block_exprs(
        block,
        lambda e: Load(padded[e.buffer], e.indices) if isinstance(e, Load) and e.buffer in padded else None,
    )
    if out.body.buffer in padded:
        new = padded[out.body.buffer]
        out = replace(
            out,
            body=replace(out.body, buffer=new),
            init=replace(out.init, buffer=new) if out.init is not None else None,
        )
    return out


def _guarded_writers(stmt: Stmt, buffers: Iterable[Buffer]) -> list[Expr]:
    written = set(buffers)
    return [b.predicate for b in blocks(stmt) if b.body.buffer in written]


def _visit(stmt: Stmt, loops: _Loops, scratch: set[Buffer], whole: set[Buffer]) -> Stmt:
    """`whole` collects, in program order, the scratch tiles written by unguarded blocks only: every
    element of such a tile holds a value (a clamped row's past the guard)."""
    if isinstance(stmt, Block):
        block = _relaxed(stmt, loops, scratch, whole) or stmt
        if block.body.buffer in scratch:
            (whole.add if block.predicate is TRUE else whole.discard)(block.body.buffer)
        return block
    if isinstance(stmt, For):
        loops = loops.inside(stmt)
    if isinstance(stmt, Allocate) and all(isinstance(d, int) for d in stmt.buffer.shape):
        scratch = scratch | {stmt.buffer}  # a compacted tile, allocated inside the loops that use it
    kids = stmt.children()
    if not kids:
        return stmt
    new = [_visit(k, loops, scratch, whole) for k in kids]
    if not any(n is not k for n, k in zip(new, kids)):
        return stmt
    out = stmt.with_children(new)
    return _vectorized_copy(out) if isinstance(out, For) and isinstance(kids[0], Block) else out


def _vectorized_copy(loop: For) -> For:
    """The innermost loop of an over-computed copy into a tile (a staged panel), vectorized where the
    loop runs along both rows: left to LLVM, its clamped reads `min(j, n - 1)` became gathers (42 in
    one staged matmul, 9.1 ms against 0.9); vectorized, each row is one masked load
    (`codegen_vector._clamped_load`)."""
    block = loop.body
    assert isinstance(block, Block)
    value, store = block.body.value, block.body
    if (
        loop.kind != "serial"
        or not isinstance(loop.extent, int)
        or loop.extent < 4
        or block.predicate is not TRUE
    ):
        return loop
    if not isinstance(value, Load) or not _innermost_along(store.indices, store.buffer, block, loop.var):
        return loop
    if not _innermost_along(value.indices, value.buffer, block, loop.var):
        return loop
    return replace(loop, kind="vectorized")


def _innermost_along(indices: tuple[Expr, ...], buffer: Buffer, block: Block, var: Var) -> bool:
    """Whether the loop `var` steps the last index by one and no other index (a contiguous row)."""
    bindings = dict(zip((iv.var for iv in block.iter_vars), block.bindings))
    *outer, last = (simplify(substitute(i, bindings)) for i in indices)
    inner = last.a if isinstance(last, Binary) and last.op == Op.MIN else last
    return linear(inner).terms.get(var, 0) == 1 and not any(var in free_vars(i) for i in outer)


def _relaxed(block: Block, loops: _Loops, scratch: set[Buffer], whole: set[Buffer]) -> Block | None:
    """The block without its guard and with clamped reads, or None where that is not sound. A read
    of a `whole` tile keeps its indices (the tile holds the clamped rows' values past the guard),
    where they stay inside the tile."""
    written = block.body.buffer
    guards = conjuncts(block.predicate)
    if not guards or written not in scratch:
        return None
    clamps: dict[Var, Expr] = {}
    kept: Expr = TRUE  # the reduction variables' guards: a step past one would add into valid sums
    reducing = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    for guard in guards:
        var = _domain_guard(block, guard)
        if var is not None and var in reducing:
            kept = guard if kept is TRUE else Binary(Op.AND, kept, guard)
            continue
        if var is None or not _written_apart(block, var):
            return None
        extent = next(iv.extent for iv in block.iter_vars if iv.var is var)
        clamps[var] = Binary(Op.MIN, var, simplify(Binary(Op.SUB, extent_expr(extent), const(1))))
    if not clamps or not _own_reads_at_the_write(block) or not _write_in_bounds(block, loops):
        return None
    kept_reads = {ld.buffer for ld in block_loads(block) if ld.buffer in whole and ld.buffer != written}
    if any(not _read_in_bounds(block, ld, loops) for ld in block_loads(block) if ld.buffer in kept_reads):
        return None
    if _clamps_a_tile_read(block, clamps.keys(), scratch - kept_reads):
        return None

    store = block.body

    def clamp(e: Expr) -> Expr | None:
        if isinstance(e, Var) and e in clamps:
            return clamps[e]
        if isinstance(e, Load) and e.buffer == written:
            return Load(written, store.indices)  # the accumulator, where this point writes it
        if isinstance(e, Load) and e.buffer in kept_reads:  # a whole tile, read where it was
            return Load(e.buffer, tuple(map_expr(i, unclamp) for i in e.indices))
        return None

    clamped_by = {id(c): var for var, c in clamps.items()}  # each clamp is one object, shared

    def unclamp(e: Expr) -> Expr | None:
        return clamped_by.get(id(e))

    def clamped(s: BufferStore) -> BufferStore:
        return replace(s, value=map_expr(s.value, clamp))

    return replace(
        block,
        body=clamped(store),
        init=clamped(block.init) if block.init is not None else None,
        predicate=kept,
    )


def _domain_guard(block: Block, guard: Expr) -> Var | None:
    """The iteration variable whose domain `guard` is (`binding < extent`), if it is one."""
    if not (isinstance(guard, Binary) and guard.op == Op.LT):
        return None
    for iv, binding in zip(block.iter_vars, block.bindings):
        if structural_equal(guard.a, binding) and structural_equal(guard.b, extent_expr(iv.extent)):
            return iv.var
    return None


def _written_apart(block: Block, var: Var) -> bool:
    """Each value of the spatial variable `var` writes its own elements: some dimension of the store
    is linear in it and in no other iteration variable. (A guarded reduction variable is not: its
    steps past the guard would add into the valid elements.)"""
    kinds = {iv.var: iv.kind for iv in block.iter_vars}
    if kinds[var] != "S":
        return False
    for index in block.body.indices:
        form = linear(index)
        others = [term for term in form.terms if term != var]
        if form.terms.get(var, 0) != 0 and not any(free_vars(term) & kinds.keys() for term in others):
            return True
    return False


def _clamps_a_tile_read(block: Block, clamped: Iterable[Var], scratch: set[Buffer]) -> bool:
    """Whether the block reads another scratch tile along a clamped variable. A clamped index is a
    valid element of the whole buffer, but not always of the tile: where a split leaves a tile with
    no valid row at all (10 rows in tiles [4, 1, 4]: rows 12 to 15), the last valid row lies in an
    earlier tile, outside this one's compacted buffer."""
    variables = set(clamped)
    return any(
        ld.buffer in scratch and any(free_vars(i) & variables for i in ld.indices)
        for ld in block_loads(block)
        if ld.buffer != block.body.buffer
    )


def _own_reads_at_the_write(block: Block) -> bool:
    """The block reads the buffer it writes only where it writes it (an accumulation): a read of
    another element could meet a value computed past the guard."""
    store = block.body
    return all(
        all(structural_equal(a, b) for a, b in zip(ld.indices, store.indices))
        for ld in block_loads(block)
        if ld.buffer == store.buffer
    )


def _write_in_bounds(block: Block, loops: _Loops) -> bool:
    """Every element the unguarded block writes lies inside its (static, compacted) buffer."""
    return _in_bounds(block, block.body.indices, block.body.buffer, loops)


def _read_in_bounds(block: Block, load: Load, loops: _Loops) -> bool:
    """Every element the unguarded block reads of a tile, unclamped, lies inside the tile."""
    return _in_bounds(block, load.indices, load.buffer, loops)


def _in_bounds(block: Block, indices: Iterable[Expr], buffer: Buffer, loops: _Loops) -> bool:
    bindings = dict(zip((iv.var for iv in block.iter_vars), block.bindings))
    for index, dim in zip(indices, buffer.shape):
        span = loops.bound(substitute(index, bindings))
        if span is None or span[0] < 0 or span[1] >= dim:
            return False
    return True
