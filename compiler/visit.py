"""Walking and rewriting IR trees, through the children every node declares (`Expr.children`,
`Stmt.children` and their `with_children`), so each pass states only what it changes.

Passes that carry context down the tree (the loop ranges of simplification, the loops around a
store for the features) recurse themselves, through the same two methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from compiler.dtypes import FLOAT_DTYPES
from compiler.ir import (
    Block,
    Buffer,
    BufferStore,
    Expr,
    Load,
    Select,
    SeqStmt,
    SizeVar,
    Stmt,
    Var,
    structural_equal,
)

ExprFn = Callable[[Expr], Expr | None]
StmtFn = Callable[[Stmt], Stmt | None]


def map_expr(expr: Expr, fn: ExprFn) -> Expr:
    """Rebuild `expr` bottom-up; `fn` may return a replacement for each rebuilt node (None keeps it)."""
    kids = expr.children()
    node = expr
    if kids:
        new = [map_expr(k, fn) for k in kids]
        if any(n is not k for n, k in zip(new, kids)):
            node = expr.with_children(new)
    out = fn(node)
    return node if out is None else out


def walk_expr(expr: Expr) -> Iterator[Expr]:
    """Every node of `expr`, parents before children."""
    stack = [expr]  # explicit, as nested generators cost a step per level for every node
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(e.children()))


def substitute(expr: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """Replace variables by expressions."""
    if not mapping:
        return expr
    return map_expr(expr, lambda e: mapping.get(e) if isinstance(e, Var) else None)


def free_vars(expr: Expr) -> set[Var]:
    return {e for e in walk_expr(expr) if isinstance(e, Var)}


def loop_vars(expr: Expr) -> set[Var]:
    """The variables of `expr` some loop or block binds: its size vars are in scope everywhere, so a
    guard `i < n` depends on i alone (a pass that keeps the guards on some loops must keep that one)."""
    return {v for v in free_vars(expr) if not isinstance(v, SizeVar)}


def loads(expr: Expr) -> list[Load]:
    return [e for e in walk_expr(expr) if isinstance(e, Load)]


def guarded_loads(select: Select) -> list[Load]:
    """The loads of a select's sides that only their side's condition guards. These may read out of
    bounds where their side is not chosen (padding's `data[y - pad]`), so such a select branches; one
    without computes both sides branch-free. A float select's sides may load what its condition loads
    itself (`select(x < 0, -x, x)`: x is read either way); an integer select's sides may load nothing,
    since its condition may be what keeps their arithmetic from overflowing or dividing by 0."""
    sides = loads(select.true_value) + loads(select.false_value)
    if select.dtype not in FLOAT_DTYPES:
        return sides
    made = loads(select.cond)
    return [ld for ld in sides if not any(structural_equal(ld, m) for m in made)]


def map_stmt(stmt: Stmt, fn: StmtFn) -> Stmt:
    """Rebuild `stmt` bottom-up; `fn` may return a replacement for each rebuilt statement."""
    kids = stmt.children()
    node = stmt
    if kids:
        new = [map_stmt(k, fn) for k in kids]
        if any(n is not k for n, k in zip(new, kids)):
            node = stmt.with_children(new)
    out = fn(node)
    return node if out is None else out


def walk_stmt(stmt: Stmt) -> Iterator[Stmt]:
    """Every statement in execution order, parents before children."""
    stack = [stmt]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(s.children()))


def map_blocks(stmt: Stmt, fn: Callable[[Block], Stmt]) -> Stmt:
    """`stmt` with every block replaced by `fn(block)`: a block, or what lowering puts in its place."""
    return map_stmt(stmt, lambda s: fn(s) if isinstance(s, Block) else None)


def blocks(stmt: Stmt) -> list[Block]:
    """Leaf blocks in execution order."""
    return [s for s in walk_stmt(stmt) if isinstance(s, Block)]


def seq(stmts: list[Stmt]) -> Stmt:
    """A statement list, flattened; one statement stands alone."""
    flat: list[Stmt] = []
    for s in stmts:
        flat.extend(s.stmts if isinstance(s, SeqStmt) else (s,))
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


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
