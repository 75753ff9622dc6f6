"""Lowering: a scheduled PrimFunc of blocks becomes plain loops, guards and stores for codegen.

`lower` lists the passes in order; each is a small named function, and `verify_lowered` can run
between them in tests.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.arith import conjuncts, extent_range, simplify
from compiler.auto_unroll import auto_unroll
from compiler.compact import compact_buffers
from compiler.ir import (
    TRUE,
    Allocate,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Const,
    Expr,
    For,
    IfThenElse,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    const,
    structural_equal,
)
from compiler.ops import Op
from compiler.overcompute import overcompute_guarded_tiles
from compiler.storage_align import align_storage
from compiler.visit import free_vars, loads, map_blocks, map_store, substitute


class LoweringError(ValueError):
    """The program cannot be lowered (a bug in a schedule primitive if it ever happens)."""


def lower(func: PrimFunc) -> PrimFunc:
    """Blocks to loops: the passes in order."""
    func = compact_buffers(func)
    func = align_storage(func)
    func = overcompute_guarded_tiles(func)
    func = flatten_blocks(func)
    func = hoist_guards(func)
    func = auto_unroll(func)
    func = allocate_intermediates(func)
    func = simplify_indices(func)
    verify_lowered(func)
    return func


def flatten_blocks(func: PrimFunc) -> PrimFunc:
    """Replace each block by its store, with iteration variables substituted by their bindings.

    The predicate becomes a guard; a reduction's init runs when every reduce variable is at 0.
    """
    return replace(func, body=map_blocks(func.body, _flatten_block))


def _flatten_block(block: Block) -> Stmt:
    sub: dict[Var, Expr] = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
    stmt: Stmt = map_store(block.body, lambda e: sub.get(e) if isinstance(e, Var) else None)
    if block.init is not None:
        first: Expr = TRUE
        for iv, b in zip(block.iter_vars, block.bindings):
            if iv.kind == "R":
                first = Binary(Op.AND, first, Binary(Op.EQ, b, const(0)))
        init = map_store(block.init, lambda e: sub.get(e) if isinstance(e, Var) else None)
        stmt = SeqStmt((IfThenElse(simplify(first), init), stmt))
    predicate = simplify(substitute(block.predicate, sub))
    if not structural_equal(predicate, TRUE):
        stmt = IfThenElse(predicate, stmt)
    return stmt


def hoist_guards(func: PrimFunc) -> PrimFunc:
    """A guard that is a loop's whole body is checked outside the loop, the conditions of it that
    the loop's variable does not enter: a reduction's guard `k < n` around a register tile's update
    runs once per k, not once per element, and leaves the vectorized loop inside it unguarded."""
    return replace(func, body=_hoist(func.body))


def _hoist(stmt: Stmt) -> Stmt:
    kids = [_hoist(k) for k in stmt.children()]
    stmt = stmt.with_children(kids) if kids else stmt
    if not isinstance(stmt, For):
        return stmt
    guard = stmt.body
    if not isinstance(guard, IfThenElse) or guard.else_case is not None:
        return stmt
    stay = [c for c in conjuncts(guard.cond) if stmt.var in free_vars(c) or loads(c)]
    lift = [c for c in conjuncts(guard.cond) if not (stmt.var in free_vars(c) or loads(c))]
    if not lift:
        return stmt
    inner = IfThenElse(_all(stay), guard.then_case) if stay else guard.then_case
    return IfThenElse(_all(lift), replace(stmt, body=inner))


def _all(conds: list[Expr]) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = Binary(Op.AND, out, c)
    return out


def allocate_intermediates(func: PrimFunc) -> PrimFunc:
    """Intermediate buffers live for the whole function."""
    body = func.body
    for buf in reversed(func.allocs):
        body = Allocate(buf, body)
    return replace(func, body=body, allocs=())


def simplify_indices(func: PrimFunc) -> PrimFunc:
    """Simplify every expression knowing each loop variable's range."""
    return replace(func, body=_simplify_stmt(func.body, {}))


def _simplify_stmt(stmt: Stmt, ranges: dict[Var, tuple[int, int]]) -> Stmt:
    if isinstance(stmt, BufferStore):
        return BufferStore(
            stmt.buffer, simplify(stmt.value, ranges), tuple(simplify(i, ranges) for i in stmt.indices)
        )
    if isinstance(stmt, For):
        ranges = {**ranges, stmt.var: extent_range(stmt.extent, ranges)}
        if not isinstance(stmt.extent, int):
            stmt = replace(stmt, extent=simplify(stmt.extent, ranges))
    kids = [_simplify_stmt(k, ranges) for k in stmt.children()]
    if isinstance(stmt, IfThenElse):
        cond = simplify(stmt.cond, ranges)
        if isinstance(cond, Const):  # a guard decided by the ranges: keep the branch it takes
            return kids[0] if cond.value else (kids[1] if len(kids) > 1 else SeqStmt(()))
        return IfThenElse(cond, *kids)
    return stmt.with_children(kids) if kids else stmt


def verify_lowered(func: PrimFunc) -> None:
    """No blocks left; every variable used is a loop variable in scope; buffers are declared."""
    known = set(func.params)
    _verify(func.body, set(func.size_vars), known)


def _verify(stmt: Stmt, scope: set[Var], buffers: set[Buffer]) -> None:
    if isinstance(stmt, Block):
        raise LoweringError(f"block {stmt.name} survived lowering")
    if isinstance(stmt, For):
        if not isinstance(stmt.extent, int):
            unbound = free_vars(stmt.extent) - scope
            if unbound:
                raise LoweringError(
                    f"loop {stmt.var.name}: unbound variable(s) {sorted(v.name for v in unbound)} in its "
                    "extent"
                )
        if stmt.var in scope:
            raise LoweringError(f"loop variable {stmt.var.name} is defined twice")
        _verify(stmt.body, scope | {stmt.var}, buffers)
        return
    if isinstance(stmt, Allocate):
        _verify(stmt.body, scope, buffers | {stmt.buffer})
        return
    exprs: list[Expr] = []
    if isinstance(stmt, IfThenElse):
        exprs.append(stmt.cond)
    if isinstance(stmt, BufferStore):
        if stmt.buffer not in buffers:
            raise LoweringError(f"store to undeclared buffer {stmt.buffer.name}")
        exprs += [stmt.value, *stmt.indices]
    for e in exprs:
        unbound = free_vars(e) - scope
        if unbound:
            raise LoweringError(f"unbound variable(s) {sorted(v.name for v in unbound)}")
    for child in stmt.children():
        _verify(child, scope, buffers)
