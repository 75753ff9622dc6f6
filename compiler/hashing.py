"""The structural hash of a PrimFunc: the identity of a workload in the tuning database.

Two functions hash alike when they compute the same thing with the same loop structure, whatever
their loop and iteration variables are called: variables are renamed by order of definition before
hashing the printed text. Buffer and block names are kept, because traces refer to blocks by name and
callers pass buffers by position and name. sha256 of text is the same in every process and machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from compiler.ir import Block, Expr, For, IterVar, PrimFunc, SeqStmt, Stmt, Var
from compiler.printer import script
from compiler.visit import map_block_exprs, substitute


def canonical(func: PrimFunc) -> PrimFunc:
    """`func` with loop variables renamed l0, l1, ... and block variables v0, v1, ... in order."""
    counter = [0]
    return replace(func, body=_rename(func.body, {}, counter))


def _rename(stmt: Stmt, env: dict[Var, Expr], counter: list[int]) -> Stmt:
    if isinstance(stmt, For):
        new = Var(f"l{counter[0]}")
        counter[0] += 1
        return replace(stmt, var=new, body=_rename(stmt.body, {**env, stmt.var: new}, counter))
    if isinstance(stmt, SeqStmt):
        return SeqStmt(tuple(_rename(s, env, counter) for s in stmt.stmts))
    if isinstance(stmt, Block):
        iv_map: dict[Var, Expr] = {iv.var: Var(f"v{k}") for k, iv in enumerate(stmt.iter_vars)}
        block = map_block_exprs(stmt, lambda e: iv_map.get(e) if isinstance(e, Var) else None)
        return replace(
            block,
            iter_vars=tuple(IterVar(iv_map[iv.var], iv.extent, iv.kind) for iv in stmt.iter_vars),  # type: ignore[arg-type]
            bindings=tuple(substitute(b, env) for b in stmt.bindings),
            predicate=substitute(stmt.predicate, env),
        )
    return stmt


def structural_hash(func: PrimFunc) -> str:
    """Hex sha256 of the canonical program text (function name excluded)."""
    text = script(replace(canonical(func), name="main"))
    return hashlib.sha256(text.encode()).hexdigest()
