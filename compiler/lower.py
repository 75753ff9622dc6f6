"""Lowering: a scheduled PrimFunc of blocks becomes plain loops, guards and stores for codegen.

`lower` lists the passes in order; each is a small named function, and `verify_lowered` can run
between them in tests.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.arith import simplify
from compiler.auto_unroll import auto_unroll
from compiler.compact import compact_buffers
from compiler.ir import (
    TRUE,
    Allocate,
    Binary,
    Block,
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
)
from compiler.visit import children, free_vars, map_store, substitute


class LoweringError(ValueError):
    """The program cannot be lowered (a bug in a schedule primitive if it ever happens)."""


def lower(func: PrimFunc) -> PrimFunc:
    """Blocks to loops: the passes in order."""
    func = compact_buffers(func)
    func = flatten_blocks(func)
    func = auto_unroll(func)
    func = allocate_intermediates(func)
    func = simplify_indices(func)
    verify_lowered(func)
    return func


def flatten_blocks(func: PrimFunc) -> PrimFunc:
    """Replace each block by its store, with iteration variables substituted by their bindings.

    The predicate becomes a guard; a reduction's init runs when every reduce variable is at 0.
    """
    return replace(func, body=_map_stmt(func.body, _flatten_block))


def _flatten_block(block: Block) -> Stmt:
    sub: dict[Var, Expr] = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
    stmt: Stmt = map_store(block.body, lambda e: sub.get(e) if isinstance(e, Var) else None)
    if block.init is not None:
        first: Expr = TRUE
        for iv, b in zip(block.iter_vars, block.bindings):
            if iv.kind == "R":
                first = Binary("and", first, Binary("eq", b, const(0)))
        init = map_store(block.init, lambda e: sub.get(e) if isinstance(e, Var) else None)
        stmt = SeqStmt((IfThenElse(simplify(first), init), stmt))
    predicate = simplify(substitute(block.predicate, sub))
    if predicate != TRUE:
        stmt = IfThenElse(predicate, stmt)
    return stmt


def _map_stmt(stmt: Stmt, on_block) -> Stmt:  # type: ignore[no-untyped-def]
    if isinstance(stmt, Block):
        return on_block(stmt)
    if isinstance(stmt, For):
        return replace(stmt, body=_map_stmt(stmt.body, on_block))
    if isinstance(stmt, SeqStmt):
        return SeqStmt(tuple(_map_stmt(s, on_block) for s in stmt.stmts))
    if isinstance(stmt, IfThenElse):
        else_case = _map_stmt(stmt.else_case, on_block) if stmt.else_case is not None else None
        return IfThenElse(stmt.cond, _map_stmt(stmt.then_case, on_block), else_case)
    if isinstance(stmt, Allocate):
        return replace(stmt, body=_map_stmt(stmt.body, on_block))
    return stmt


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
    if isinstance(stmt, For):
        inner = {**ranges, stmt.var: (0, stmt.extent - 1)}
        return replace(stmt, body=_simplify_stmt(stmt.body, inner))
    if isinstance(stmt, SeqStmt):
        return SeqStmt(tuple(_simplify_stmt(s, ranges) for s in stmt.stmts))
    if isinstance(stmt, IfThenElse):
        cond = simplify(stmt.cond, ranges)
        then_case = _simplify_stmt(stmt.then_case, ranges)
        else_case = _simplify_stmt(stmt.else_case, ranges) if stmt.else_case is not None else None
        if isinstance(cond, Const):
            return then_case if cond.value else (else_case or SeqStmt(()))
        return IfThenElse(cond, then_case, else_case)
    if isinstance(stmt, Allocate):
        return replace(stmt, body=_simplify_stmt(stmt.body, ranges))
    if isinstance(stmt, BufferStore):
        return BufferStore(
            stmt.buffer, simplify(stmt.value, ranges), tuple(simplify(i, ranges) for i in stmt.indices)
        )
    return stmt


def verify_lowered(func: PrimFunc) -> None:
    """No blocks left; every variable used is a loop variable in scope; buffers are declared."""
    known = set(func.params)
    _verify(func.body, set(), known)


def _verify(stmt: Stmt, scope: set[Var], buffers: set) -> None:  # type: ignore[type-arg]
    if isinstance(stmt, Block):
        raise LoweringError(f"block {stmt.name} survived lowering")
    if isinstance(stmt, For):
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
    for child in children(stmt):
        _verify(child, scope, buffers)
