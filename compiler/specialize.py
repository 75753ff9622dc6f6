"""A symbolic function with its size vars bound to numbers: the static function that one call of its
kernel computes (TVM's `PrimFunc.specialize`). The interpreter evaluates a symbolic function through
it; a static function specialized from a te definition is structurally equal to the te definition
written with those numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from compiler.arith import simplify
from compiler.ir import (
    Allocate,
    Block,
    Buffer,
    BufferStore,
    Const,
    Expr,
    For,
    IfThenElse,
    IRError,
    IterVar,
    Load,
    PrimFunc,
    SizeVar,
    Stmt,
    const,
)
from compiler.visit import map_expr, map_stmt


def specialize(func: PrimFunc, values: Mapping[str, int] | Mapping[SizeVar, int]) -> PrimFunc:
    """`func` with each size var in `values` (by name or by itself) replaced by its value, which must
    lie in its declared range; the others stay symbolic."""
    by_name = {v.name: v for v in func.size_vars}
    bound: dict[SizeVar, int] = {}
    for key, value in values.items():
        var = by_name.get(key) if isinstance(key, str) else key
        if var is None or var not in func.size_vars:
            raise IRError(f"{func.name} has no size var {key}")
        if not var.lo <= int(value) <= var.hi:
            raise IRError(f"{var.name} = {value} is outside its declared range [{var.lo}, {var.hi}]")
        bound[var] = int(value)
    return _Specializer(bound).func(func)


class _Specializer:
    def __init__(self, values: dict[SizeVar, int]) -> None:
        self.values = values
        self.buffers: dict[Buffer, Buffer] = {}

    def func(self, func: PrimFunc) -> PrimFunc:
        return replace(
            func,
            params=tuple(self.buffer(b) for b in func.params),
            allocs=tuple(self.buffer(b) for b in func.allocs),
            body=map_stmt(func.body, self.stmt),
        )

    def dim(self, d: int | Expr) -> int | Expr:
        if isinstance(d, int):
            return d
        e = simplify(self.expr(d))
        return int(e.value) if isinstance(e, Const) else e

    def buffer(self, b: Buffer) -> Buffer:
        if b not in self.buffers:
            self.buffers[b] = b if b.is_static else replace(b, shape=tuple(self.dim(d) for d in b.shape))
        return self.buffers[b]

    def expr(self, e: Expr) -> Expr:
        def swap(node: Expr) -> Expr | None:
            if isinstance(node, SizeVar) and node in self.values:
                return const(self.values[node])
            if isinstance(node, Load):
                return Load(self.buffer(node.buffer), node.indices)
            return None

        return map_expr(e, swap)

    def store(self, s: BufferStore) -> BufferStore:
        return BufferStore(self.buffer(s.buffer), self.expr(s.value), tuple(self.expr(i) for i in s.indices))

    def stmt(self, s: Stmt) -> Stmt | None:
        if isinstance(s, For):
            return replace(s, extent=self.dim(s.extent))
        if isinstance(s, BufferStore):
            return self.store(s)
        if isinstance(s, Allocate):
            return replace(s, buffer=self.buffer(s.buffer))
        if isinstance(s, IfThenElse):
            return replace(s, cond=self.expr(s.cond))
        if isinstance(s, Block):
            return replace(
                s,
                iter_vars=tuple(IterVar(iv.var, self.dim(iv.extent), iv.kind) for iv in s.iter_vars),
                bindings=tuple(self.expr(b) for b in s.bindings),
                body=self.store(s.body),
                init=None if s.init is None else self.store(s.init),
                predicate=self.expr(s.predicate),
            )
        return None
