"""Buffer compaction: an intermediate buffer used only under one loop is allocated inside that loop,
shrunk to the region one iteration touches.

This is what turns schedules into fast code on CPUs: `cache_read` + `compute_at` of a matmul operand
becomes a small packed panel that is contiguous and stays in cache, and `cache_write` +
`reverse_compute_at` becomes a tile of accumulators small enough to live on the stack (and in
registers). It also makes buffers under a parallel loop private to each thread.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.arith import bound, extent_range, simplify, symbolic_range
from compiler.ir import Allocate, Binary, Block, Buffer, Expr, For, Load, PrimFunc, const
from compiler.ops import Op
from compiler.schedule.tree import Path, get, loops_above, nodes, set_at
from compiler.visit import block_loads, map_block_exprs, map_blocks, substitute

Region = list[tuple[Expr, Expr]]


def compact_buffers(func: PrimFunc) -> PrimFunc:
    """Move every intermediate buffer to the innermost loop enclosing all its uses, compacted."""
    for buf in func.allocs:
        compacted = _compact(func, buf)
        if compacted is not None:
            func = compacted
    return func


def _uses(func: PrimFunc, buf: Buffer) -> list[tuple[Path, Block]]:
    return [
        (p, s)
        for p, s in nodes(func.body)
        if isinstance(s, Block) and (s.body.buffer == buf or any(ld.buffer == buf for ld in block_loads(s)))
    ]


def _scope(func: PrimFunc, paths: list[Path]) -> Path | None:
    """The innermost loop enclosing every path, or None when only the function body does."""
    common = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n] == p[n]:
            n += 1
        common = common[:n]
    deepest = min(len(common), min(len(p) for p in paths) - 1)
    for n in range(deepest, -1, -1):
        if isinstance(get(func.body, common[:n]), For):
            return common[:n]  # the empty path when the function body itself is the loop
    return None


def _accesses(block: Block, buf: Buffer) -> list[tuple[Expr, ...]]:
    out = [ld.indices for ld in block_loads(block) if ld.buffer == buf]
    if block.body.buffer == buf:
        out.append(block.body.indices)
    return out


def _compact(func: PrimFunc, buf: Buffer) -> PrimFunc | None:
    """Allocate `buf` inside the innermost loop around all its uses, shrunk to one iteration's
    region; when the region cannot be bounded it keeps its full shape (still private to the loop,
    which parallel loops rely on: see schedule.loop_transform.set_kind)."""
    uses = _uses(func, buf)
    scope = _scope(func, [p for p, _ in uses]) if uses else None
    if scope is None:
        return None
    small, offsets = _shrink(func, scope, uses, buf)
    loop = get(func.body, scope)
    assert isinstance(loop, For)
    body = map_blocks(loop.body, lambda b: _rebase(b, buf, small, offsets))
    new_body = set_at(func.body, scope, replace(loop, body=Allocate(small, body)))
    assert new_body is not None
    return replace(func, body=new_body, allocs=tuple(b for b in func.allocs if b != buf))


def _shrink(
    func: PrimFunc, scope: Path, uses: list[tuple[Path, Block]], buf: Buffer
) -> tuple[Buffer, list[Expr]]:
    """The compacted buffer and the offset of its first element in the original, per dimension."""
    unchanged: tuple[Buffer, list[Expr]] = buf, [const(0) for _ in buf.shape]
    region = _region(func, scope, uses, buf)
    if region is None:
        return unchanged
    outer = {lp.var: extent_range(lp.extent) for _, lp in loops_above(func.body, scope + (0,))}
    shape = []
    for lo, hi in region:
        ext = bound(simplify(Binary(Op.ADD, Binary(Op.SUB, hi, lo), const(1)), outer), outer)
        if ext is None:
            return unchanged
        shape.append(max(1, ext[1]))
    return replace(buf, shape=tuple(shape)), [lo for lo, _ in region]


def _region(func: PrimFunc, scope: Path, uses: list[tuple[Path, Block]], buf: Buffer) -> Region | None:
    """The union of the elements one iteration of the scope loop touches, per dimension."""
    region: Region | None = None
    for path, block in uses:
        inner = {
            lp.var: extent_range(lp.extent)
            for p, lp in loops_above(func.body, path)
            if len(p) >= len(scope) + 1
        }
        sub = dict(zip((iv.var for iv in block.iter_vars), block.bindings))
        for indices in _accesses(block, buf):
            ranges: Region = []
            for i in indices:
                r = symbolic_range(substitute(i, sub), inner)
                if r is None:
                    return None
                ranges.append(r)
            if region is None:
                region = ranges
            else:
                region = [
                    (simplify(Binary(Op.MIN, a[0], b[0])), simplify(Binary(Op.MAX, a[1], b[1])))
                    for a, b in zip(region, ranges)
                ]
    return region


def _rebase(block: Block, buf: Buffer, small: Buffer, offsets: list[Expr]) -> Block:
    """Point the block's accesses of `buf` at the compacted buffer (index minus region start)."""

    def shift(indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return tuple(simplify(Binary(Op.SUB, i, o)) for i, o in zip(indices, offsets))

    def fn(e: Expr) -> Expr | None:
        return Load(small, shift(e.indices)) if isinstance(e, Load) and e.buffer == buf else None

    out = map_block_exprs(block, fn)
    if out.body.buffer == buf:
        out = replace(
            out,
            body=replace(out.body, buffer=small, indices=shift(out.body.indices)),
            init=replace(out.init, buffer=small, indices=shift(out.init.indices)) if out.init else None,
        )
    return out
