"""Loop primitives: split, fuse, reorder, loop kinds and annotations.

Each function takes a PrimFunc and returns a new one; `fresh` makes loop variables with unused names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from compiler.arith import extent_expr, extent_range, simplify
from compiler.ir import Binary, Block, Buffer, Expr, For, PrimFunc, Stmt, Var, const
from compiler.ops import Op
from compiler.schedule.errors import ScheduleError, check, static_extent
from compiler.schedule.tree import find_loop, set_at
from compiler.visit import block_reads, blocks, free_vars, map_blocks, substitute

Fresh = Callable[[str], Var]


def _rebind(stmt: Stmt, mapping: dict[Var, Expr], guard: Expr | None = None) -> Stmt:
    """Substitute loop variables in the bindings/predicates of every block under `stmt`."""

    def fn(b: Block) -> Block:
        pred = substitute(b.predicate, mapping)
        if guard is not None:
            pred = Binary(Op.AND, pred, guard)
        return replace(
            b, bindings=tuple(simplify(substitute(x, mapping)) for x in b.bindings), predicate=simplify(pred)
        )

    return map_blocks(stmt, fn)


def _replace_loop(func: PrimFunc, name: str, new: Stmt) -> PrimFunc:
    path, _ = find_loop(func.body, name)
    body = set_at(func.body, path, new)
    assert body is not None
    return replace(func, body=body)


def split(
    func: PrimFunc, loop_name: str, factors: list[int | None], fresh: Fresh
) -> tuple[PrimFunc, list[str]]:
    """Split a loop into len(factors) nested loops. One factor may be None (inferred). If the factors
    over-cover the extent, blocks get the guard `fused index < extent`."""
    _, loop = find_loop(func.body, loop_name)
    check(len(factors) >= 2, f"split of loop {loop_name!r}: needs at least 2 factors, got {factors}")
    check(factors.count(None) <= 1, f"split of loop {loop_name!r}: at most one factor may be None")
    for f in factors:
        ok = f is None or (isinstance(f, int) and not isinstance(f, bool) and f >= 1)
        check(ok, f"split of loop {loop_name!r}: bad factor {f!r}")
    if not isinstance(loop.extent, int):
        return _split_symbolic(func, loop, factors, fresh)
    extent = loop.extent
    inferred = -(-extent // math.prod(f or 1 for f in factors))
    sizes = [f if f is not None else inferred for f in factors]
    known = math.prod(sizes)
    check(
        known >= extent,
        f"split of loop {loop_name!r}: factors {sizes} cover {known} < extent {extent}",
    )
    new_vars = [fresh(f"{loop_name}_{k}") for k in range(len(sizes))]
    fused: Expr = const(0)
    for v, f in zip(new_vars, sizes):
        fused = Binary(Op.ADD, Binary(Op.MUL, fused, const(f)), v)
    fused = simplify(fused)
    guard = Binary(Op.LT, fused, const(extent)) if known > extent else None
    body = _rebind(loop.body, {loop.var: fused}, guard)
    for v, f in reversed(list(zip(new_vars, sizes))):
        body = For(v, f, body)
    return _replace_loop(func, loop_name, body), [v.name for v in new_vars]


def _split_symbolic(
    func: PrimFunc, loop: For, factors: list[int | None], fresh: Fresh
) -> tuple[PrimFunc, list[str]]:
    """A loop over a symbolic extent n split into static tiles inside one run-time loop: the loop at
    the None factor, or else at the outermost factor other than 1 (a tile decision made for the
    range's largest n), runs ceil(n / the factors inside it) times; the factors outside it must be 1.
    The blocks are guarded by `fused index < n` (the last run-time iteration is a partial tile)."""
    name = loop.var.name
    extent = loop.extent
    assert isinstance(extent, Expr)
    at = factors.index(None) if None in factors else next((k for k, f in enumerate(factors) if f != 1), 0)
    check(
        all(f == 1 for f in factors[:at]),
        f"split of loop {name!r}: its extent is symbolic, so its factors are numbers inside one run-time "
        f"loop (None, or the outermost factor other than 1), with only 1s outside it; got {factors}",
    )
    numbers = [f for f in factors[at + 1 :] if f is not None]
    inner = math.prod(numbers)
    largest = extent_range(extent)[1] + 1
    given = factors[at]
    check(
        given is None or given * inner >= largest,
        f"split of loop {name!r}: factors {factors} cover {(given or 0) * inner}, less than the largest "
        f"extent {largest} of its range",
    )
    runtime = simplify(Binary(Op.FLOORDIV, Binary(Op.ADD, extent, const(inner - 1)), const(inner)))
    ones: list[int | Expr] = [1] * at
    sizes = [*ones, runtime, *numbers]
    new_vars = [fresh(f"{name}_{k}") for k in range(len(sizes))]
    fused: Expr = new_vars[at]
    for v, f in zip(new_vars[at + 1 :], numbers):
        fused = Binary(Op.ADD, Binary(Op.MUL, fused, const(f)), v)
    fused = simplify(fused)
    guard = Binary(Op.LT, fused, extent) if inner > 1 else None
    body = _rebind(loop.body, {loop.var: fused}, guard)
    for v, size in reversed(list(zip(new_vars, sizes))):
        body = For(v, size, body)
    return _replace_loop(func, name, body), [v.name for v in new_vars]


def _chain(func: PrimFunc, names: list[str], what: str) -> list[For]:
    """The loops from the outermost to the innermost named one, checking they form a perfect nest."""
    paths = {n: find_loop(func.body, n)[0] for n in names}
    check(len(set(names)) == len(names), f"{what}: a loop is given twice in {names}")
    outer = min(names, key=lambda n: len(paths[n]))
    inner = max(names, key=lambda n: len(paths[n]))
    chain = [find_loop(func.body, outer)[1]]
    while chain[-1].var.name != inner:
        child = chain[-1].body
        if not isinstance(child, For):
            raise ScheduleError(
                f"{what}: loops {names} are not nested in one perfect chain "
                f"(loop {chain[-1].var.name!r} has more than one child)"
            )
        chain.append(child)
    off_chain = sorted(set(names) - {lp.var.name for lp in chain})
    check(
        not off_chain,
        f"{what}: loops {off_chain} are not in the nest from {outer!r} to {inner!r}",
    )
    return chain


def fuse(func: PrimFunc, names: list[str], fresh: Fresh) -> tuple[PrimFunc, str]:
    """Fuse consecutive nested loops (outermost first) into one."""
    check(len(names) >= 2, f"fuse: needs at least 2 loops, got {names}")
    chain = _chain(func, names, "fuse")
    check(
        [lp.var.name for lp in chain] == names,
        f"fuse: loops {names} must be directly nested, outermost first",
    )
    extent = _product([lp.extent for lp in chain])
    fused = fresh("_".join(names) + "_fused")
    ranges = {fused: extent_range(extent)}
    mapping: dict[Var, Expr] = {}
    inner_size: int | Expr = 1
    symbolic = not isinstance(extent, int)
    for lp in reversed(chain):
        if symbolic and isinstance(lp.extent, int) and lp.extent == 1:
            mapping[lp.var] = const(0)  # not `fused // (n * ...)`, which region inference cannot bound
            continue
        idx: Expr = fused if inner_size == 1 else Binary(Op.FLOORDIV, fused, extent_expr(inner_size))
        if lp is not chain[0]:
            idx = Binary(Op.FLOORMOD, idx, extent_expr(lp.extent))
        mapping[lp.var] = simplify(idx, ranges)
        inner_size = _product([inner_size, lp.extent])
    body = _rebind(chain[-1].body, mapping)
    return _replace_loop(func, names[0], For(fused, extent, body)), fused.name


def _product(extents: list[int | Expr]) -> int | Expr:
    """The extent of loops fused: a number, or (a loop over a symbolic extent among them) an
    expression of the size vars."""
    numbers = math.prod(e for e in extents if isinstance(e, int))
    symbolic = [e for e in extents if not isinstance(e, int)]
    if not symbolic:
        return numbers
    out: Expr = const(numbers)
    for e in symbolic:
        out = Binary(Op.MUL, out, e)
    return simplify(out)


def reorder(func: PrimFunc, names: list[str]) -> PrimFunc:
    """Put the given loops in the given order, inside the perfect nest that spans them."""
    chain = _chain(func, names, "reorder")
    positions = [k for k, lp in enumerate(chain) if lp.var.name in names]
    by_name = {lp.var.name: lp for lp in chain}
    new_chain = list(chain)
    for pos, name in zip(positions, names):
        new_chain[pos] = by_name[name]
    _check_scan_reorder(chain, new_chain)
    body = chain[-1].body
    for lp in reversed(new_chain):
        body = replace(lp, body=body)
    return _replace_loop(func, chain[0].var.name, body)


def _check_scan_reorder(old: list[For], new: list[For]) -> None:
    """A scan's recurrence loop may only move across loops it has no dependence with."""
    if old == new:
        return
    for block in blocks(old[-1].body):
        ordered = [b for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "O"]
        if not ordered:
            continue
        loop_vars = set().union(*(free_vars(b) for b in ordered))
        moved = [lp for lp, nl in zip(old, new) if lp is not nl and lp.var in loop_vars]
        if moved:
            raise ScheduleError(
                f"reorder: loop {moved[0].var.name!r} carries the recurrence of scan block {block.name!r}"
            )


def set_kind(func: PrimFunc, name: str, kind: str) -> PrimFunc:
    """Mark a loop parallel, vectorized or unrolled, refusing what would race or reorder a reduction."""
    path, loop = find_loop(func.body, name)
    if kind == "unrolled":
        static_extent(loop.extent, "unroll", name)  # a run-time trip count cannot be unrolled fully
    if kind in ("parallel", "vectorized") and (not isinstance(loop.extent, int) or loop.extent > 1):
        under = blocks(loop.body)
        private = _private_buffers(func, under) if kind == "parallel" else set()
        for block in under:
            _check_data_parallel(block, loop, kind, private)
    body = set_at(func.body, path, replace(loop, kind=kind))
    assert body is not None
    return replace(func, body=body)


def _private_buffers(func: PrimFunc, under: list[Block]) -> set[Buffer]:
    """Intermediates used only under the loop: lowering allocates them inside it (compaction), so
    each iteration, and each thread, has its own."""
    names = {b.name for b in under}
    used_outside = {
        buf for b in blocks(func.body) if b.name not in names for buf in [*block_reads(b), b.body.buffer]
    }
    return {
        b.body.buffer for b in under if b.body.buffer in func.allocs and b.body.buffer not in used_outside
    }


def _check_data_parallel(block: Block, loop: For, kind: str, private: set[Buffer]) -> None:
    uses = [iv for iv, b in zip(block.iter_vars, block.bindings) if loop.var in free_vars(b)]
    what = "parallelize" if kind == "parallel" else "vectorize"
    check(
        bool(uses) or block.body.buffer in private,
        f"cannot {what} loop {loop.var.name!r}: block {block.name!r} does not depend on it, so "
        "its iterations would write the same elements",
    )
    for iv in uses:
        check(
            iv.kind == "S",
            f"cannot {what} loop {loop.var.name!r}: it is bound to the "
            f"{'reduction' if iv.kind == 'R' else 'recurrence'} variable {iv.var.name} "
            f"of block {block.name!r}",
        )


def annotate_loop(func: PrimFunc, name: str, key: str, value: object) -> PrimFunc:
    path, loop = find_loop(func.body, name)
    ann = tuple((k, v) for k, v in loop.annotations if k != key) + ((key, value),)
    body = set_at(func.body, path, replace(loop, annotations=ann))
    assert body is not None
    return replace(func, body=body)
