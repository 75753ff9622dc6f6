"""Explicit vector code for `vectorized` loops.

LLVM's loop vectorizer gives up on many loops we care about (measured: a "TVM-like" accumulator
loop runs anywhere from 3 to 188 GFLOPS depending on tile sizes). So a vectorized loop whose body is
straight-line stores is emitted here as operations on `<lanes x T>` values: contiguous accesses
become vector loads/stores (with AVX-512, a load of an odd number of lanes is one masked load),
loads with a small stride (a stride-2 convolution or pooling window along its row) one masked load
of the span and a shuffle, loop-invariant values are computed once as
scalars and broadcast, and anything else is assembled lane by lane. LLVM then splits wide vectors
into machine registers (a 64-lane float vector is four zmm registers on AVX-512).

A loop is emitted this way only when that is provably the same as running it serially: every store
is contiguous in the loop variable, and a buffer that is stored is read only at the element the same
iteration stores. Otherwise the loop stays scalar with vectorize metadata, and LLVM decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ll

from compiler.arith import bound, ceil_div, conjuncts, linear, simplify
from compiler.ir import (
    Binary,
    Buffer,
    BufferStore,
    Cast,
    Expr,
    For,
    IfThenElse,
    Load,
    Select,
    SeqStmt,
    Stmt,
    Unary,
    Var,
    const,
    structural_equal,
)
from compiler.llvm_ops import (
    I32,
    I64,
    MEMORY_TYPES,
    align,
    cast_value,
    from_memory,
    intrinsic_suffix,
    to_memory,
)
from compiler.ops import Op
from compiler.visit import free_vars, guarded_loads, loads, substitute, walk_stmt

if TYPE_CHECKING:
    from compiler.codegen import CodeGen
    from compiler.target import Target

MAX_LANES = 64
MAX_LOAD_STRIDE = 4  # a longer stride wastes most of a masked load; such lanes are gathered one by one


def flat_index(buf: Buffer, indices: tuple[Expr, ...]) -> Expr:
    """Row-major element offset as one simplified expression."""
    flat: Expr = const(0)
    for dim, idx in zip(buf.shape, indices):
        flat = Binary(Op.ADD, Binary(Op.MUL, flat, const(dim) if isinstance(dim, int) else dim), idx)
    return simplify(flat)


def stride_in(expr: Expr, var: Var) -> int | None:
    """The constant step of `expr` per unit of `var`, or None when `var` enters non-linearly."""
    lin = linear(expr)
    coef = lin.terms.get(var, 0)
    for atom in lin.terms:
        if not structural_equal(atom, var) and var in free_vars(atom):
            return None
    return coef


def can_vectorize(loop: For) -> bool:
    """Whether the loop body can be emitted as vector operations with serial semantics."""
    stores: dict[Buffer, Expr] = {}
    exprs: list[Expr] = []
    for s in walk_stmt(loop.body):
        if isinstance(s, BufferStore):
            flat = flat_index(s.buffer, s.indices)
            if stride_in(flat, loop.var) != 1 or not structural_equal(stores.get(s.buffer, flat), flat):
                return False
            stores[s.buffer] = flat
            exprs += [s.value, *s.indices]
        elif isinstance(s, IfThenElse):
            if loop.var in free_vars(s.cond):
                return False
            exprs.append(s.cond)
        elif not isinstance(s, SeqStmt):
            return False
    for e in exprs:
        for ld in loads(e):
            if ld.buffer in stores and not structural_equal(
                flat_index(ld.buffer, ld.indices), stores[ld.buffer]
            ):
                return False
    return True


def tail_as_extent(loop: For) -> tuple[For, Expr | None] | None:
    """A vectorized loop whose body is one `if start + v < end` (a split's last partial tile over a
    run-time extent: v the loop variable, start and end free of it) as the loop over min(extent,
    end - start) iterations, which vectorizes with a run-time extent, and the guard's other
    conditions (None when there are none), which do not change along the loop."""
    body = loop.body
    if not isinstance(loop.extent, int) or not isinstance(body, IfThenElse) or body.else_case is not None:
        return None
    tail = [c for c in conjuncts(body.cond) if loop.var in free_vars(c)]
    rest = [c for c in conjuncts(body.cond) if loop.var not in free_vars(c)]
    if len(tail) != 1 or not isinstance(c := tail[0], Binary) or c.op != Op.LT:
        return None
    if loop.var in free_vars(c.b) or stride_in(c.a, loop.var) != 1:
        return None
    start = simplify(substitute(c.a, {loop.var: const(0)}))
    count = Binary(Op.MIN, const(loop.extent), Binary(Op.MAX, Binary(Op.SUB, c.b, start), const(0)))
    guard = None
    for cond in rest:
        guard = cond if guard is None else Binary(Op.AND, guard, cond)
    return replace(loop, extent=count, body=body.then_case), guard


def vector_pieces(extent: int, register: int) -> list[int]:
    """The vectors a vectorized loop of `extent` iterations is emitted as, with `register` lanes per
    machine register: full chunks of a power-of-two number of lanes (up to MAX_LANES), then the
    remainder, one vector where it is narrower than a register, else the largest power of two of it
    and so on.

    Power-of-two vectors split evenly into machine registers; LLVM widens a size such as 24 lanes
    with masked or shuffled lanes, measured 5-15x slower (a 4x24 matmul register tile ran at 18-38
    GFLOPS where 4x16 ran at 174-216, bench/results/2026-11-23-a.md). A remainder narrower than one register
    is different: as one vector, it is one register wide (7 lanes in 8, 12 in 16), where one vector per
    set bit of its size makes three narrow operations of 4, 2 and 1 lanes (7x7 and 14x14 convs: 1.6-2.3x
    slower, bench/results/2026-11-24-c.md). Only its stores are split, and its loads without AVX-512
    (`_masked_width`); they are few once LLVM keeps an accumulator in a register."""
    if extent < register:
        return [extent]
    lanes = 1 << (min(extent, MAX_LANES).bit_length() - 1)
    chunks, rest = divmod(extent, lanes)
    pieces = [lanes] * chunks
    while rest:
        piece = rest if rest < register else 1 << (rest.bit_length() - 1)
        pieces.append(piece)
        rest -= piece
    return pieces


def emit_vector_loop(cg: CodeGen, loop: For, largest: int | None = None) -> None:
    """The loop as `vector_pieces`: its full chunks in a loop (or one vector), then the remainder.
    `largest` bounds a run-time extent whose own bound is unknown (`tail_as_extent`'s)."""
    if not isinstance(loop.extent, int):
        _emit_symbolic_vector_loop(cg, loop, largest)
        return
    pieces = vector_pieces(loop.extent, cg.target.vector_lanes("float32"))
    chunks = pieces.count(pieces[0])  # the remainder's pieces are all narrower
    if chunks == 1:
        _Lanes(cg, loop, pieces[0]).stmt_at(I64(0), loop.body)
    else:
        chunk = For(Var(f"{loop.var.name}.chunk"), chunks, SeqStmt(()))

        def body() -> None:
            base = cg.builder.mul(cg.vars[chunk.var], I64(pieces[0]))
            _Lanes(cg, loop, pieces[0]).stmt_at(base, loop.body)

        cg.counted_loop(chunk, I64(0), I64(chunks), body)
    start = chunks * pieces[0]
    for piece in pieces[chunks:]:
        _Lanes(cg, loop, piece).stmt_at(I64(start), loop.body)
        start += piece


def _emit_symbolic_vector_loop(cg: CodeGen, loop: For, largest: int | None) -> None:
    """A run-time extent: chunks of up to MAX_LANES lanes (as `vector_pieces` takes for a static
    extent) in a loop of extent // lanes, then one register's lanes at a time, then a scalar loop."""
    from compiler.codegen import extent_value

    assert not isinstance(loop.extent, int)
    hi = bound(loop.extent, {})
    if largest is None:
        assert hi is not None  # lowering checked that every extent is bounded
        largest = hi[1]
    register = cg.target.vector_lanes("float32")
    widest = 1 << (min(largest, MAX_LANES).bit_length() - 1)
    b = cg.builder
    end = extent_value(cg, loop.extent)
    start: ll.Value = I64(0)
    for lanes in sorted({widest, min(widest, register)}, reverse=True):
        chunk = For(Var(f"{loop.var.name}.chunk{lanes}"), 0, SeqStmt(()))
        count = b.sdiv(b.sub(end, start), I64(lanes))

        def body(chunk: For = chunk, lanes: int = lanes, start: ll.Value = start) -> None:
            base = b.add(start, b.mul(cg.vars[chunk.var], I64(lanes)))
            _Lanes(cg, loop, lanes).stmt_at(base, loop.body)

        cg.counted_loop(chunk, I64(0), count, body)
        start = b.add(start, b.mul(count, I64(lanes)))
    cg.counted_loop(For(loop.var, 0, loop.body), start, end)


class _Lanes:
    """Emits the body of a vectorized loop for `lanes` consecutive iterations starting at `base`."""

    def __init__(self, cg: CodeGen, loop: For, lanes: int) -> None:
        self.cg, self.loop, self.lanes = cg, loop, lanes
        self.masked_width = _masked_width(cg, lanes)
        # the buffers the loop stores, which `_load` never loads masked (walked only where it would)
        stores = walk_stmt(loop.body) if self.masked_width else ()
        self.stored = {st.buffer for st in stores if isinstance(st, BufferStore)}

    def stmt_at(self, base: ll.Value, stmt: Stmt) -> None:
        self.base = base
        self.stmt(stmt)
        self.cg.vars.pop(self.loop.var, None)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, IfThenElse):
            with self.cg.builder.if_else(self.scalar(s.cond)) as (then, otherwise):
                with then:
                    self.stmt(s.then_case)
                with otherwise:
                    if s.else_case is not None:
                        self.stmt(s.else_case)
        else:
            assert isinstance(s, BufferStore)
            value = to_memory(self.cg.builder, s.buffer.dtype, self.vector(s.value))
            self.cg.builder.store(
                value, self._pointer(s.buffer, s.indices, value.type), align=align(s.buffer.dtype)
            )

    def scalar(self, e: Expr) -> ll.Value:
        self.cg.vars[self.loop.var] = self.base
        return self.cg.expr(e)

    def vector(self, e: Expr) -> ll.Value:
        """`e` for every lane, as a vector (invariant values are broadcast)."""
        if self.loop.var not in free_vars(e):
            return self.splat(self.scalar(e))
        emit = _EMITTERS.get(type(e))
        value = emit(self, e) if emit is not None else None
        return value if value is not None else self.per_lane(e)

    def splat(self, value: ll.Value) -> ll.Value:
        b = self.cg.builder
        vec_ty = ll.VectorType(value.type, self.lanes)
        one = b.insert_element(ll.Constant(vec_ty, ll.Undefined), value, I32(0))
        return b.shuffle_vector(
            one,
            ll.Constant(vec_ty, ll.Undefined),
            ll.Constant(ll.VectorType(ll.IntType(32), self.lanes), [0] * self.lanes),
        )

    def per_lane(self, e: Expr) -> ll.Value:
        """Fallback: compute each lane as a scalar and assemble the vector."""
        b = self.cg.builder
        lanes = []
        for k in range(self.lanes):
            self.cg.vars[self.loop.var] = b.add(self.base, I64(k))
            lanes.append(self.cg.expr(e))
        vec = ll.Constant(ll.VectorType(lanes[0].type, self.lanes), ll.Undefined)
        for k, v in enumerate(lanes):
            vec = b.insert_element(vec, v, I32(k))
        return vec

    def _pointer(self, buf: Buffer, indices: tuple[Expr, ...], vec_ty: ll.Type) -> ll.Value:
        self.cg.vars[self.loop.var] = self.base
        elem_ptr = self.cg.address(buf, indices)
        return self.cg.builder.bitcast(elem_ptr, ll.PointerType(vec_ty))


def _var(v: _Lanes, e: Var) -> ll.Value:
    ramp = ll.Constant(ll.VectorType(ll.IntType(64), v.lanes), list(range(v.lanes)))
    return v.cg.builder.add(v.splat(v.base), ramp)


def _load(v: _Lanes, e: Load) -> ll.Value | None:
    loaded = _load_memory(v, e)
    return from_memory(v.cg.builder, e.buffer.dtype, loaded) if loaded is not None else None


def _load_memory(v: _Lanes, e: Load) -> ll.Value | None:
    """The lanes' elements as memory holds them. A buffer the loop also stores (a register tile's
    accumulator) is never loaded masked: LLVM keeps it in registers only through plain loads and
    stores (masked, it went through the stack)."""
    stride = stride_in(flat_index(e.buffer, e.indices), v.loop.var)
    if stride is None and (clamped := _clamped_load(v, e)) is not None:
        return clamped
    if stride == 1 and v.masked_width and e.buffer not in v.stored:
        return _masked_load(v, e)
    if stride == 1:
        vec_ty = ll.VectorType(MEMORY_TYPES[e.dtype], v.lanes)
        return v.cg.builder.load(v._pointer(e.buffer, e.indices, vec_ty), align=align(e.buffer.dtype))
    if stride is not None and 2 <= stride <= MAX_LOAD_STRIDE:
        return _strided_load(v, e, stride)
    return None


def _clamped_load(v: _Lanes, e: Load) -> ll.Value | None:
    """A contiguous row read at `min(start + v, last)` (a tile over-computed past a run-time extent,
    `compiler.overcompute`): one masked load of the lanes up to `last`, the lanes past it the
    element at `last`, as the clamp reads them. Lane by lane, a matmul's row of 32 such lanes ran 5x
    slower."""
    clamps = [k for k, i in enumerate(e.indices) if isinstance(i, Binary) and i.op == Op.MIN]
    if len(clamps) != 1:
        return None
    k = clamps[0]
    clamp = e.indices[k]
    assert isinstance(clamp, Binary)
    start, last = clamp.a, clamp.b
    unclamped = e.indices[:k] + (start,) + e.indices[k + 1 :]
    if v.loop.var in free_vars(last) or stride_in(flat_index(e.buffer, unclamped), v.loop.var) != 1:
        return None
    b = v.cg.builder
    span_ty = ll.VectorType(MEMORY_TYPES[e.dtype], v.lanes)
    ramp = ll.Constant(ll.VectorType(I64, v.lanes), list(range(v.lanes)))
    lanes = b.add(v.splat(v.scalar(start)), ramp)
    mask = b.icmp_signed("<=", lanes, v.splat(v.scalar(last)))
    at_last = e.indices[:k] + (last,) + e.indices[k + 1 :]
    v.cg.vars[v.loop.var] = v.base
    beyond = v.splat(b.load(v.cg.address(e.buffer, at_last), align=align(e.buffer.dtype)))
    masked_load = v.cg.declare(
        f"llvm.masked.load.{intrinsic_suffix(span_ty)}.p0",
        span_ty,
        [ll.PointerType(span_ty), I32, mask.type, span_ty],
    )
    pointer = v._pointer(e.buffer, e.indices, span_ty)  # at min(start, last): in bounds
    return b.call(masked_load, [pointer, I32(align(e.buffer.dtype)), mask, beyond])


def masks_odd_rows(target: Target) -> bool:
    """Whether a contiguous load of an odd number of lanes is one masked load on `target`. LLVM
    splits a plain load of 14 lanes into loads of 8, 4 and 2 and two inserts (a 14x14 conv's input
    rows in its innermost loop); with AVX-512's masked moves it is one load whose mask stops at the
    last lane, so nothing past the row is read. AVX2's masked load holds its mask in a vector
    register, one of the 16 a register tile fills: measured 0.77-1.38x by layer
    (bench/results/2026-11-25-c.md, eleventh stop), so AVX2 keeps the split loads."""
    return "avx512f" in target.feature_set


def row_loads(extent: int, register: int, masked: bool) -> int:
    """Instructions that load a contiguous row of a vectorized loop of `extent` (`vector_pieces`):
    one per register, except that a split odd piece is a load per set bit of its lanes and an insert
    between each two (6 lanes: 4 + 2 and an insert)."""
    return sum(
        ceil_div(piece, register) if masked or piece & (piece - 1) == 0 else 2 * piece.bit_count() - 1
        for piece in vector_pieces(extent, register)
    )


def _masked_width(cg: CodeGen, lanes: int) -> int:
    """The power-of-two width a contiguous load of `lanes` elements is made as, masked, or 0 for a
    plain load (`masks_odd_rows`)."""
    if lanes & (lanes - 1) == 0 or not masks_odd_rows(cg.target):
        return 0
    return 1 << lanes.bit_length()


def _masked_load(v: _Lanes, e: Load) -> ll.Value:
    """The lanes' contiguous elements, as one masked load of `masked_width` lanes and a shuffle."""
    width = v.masked_width
    wide = _load_span(v, e, width, [int(k < v.lanes) for k in range(width)])
    first = ll.Constant(ll.VectorType(ll.IntType(32), v.lanes), list(range(v.lanes)))
    return v.cg.builder.shuffle_vector(wide, ll.Constant(wide.type, ll.Undefined), first)


def _strided_load(v: _Lanes, e: Load, stride: int) -> ll.Value:
    """Every `stride`-th element of the span the lanes cover: one masked load of the span (the mask
    stops at the last lane's element, so nothing past the buffer is read), then a shuffle picking
    the lanes. Lane by lane, a stride-2 depthwise conv's row ran at 7 GFLOPS."""
    width = v.lanes * stride
    span = _load_span(v, e, width, [int(k <= (v.lanes - 1) * stride) for k in range(width)])
    picks = ll.Constant(ll.VectorType(ll.IntType(32), v.lanes), [k * stride for k in range(v.lanes)])
    return v.cg.builder.shuffle_vector(span, ll.Constant(span.type, ll.Undefined), picks)


def _load_span(v: _Lanes, e: Load, width: int, mask: list[int]) -> ll.Value:
    """`width` elements from `e`'s address on, where `mask` is 1 (LLVM's masked load: a masked-off
    element is never read, so a span may end at the buffer's last element)."""
    span_ty = ll.VectorType(MEMORY_TYPES[e.dtype], width)
    mask_value = ll.Constant(ll.VectorType(ll.IntType(1), width), mask)
    pointer = v._pointer(e.buffer, e.indices, span_ty)
    masked_load = v.cg.declare(
        f"llvm.masked.load.{intrinsic_suffix(span_ty)}.p0",
        span_ty,
        [pointer.type, I32, mask_value.type, span_ty],
    )
    undefined = ll.Constant(span_ty, ll.Undefined)
    return v.cg.builder.call(masked_load, [pointer, I32(align(e.buffer.dtype)), mask_value, undefined])


def _op(v: _Lanes, e: Binary | Unary) -> ll.Value | None:
    """On vectors where the op declares it can be; otherwise lane by lane."""
    if not e.op.spec.vectorizes:
        return None
    return e.op.spec.emit(v.cg, e.a.dtype, [v.vector(k) for k in e.children()])


def _select(v: _Lanes, e: Select) -> ll.Value | None:
    if guarded_loads(e):
        return None  # lane by lane, so a load runs only where its side is chosen
    return v.cg.builder.select(v.vector(e.cond), v.vector(e.true_value), v.vector(e.false_value))


def _cast(v: _Lanes, e: Cast) -> ll.Value | None:
    if "bool" in (e.dtype, e.value.dtype):
        return None
    return cast_value(v.cg, e.value.dtype, e.dtype, v.vector(e.value))


# Each emitter takes the node kind it is keyed by, hence Any for the node; None means lane by lane.
_EMITTERS: dict[type[Expr], Callable[[_Lanes, Any], ll.Value | None]] = {
    Var: _var,
    Load: _load,
    Binary: _op,
    Unary: _op,
    Select: _select,
    Cast: _cast,
}
