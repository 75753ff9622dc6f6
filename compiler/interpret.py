"""A numpy interpreter of unscheduled PrimFuncs: the reference of a workload that arrives as data (a
fused graph kernel), computed from the function itself.

Each block is evaluated at once over its whole iteration domain, one box of the domain at a time so
memory stays bounded: iteration variables become broadcast index grids, loads become strided views of
the buffers where the indices are affine (gathers where they are not), selects become `np.where`, and
a reduction combines the partial reductions of its boxes. Every op is computed by its numpy function
from `compiler.ops`, so a new op needs nothing here.

"Unscheduled" is what `te.create_prim_func` makes: each block in a nest of loops that bind its
iteration variables one to one. Spatial and reduce iterations are independent (what their kinds
promise), so they are evaluated all at once; ordered (scan) iteration variables, and loops around
several statements, are iterated in order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.arith import simplify
from compiler.dtypes import FLOAT_DTYPES, convert
from compiler.ir import (
    TRUE,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Cast,
    Const,
    Expr,
    For,
    IterVar,
    Load,
    PrimFunc,
    Select,
    SeqStmt,
    SizeVar,
    Stmt,
    Unary,
    Var,
    const,
    static_dim,
    static_shape,
)
from compiler.ops import Op
from compiler.printer import expr_str
from compiler.specialize import specialize
from compiler.visit import substitute, walk_stmt

# Elements of one temporary (16 MiB at 8 bytes): an expression holds a few at once, so evaluating a
# block stays within about 100 MB however large its domain.
TEMP_ELEMENTS = 2 << 20
COMBINERS = (Op.ADD, Op.MUL, Op.MAX, Op.MIN)

Value = Any  # an ndarray of the box's rank (broadcastable to it), or a numpy scalar


class InterpretError(ValueError):
    """A function this interpreter does not evaluate (not unscheduled), or a read out of bounds."""


def interpret(func: PrimFunc, *inputs: np.ndarray) -> list[np.ndarray]:
    """Run `func` on `inputs`, its first len(inputs) parameters, and return the other parameters (its
    outputs). Outputs and intermediates start as NaN (0 for ints), so what is never written shows."""
    if len(inputs) >= len(func.params):
        raise InterpretError(f"{func.name} has {len(func.params)} parameters, given {len(inputs)} inputs")
    if func.size_vars:  # the static function this call computes
        func = specialize(func, _bind_size_vars(func, inputs))
    written = {s.body.buffer for s in walk_stmt(func.body) if isinstance(s, Block)}
    arrays: dict[Buffer, np.ndarray] = {}
    for b, x in zip(func.params, inputs):
        a = np.asarray(x)
        if a.shape != b.shape or a.dtype != np.dtype(b.dtype):
            raise InterpretError(f"{b.name}: expected {b.dtype} {b.shape}, got {a.dtype} {a.shape}")
        arrays[b] = np.array(a) if b in written else np.ascontiguousarray(a)  # never the caller's
    for b in func.params[len(inputs) :] + func.allocs:
        arrays[b] = np.full(
            static_shape(b.shape, "the interpreter"), np.nan if b.dtype in FLOAT_DTYPES else 0, b.dtype
        )
    run(func, arrays)
    return [arrays[b] for b in func.params[len(inputs) :]]


def _bind_size_vars(func: PrimFunc, inputs: tuple[np.ndarray, ...]) -> dict[SizeVar, int]:
    """Each size var's value, from the first input with that dimension (the specialized function's
    own shape check then catches an input that disagrees)."""
    values: dict[SizeVar, int] = {}
    for b, x in zip(func.params, inputs):
        shape = np.shape(x)
        if len(shape) != len(b.shape):
            raise InterpretError(f"{b.name}: expected rank {len(b.shape)}, got shape {shape}")
        for d, n in zip(b.shape, shape):
            if isinstance(d, SizeVar):
                values.setdefault(d, int(n))
    unbound = [v.name for v in func.size_vars if v not in values]
    if unbound:
        raise InterpretError(f"{func.name}: no input gives the size var(s) {', '.join(unbound)}")
    return values


def run(func: PrimFunc, arrays: dict[Buffer, np.ndarray], boxes: Mapping[str, Box] | None = None) -> None:
    """Evaluate `func`'s body into `arrays`, which holds every buffer. A block named in `boxes` is
    evaluated over that box of its spatial variables only ((first, count) per variable, in order; a
    count of 0: not at all), for a caller that needs only part of the outputs
    (`compiler.workloads.probe`)."""
    with np.errstate(all="ignore"):  # log(-1) is NaN in the kernel too; warnings would only be noise
        _run(func.body, arrays, {}, boxes or {})


def reduction_parts(block: Block) -> tuple[Op, Expr] | None:
    """(combiner, value) of a block whose body is `out[idx] = combiner(out[idx], value)` (te's form of
    a reduction), or None."""
    body = block.body
    v = body.value
    if not (isinstance(v, Binary) and v.op in COMBINERS and isinstance(v.a, Load)):
        return None
    same = v.a.buffer == body.buffer and len(v.a.indices) == len(body.indices)
    if not (same and all(bool(a == b) for a, b in zip(v.a.indices, body.indices))):
        return None
    return v.op, v.b


def _run(s: Stmt, arrays: dict[Buffer, np.ndarray], env: dict[Var, int], boxes: Mapping[str, Box]) -> None:
    if isinstance(s, SeqStmt):
        for k in s.stmts:
            _run(k, arrays, env, boxes)
        return
    if not isinstance(s, (For, Block)):
        raise InterpretError(f"{type(s).__name__} is not part of an unscheduled PrimFunc")
    loops: list[For] = []
    leaf: Stmt = s
    while isinstance(leaf, For):
        loops.append(leaf)
        leaf = leaf.body
    if isinstance(leaf, Block):
        _nest(loops, leaf, arrays, env, boxes.get(leaf.name))
        return
    assert isinstance(s, For)  # a loop around several statements: its iterations in order
    for value in range(static_dim(s.extent, "the interpreter")):
        _run(s.body, arrays, {**env, s.var: value}, boxes)


def _nest(
    loops: list[For], block: Block, arrays: dict[Buffer, np.ndarray], env: dict[Var, int], box: Box | None
) -> None:
    """Evaluate `block` over the loops around it: an iteration variable bound to a loop of its own is
    an axis of the evaluated domain; the others (scan steps) take the values of their bindings, with
    the loops they use iterated in order. `box` restricts the spatial axes of a block without scan
    steps (None: all of them)."""
    if not bool(block.predicate == TRUE):
        raise InterpretError(f"block {block.name} has a predicate: it is not an unscheduled block")
    by_var = {loop.var: loop for loop in loops}
    spatial: list[IterVar] = []
    reduce: list[IterVar] = []
    scalar: list[tuple[IterVar, Expr]] = []
    used: set[Var] = set()
    for iv, binding in zip(block.iter_vars, block.bindings):
        loop = by_var.get(binding) if isinstance(binding, Var) else None
        if iv.kind != "O" and loop is not None and loop.var not in used and loop.extent == iv.extent:
            used.add(loop.var)
            (reduce if iv.kind == "R" else spatial).append(iv)
        elif iv.kind == "R":
            raise InterpretError(f"block {block.name}: reduce variable {iv.var.name} needs a loop of its own")
        else:
            scalar.append((iv, binding))
    sequential = [loop for loop in loops if loop.var not in used]
    if sequential or scalar:
        box = None
    for values in itertools.product(
        *(range(static_dim(loop.extent, "the interpreter")) for loop in sequential)
    ):
        outer = {**env, **{loop.var: v for loop, v in zip(sequential, values)}}
        scalars = {iv.var: _bound_value(block, iv, binding, outer) for iv, binding in scalar}
        _BlockRun(arrays, block, spatial, reduce, scalars).run(box)


def _bound_value(block: Block, iv: IterVar, binding: Expr, env: Mapping[Var, int]) -> int:
    folded = simplify(substitute(binding, {v: const(x) for v, x in env.items()}))
    if not isinstance(folded, Const) or not 0 <= int(folded.value) < iv.extent:
        raise InterpretError(
            f"block {block.name}: the binding {expr_str(binding)} of {iv.var.name} is not a value in "
            f"[0, {iv.extent}) of the loops around it"
        )
    return int(folded.value)


Box = tuple[tuple[int, int], ...]  # (first, count) per axis


def _boxes(shape: tuple[int, ...], budget: int) -> Iterator[Box]:
    """Boxes that tile `shape` in row-major order, each of at most `budget` elements: whole trailing
    axes, a slab of the axis before them, single indices of the axes before that."""
    if not shape:
        yield ()
        return
    k = 0
    while math.prod(shape[k + 1 :]) > budget:
        k += 1
    step = max(1, budget // math.prod(shape[k + 1 :]))
    for outer in itertools.product(*(range(n) for n in shape[:k])):
        for lo in range(0, shape[k], step):
            head = tuple((o, 1) for o in outer) + ((lo, min(step, shape[k] - lo)),)
            yield head + tuple((0, n) for n in shape[k + 1 :])


@dataclass(frozen=True)
class _Ctx:
    """Where a box of the domain lies: each vectorized iteration variable's (axis, first value, count),
    the scalar iteration variables' values, and the rank of every evaluated array."""

    axes: dict[Var, tuple[int, int, int]]
    scalars: dict[Var, int]
    rank: int

    @staticmethod
    def of(ivs: list[IterVar], box: Box, scalars: dict[Var, int], first_axis: int, rank: int) -> _Ctx:
        axes = {iv.var: (first_axis + k, lo, n) for k, (iv, (lo, n)) in enumerate(zip(ivs, box))}
        return _Ctx(axes, scalars, rank)

    def merge(self, other: _Ctx) -> _Ctx:
        return _Ctx(self.axes | other.axes, self.scalars, self.rank)


class _BlockRun:
    """One evaluation of a block over its vectorized iteration variables: spatial boxes, and for a
    reduction, the reduce boxes of each spatial box combined into an accumulator."""

    def __init__(
        self,
        arrays: dict[Buffer, np.ndarray],
        block: Block,
        spatial: list[IterVar],
        reduce: list[IterVar],
        scalars: dict[Var, int],
    ) -> None:
        self.arrays, self.block, self.spatial, self.reduce, self.scalars = (
            arrays,
            block,
            spatial,
            reduce,
            scalars,
        )

    def run(self, region: Box | None = None) -> None:
        """Over the whole spatial domain, or the part of it that `region` says."""
        region = region or tuple((0, static_dim(iv.extent, "the interpreter")) for iv in self.spatial)
        if any(n == 0 for _, n in region):
            return
        parts = reduction_parts(self.block)
        if (self.reduce or self.block.init is not None) and parts is None:
            raise InterpretError(
                f"block {self.block.name}: a reduction must update out[...] = op(out[...], value) "
                f"with op one of {', '.join(op.spec.name for op in COMBINERS)}"
            )
        for tile in _boxes(tuple(n for _, n in region), TEMP_ELEMENTS):
            box = tuple((first + lo, n) for (first, _), (lo, n) in zip(region, tile))
            ctx = _Ctx.of(self.spatial, box, self.scalars, 0, len(region))
            box_shape = tuple(n for _, n in box)
            if parts is None:
                value = _Eval(self.arrays, ctx).eval(self.block.body.value)
            else:
                value = self.reduced(ctx, box_shape, *parts)
            self.store(self.block.body, np.broadcast_to(value, box_shape), ctx)

    def reduced(self, ctx: _Ctx, shape: tuple[int, ...], combiner: Op, source: Expr) -> np.ndarray:
        """The accumulator of one spatial box: the init (or what the buffer holds) combined with the
        reductions of `source` over every reduce box. Reduce axes come first in the evaluated arrays,
        so each partial reduction adds whole planes."""
        combine = combiner.spec.numpy
        assert isinstance(combine, np.ufunc)
        body, init = self.block.body, self.block.init
        start = _Eval(self.arrays, ctx).eval(
            init.value if init is not None else Load(body.buffer, body.indices)
        )
        acc = np.array(np.broadcast_to(start, shape), dtype=body.buffer.dtype)
        nr = len(self.reduce)
        moved = _Ctx(
            {v: (axis + nr, lo, n) for v, (axis, lo, n) in ctx.axes.items()}, ctx.scalars, ctx.rank + nr
        )
        for box in _boxes(
            tuple(static_dim(iv.extent, "the interpreter") for iv in self.reduce),
            max(1, TEMP_ELEMENTS // math.prod(shape)),
        ):
            full = moved.merge(_Ctx.of(self.reduce, box, self.scalars, 0, moved.rank))
            value = np.broadcast_to(_Eval(self.arrays, full).eval(source), tuple(n for _, n in box) + shape)
            acc = combine(acc, combine.reduce(value, axis=tuple(range(nr))) if nr else value)
        return acc

    def store(self, store: BufferStore, value: np.ndarray, ctx: _Ctx) -> None:
        """Write a box's values: each store index must be a spatial iteration variable plus a constant,
        or a constant, with every spatial variable used once, so the write is a slice."""
        out = self.arrays[store.buffer]
        where: list[slice | int] = []
        order: list[int] = []  # the value's axis that each sliced dimension takes
        for d, index in enumerate(store.indices):
            form = _affine(index)
            if form is None:
                raise self.unsupported_store(store)
            first, axes = _fold_scalars(form, ctx.scalars)
            if not axes:
                where.append(first)
                low, high = first, first
            elif len(axes) == 1 and axes[0][1] == 1 and axes[0][0] in ctx.axes:
                axis, lo, n = ctx.axes[axes[0][0]]
                where.append(slice(first + lo, first + lo + n))
                order.append(axis)
                low, high = first + lo, first + lo + n - 1
            else:
                raise self.unsupported_store(store)
            if low < 0 or high >= out.shape[d]:
                raise InterpretError(
                    f"block {self.block.name}: store index {d} of {store.buffer.name}, {expr_str(index)}, "
                    f"leaves [0, {out.shape[d]})"
                )
        if sorted(order) != list(range(ctx.rank)):
            raise self.unsupported_store(store)
        out[tuple(where)] = value.transpose(np.argsort(order))

    def unsupported_store(self, store: BufferStore) -> InterpretError:
        indices = ", ".join(expr_str(i) for i in store.indices)
        return InterpretError(
            f"block {self.block.name}: the store {store.buffer.name}[{indices}] does not write each "
            "iteration of the block to its own element through its spatial variables"
        )


def _affine(e: Expr) -> tuple[int, dict[Var, int]] | None:
    """`e` as constant + sum(coefficient * variable), or None when it is not of that form."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value, {}
    if isinstance(e, Var):
        return 0, {e: 1}
    if not isinstance(e, Binary):
        return None
    a, b = _affine(e.a), _affine(e.b)
    if a is None or b is None:
        return None
    if e.op in (Op.ADD, Op.SUB):
        sign = 1 if e.op == Op.ADD else -1
        coefs = dict(a[1])
        for v, k in b[1].items():
            coefs[v] = coefs.get(v, 0) + sign * k
        return a[0] + sign * b[0], {v: k for v, k in coefs.items() if k}
    if e.op == Op.MUL and (not a[1] or not b[1]):
        (c, coefs), scale = (b, a[0]) if not a[1] else (a, b[0])
        return c * scale, {v: k * scale for v, k in coefs.items() if k * scale}
    return None


class _Eval:
    """Evaluates expressions over one box. `guarded`: inside a branch of a select, whose lanes the
    select may discard, so out-of-bounds indices there are clamped instead of refused."""

    def __init__(self, arrays: dict[Buffer, np.ndarray], ctx: _Ctx) -> None:
        self.arrays, self.ctx = arrays, ctx

    def eval(self, e: Expr, guarded: bool = False) -> Value:
        kind = _EVAL.get(type(e))
        if kind is None:
            raise InterpretError(f"{type(e).__name__} is not an expression of a PrimFunc")
        return kind(self, e, guarded)

    def const(self, e: Const, guarded: bool) -> Value:
        return np.dtype(e.dtype).type(e.value)

    def var(self, e: Var, guarded: bool) -> Value:
        if e in self.ctx.scalars:
            return np.int64(self.ctx.scalars[e])
        if e not in self.ctx.axes:
            raise InterpretError(f"variable {e.name} is not an iteration variable of its block")
        axis, lo, n = self.ctx.axes[e]
        return np.arange(lo, lo + n, dtype=np.int64).reshape(
            [n if k == axis else 1 for k in range(self.ctx.rank)]
        )

    def op(self, e: Binary | Unary, guarded: bool) -> Value:
        return e.op.spec.numpy(*(self.eval(k, guarded) for k in e.children()))

    def cast(self, e: Cast, guarded: bool) -> Value:
        return convert(self.eval(e.value, guarded), e.dtype)

    def select(self, e: Select, guarded: bool) -> Value:
        cond = np.asarray(self.eval(e.cond, guarded))
        if cond.size == 1 and cond.ndim == 0:  # one side for every lane: only that side runs
            return self.eval(e.true_value if cond else e.false_value, guarded)
        return np.where(cond, self.eval(e.true_value, True), self.eval(e.false_value, True))

    def load(self, e: Load, guarded: bool) -> Value:
        array = self.arrays[e.buffer]
        view = self.view(e, array)
        if view is not None:
            return view
        indices = []
        for d, index in enumerate(e.indices):
            i = np.asarray(self.eval(index, guarded))
            dim = array.shape[d]
            if guarded:
                i = np.clip(i, 0, dim - 1)
            elif i.size and (int(i.min()) < 0 or int(i.max()) >= dim):
                raise InterpretError(
                    f"index {d} of {e.buffer.name}, {expr_str(index)}, leaves [0, {dim}): "
                    f"it reaches {int(i.min()) if int(i.min()) < 0 else int(i.max())}"
                )
            indices.append(i)
        return array[tuple(indices)]

    def view(self, e: Load, array: np.ndarray) -> np.ndarray | None:
        """A strided view of `array` with the box's shape, when every index is affine in the
        iteration variables and stays inside the buffer over the whole box; else None."""
        ctx = self.ctx
        shape, strides, offset = [1] * ctx.rank, [0] * ctx.rank, 0
        for d, index in enumerate(e.indices):
            form = _affine(index)
            if form is None:
                return None
            first, axes = _fold_scalars(form, ctx.scalars)
            low = high = first
            for v, k in axes:
                if v not in ctx.axes:
                    raise InterpretError(f"variable {v.name} is not an iteration variable of its block")
                axis, lo, n = ctx.axes[v]
                strides[axis] += k * array.strides[d]
                shape[axis] = n
                low, high = low + k * lo + min(0, k * (n - 1)), high + k * lo + max(0, k * (n - 1))
                first += k * lo
            if low < 0 or high >= array.shape[d]:
                return None
            offset += first * array.strides[d] // array.itemsize
        shape = [n if s else 1 for n, s in zip(shape, strides)]
        base = array.reshape(-1)[offset:]
        return np.lib.stride_tricks.as_strided(base, shape, strides, writeable=False)


def _fold_scalars(
    form: tuple[int, dict[Var, int]], scalars: Mapping[Var, int]
) -> tuple[int, list[tuple[Var, int]]]:
    """An affine form with the scalar variables' values added into its constant."""
    c, coefs = form
    first = c + sum(k * scalars[v] for v, k in coefs.items() if v in scalars)
    return first, [(v, k) for v, k in coefs.items() if v not in scalars]


_EVAL: dict[type, Callable[[_Eval, Any, bool], Value]] = {
    Const: _Eval.const,
    Var: _Eval.var,
    Binary: _Eval.op,
    Unary: _Eval.op,
    Cast: _Eval.cast,
    Select: _Eval.select,
    Load: _Eval.load,
}
