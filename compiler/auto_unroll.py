"""Auto-unroll: the `pragma_auto_unroll_max_step` annotation, as TVM's UnrollLoop pass reads it.

The search cannot know which loops are worth unrolling, so it samples a budget (0, 16, 64, 512)
and annotates the root block or a loop with it. Lowering then marks every serial loop whose whole
subtree runs at most that many statements as `unrolled`; LLVM unrolls such loops fully. Counting
is bottom-up, so the innermost loops are unrolled first and an outer loop only when everything
inside it fits too.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.ir import For, PrimFunc, Stmt

AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"


def auto_unroll(func: PrimFunc) -> PrimFunc:
    """Mark loops for unrolling under the function's (root block's) and each loop's annotation."""
    limit = int(dict(func.attrs).get(AUTO_UNROLL_MAX_STEP, 0))  # type: ignore[call-overload]
    body, _ = _unroll(func.body, limit)
    return replace(func, body=body)


def _unroll(stmt: Stmt, limit: int) -> tuple[Stmt, float]:
    """The statement with its loops marked, and how many statements one execution of it runs (a
    sequence or both branches of an `if` add up).

    A vectorized loop counts as one step (it becomes vector instructions, not iterations); a
    parallel loop as infinitely many, so no loop around a parallel region is ever unrolled."""
    if isinstance(stmt, For):
        own = dict(stmt.annotations).get(AUTO_UNROLL_MAX_STEP)
        body, steps = _unroll(stmt.body, limit if own is None else int(own))  # type: ignore[call-overload]
        if stmt.kind == "vectorized":
            return replace(stmt, body=body), 1
        if stmt.kind == "parallel":
            return replace(stmt, body=body), float("inf")
        steps *= stmt.extent
        kind = "unrolled" if stmt.kind == "serial" and steps <= limit else stmt.kind
        return replace(stmt, body=body, kind=kind), steps
    kids = stmt.children()
    if not kids:
        return stmt, 1
    parts = [_unroll(k, limit) for k in kids]
    return stmt.with_children([s for s, _ in parts]), sum(n for _, n in parts)
