"""Generic traversal and rewriting of IR trees, so each pass states only what it changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from compiler.ir import (
    Allocate,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Call,
    Cast,
    Expr,
    For,
    IfThenElse,
    Load,
    Not,
    Select,
    SeqStmt,
    Stmt,
    Var,
)

ExprFn = Callable[[Expr], Expr | None]


def map_expr(expr: Expr, fn: ExprFn) -> Expr:
    """Rebuild `expr` bottom-up; `fn` may return a replacement for each rebuilt node (None keeps it)."""
    if isinstance(expr, Binary):
        a, b = map_expr(expr.a, fn), map_expr(expr.b, fn)
        node: Expr = expr if (a is expr.a and b is expr.b) else Binary(expr.op, a, b)
    elif isinstance(expr, Load):
        idx = tuple(map_expr(i, fn) for i in expr.indices)
        node = Load(expr.buffer, idx) if idx != expr.indices else expr
    elif isinstance(expr, Select):
        node = Select(map_expr(expr.cond, fn), map_expr(expr.true_value, fn), map_expr(expr.false_value, fn))
    elif isinstance(expr, Cast):
        node = Cast(expr.dtype, map_expr(expr.value, fn))
    elif isinstance(expr, Call):
        node = Call(expr.func, tuple(map_expr(a, fn) for a in expr.args), expr.dtype)
    elif isinstance(expr, Not):
        node = Not(map_expr(expr.a, fn))
    else:
        node = expr
    out = fn(node)
    return node if out is None else out


def map_children(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """`expr` with `fn` applied to each direct child (the same node when no child changes)."""
    if isinstance(expr, Binary):
        a, b = fn(expr.a), fn(expr.b)
        return expr if (a is expr.a and b is expr.b) else Binary(expr.op, a, b)
    if isinstance(expr, Load):
        idx = tuple(fn(i) for i in expr.indices)
        return Load(expr.buffer, idx) if idx != expr.indices else expr
    if isinstance(expr, Select):
        return Select(fn(expr.cond), fn(expr.true_value), fn(expr.false_value))
    if isinstance(expr, Cast):
        return Cast(expr.dtype, fn(expr.value))
    if isinstance(expr, Call):
        return Call(expr.func, tuple(fn(a) for a in expr.args), expr.dtype)
    if isinstance(expr, Not):
        return Not(fn(expr.a))
    return expr


def walk_expr(expr: Expr) -> Iterator[Expr]:
    """Every node of `expr`, parents before children."""
    stack = [expr]  # explicit, as nested generators cost a step per level for every node
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, Binary):
            stack.append(e.b)
            stack.append(e.a)
        elif isinstance(e, Load):
            stack.extend(reversed(e.indices))
        elif isinstance(e, Select):
            stack += (e.false_value, e.true_value, e.cond)
        elif isinstance(e, Cast):
            stack.append(e.value)
        elif isinstance(e, Call):
            stack.extend(reversed(e.args))
        elif isinstance(e, Not):
            stack.append(e.a)


def substitute(expr: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace variables by expressions."""
    if not mapping:
        return expr
    return map_expr(expr, lambda e: mapping.get(e) if isinstance(e, Var) else None)


def free_vars(expr: Expr) -> set[Var]:
    return {e for e in walk_expr(expr) if isinstance(e, Var)}


def loads(expr: Expr) -> list[Load]:
    return [e for e in walk_expr(expr) if isinstance(e, Load)]


def map_store(store: BufferStore, fn: ExprFn) -> BufferStore:
    return BufferStore(store.buffer, map_expr(store.value, fn), tuple(map_expr(i, fn) for i in store.indices))


def map_block_exprs(block: Block, fn: ExprFn) -> Block:
    """Rewrite the expressions inside a block (body, init, predicate), not its bindings."""
    return replace(
        block,
        body=map_store(block.body, fn),
        init=map_store(block.init, fn) if block.init is not None else None,
        predicate=map_expr(block.predicate, fn),
    )


def block_loads(block: Block) -> list[Load]:
    """Every buffer load a block performs (body, init, predicate)."""
    out = loads(block.body.value) + loads(block.predicate)
    for i in block.body.indices:
        out += loads(i)
    if block.init is not None:
        out += loads(block.init.value)
    return out


def block_reads(block: Block) -> list[Buffer]:
    seen: dict[Buffer, None] = {}
    for load in block_loads(block):
        seen.setdefault(load.buffer)
    return list(seen)


def block_writes(block: Block) -> list[Buffer]:
    return [block.body.buffer]


def children(stmt: Stmt) -> tuple[Stmt, ...]:
    if isinstance(stmt, SeqStmt):
        return stmt.stmts
    if isinstance(stmt, (For, Allocate)):
        return (stmt.body,)
    if isinstance(stmt, IfThenElse):
        return (stmt.then_case,) + ((stmt.else_case,) if stmt.else_case is not None else ())
    return ()


def walk_stmt(stmt: Stmt) -> Iterator[Stmt]:
    """Every statement in execution order, parents before children."""
    yield stmt
    for c in children(stmt):
        yield from walk_stmt(c)


def blocks(stmt: Stmt) -> list[Block]:
    """Leaf blocks in execution order."""
    return [s for s in walk_stmt(stmt) if isinstance(s, Block)]


def seq(stmts: list[Stmt]) -> Stmt:
    """A statement list, flattened; one statement stands alone."""
    flat: list[Stmt] = []
    for s in stmts:
        flat.extend(s.stmts if isinstance(s, SeqStmt) else (s,))
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))
