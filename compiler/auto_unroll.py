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
    body, _ = _unroll(func.body, unroll_budget(func.attrs) or 0)
    return replace(func, body=body)


def unroll_budget(annotations: tuple[tuple[str, object], ...]) -> int | None:
    """The budget `annotations` set, or None where they set none."""
    value = dict(annotations).get(AUTO_UNROLL_MAX_STEP)
    if value is None:
        return None
    if not isinstance(value, int | float | str):  # annotation values are JSON scalars
        raise TypeError(f"{AUTO_UNROLL_MAX_STEP} must be a number, got {value!r}")
    return int(value)


def _unroll(stmt: Stmt, limit: int) -> tuple[Stmt, float]:
    """The statement with its loops marked, and how many statements one execution of it runs (a
    sequence or both branches of an `if` add up).

    A vectorized loop counts as one step (it becomes vector instructions, not iterations); a
    parallel loop as infinitely many, so no loop around a parallel region is ever unrolled."""
    if isinstance(stmt, For):
        own = unroll_budget(stmt.annotations)
        body, steps = _unroll(stmt.body, limit if own is None else own)
        if stmt.kind == "vectorized":
            return replace(stmt, body=body), 1
        if stmt.kind == "parallel":
            return replace(stmt, body=body), float("inf")
        steps *= stmt.extent if isinstance(stmt.extent, int) else float("inf")  # run-time trip count
        kind = "unrolled" if stmt.kind == "serial" and steps <= limit else stmt.kind
        return replace(stmt, body=body, kind=kind), steps
    kids = stmt.children()
    if not kids:
        return stmt, 1
    parts = [_unroll(k, limit) for k in kids]
    return stmt.with_children([s for s, _ in parts]), sum(n for _, n in parts)
