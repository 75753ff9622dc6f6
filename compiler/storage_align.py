"""Lowering of `storage_align`: a buffer whose writing block asks for aligned strides is flattened to
one dimension with those strides (TVM's `buffer_dim_align`).

It runs after compaction, when each intermediate has the shape it is allocated with (a packed panel
of one tile, not the whole operand): the request is about that allocation's rows. A stride that is
a multiple of a large power of two puts every row of a panel in the same few cache sets; padding it
to `offset` modulo `factor` spreads them.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.arith import largest, simplify
from compiler.ir import Allocate, Binary, Buffer, Expr, PrimFunc, const
from compiler.ops import Op
from compiler.schedule.buffer_layout import ALIGN_KEY, parse_alignment, rebuffer
from compiler.visit import blocks, walk_stmt


def align_storage(func: PrimFunc) -> PrimFunc:
    """Every buffer with alignment requests flattened to its aligned strides."""
    requests = {
        b.body.buffer.name: dict(parse_alignment(str(dict(b.annotations)[ALIGN_KEY])))
        for b in blocks(func.body)
        if ALIGN_KEY in dict(b.annotations)
    }
    if not requests:
        return func
    allocated = [s.buffer for s in walk_stmt(func.body) if isinstance(s, Allocate)] + list(func.allocs)
    for buf in allocated:
        if buf.name in requests and len(buf.shape) > 1:
            func = _flatten(func, buf, aligned_strides(buf, requests[buf.name]))
    return func


def aligned_strides(buf: Buffer, requests: dict[int, tuple[int, int]]) -> tuple[int, ...]:
    """Row-major strides (in elements, at the shape's largest values) with each requested axis's
    stride raised to the next value that is `offset` modulo `factor`."""
    strides = [1] * len(buf.shape)
    for axis in range(len(buf.shape) - 2, -1, -1):
        stride = strides[axis + 1] * largest(buf.shape[axis + 1])
        if axis in requests:
            factor, offset = requests[axis]
            stride += (offset - stride) % factor
        strides[axis] = stride
    return tuple(strides)


def _flatten(func: PrimFunc, buf: Buffer, strides: tuple[int, ...]) -> PrimFunc:
    size = strides[0] * largest(buf.shape[0])
    flat = replace(buf, shape=(size,))

    def index(indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        total: Expr = const(0)
        for i, stride in zip(indices, strides):
            total = Binary(Op.ADD, total, Binary(Op.MUL, i, const(stride)))
        return (simplify(total),)

    allocs = tuple(flat if a == buf else a for a in func.allocs)
    return replace(func, body=rebuffer(func.body, buf, flat, index), allocs=allocs)
