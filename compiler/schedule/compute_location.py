"""compute_at and reverse_compute_at: move a block under a loop of its consumer (producer), computing
only the region that the loop's iteration needs (produces), found by region inference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from compiler.arith import bound, conjuncts, extent_expr, extent_range, linear, simplify, symbolic_range
from compiler.ir import (
    TRUE,
    Binary,
    Block,
    Buffer,
    Const,
    Expr,
    For,
    IterVar,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    const,
    static_dim,
    structural_equal,
)
from compiler.ops import Op
from compiler.schedule.errors import ScheduleError, check, static_extent
from compiler.schedule.tree import (
    Path,
    check_order,
    check_order_of,
    find_block,
    find_loop,
    get,
    insert_at,
    is_ancestor,
    loops_above,
    nest_root,
    readers,
    set_at,
)
from compiler.visit import block_loads, blocks, free_vars, loop_vars, substitute

Fresh = Callable[[str], Var]
Region = list[tuple[Expr, Expr]]  # per dimension: inclusive [lo, hi] as expressions of outer loops


def compute_at(func: PrimFunc, block_name: str, loop_name: str, fresh: Fresh) -> PrimFunc:
    """Compute block `block_name` under loop `loop_name`, where its consumers use it."""
    plan = _plan_compute_at(func, block_name, loop_name)
    _, new_nest = _rebuild(plan.block, plan.region, plan.outer, fresh, plan.where)
    body = _remove(func.body, plan.path)
    loop_path, _ = find_loop(body, loop_name)
    body = insert_at(body, loop_path, plan.index, new_nest)  # where the plan checked the order
    return replace(func, body=body)


def can_compute_at(func: PrimFunc, block_name: str, loop_name: str) -> bool:
    """Whether compute_at would succeed: every check it makes, without building the new program (the
    guards of the moved block and the edited tree are most of its cost)."""
    try:
        _plan_compute_at(func, block_name, loop_name)
    except ScheduleError:
        return False
    return True


@dataclass(frozen=True)
class _ComputeAtPlan:
    where: str
    path: Path  # of the block
    block: Block
    region: Region  # of the block's output that one iteration of the loop must produce
    outer: dict[Var, tuple[int, int]]  # ranges of the loop and the loops around it
    index: int  # child of the loop the moved nest goes before


def _plan_compute_at(func: PrimFunc, block_name: str, loop_name: str) -> _ComputeAtPlan:
    """Every legality check of compute_at, and what applying it needs; raises ScheduleError."""
    path, block = find_block(func.body, block_name)
    loop_path, loop = find_loop(func.body, loop_name)
    where = f"compute_at({block_name!r}, {loop_name!r})"
    check(not is_ancestor(loop_path, path), f"{where}: the block is already under that loop")
    _check_movable(block, where)
    buf = block.body.buffer
    check(
        buf not in func.params,
        f"{where}: block writes the function output {buf.name}; use reverse_compute_at",
    )
    # A reduction reads its own output; that read is not a consumer to place the block before.
    consumers = [c for c in readers(func.body, buf) if c.name != block_name]
    check(bool(consumers), f"{where}: block has no consumer")
    under = {b.name for b in blocks(loop)}
    outside = [c.name for c in consumers if c.name not in under]
    check(not outside, f"{where}: consumer block(s) {outside} are not under the loop")
    region = _read_region(func.body, loop_path, buf, consumers)
    if region is None:
        raise ScheduleError(f"{where}: cannot infer the region of {buf.name} the consumers read")
    outer = _outer_ranges(func.body, loop_path, loop)
    for iv, (lo, hi) in zip(block.iter_vars, _iter_ranges(block, region, where)):
        _extent(iv, lo, hi, outer, where)
    # The block is not under the loop, so removing it leaves the loop's children as they are.
    index = _first_child_with(loop, {c.name for c in consumers})
    kids = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    first_after = blocks(kids[index])[0].name
    old = blocks(func.body)
    new = [b for b in old if b.name != block_name]
    at = next(k for k, b in enumerate(new) if b.name == first_after)
    check_order_of(old, [*new[:at], block, *new[at:]], block_name)
    return _ComputeAtPlan(where, path, block, region, outer, index)


def reverse_compute_at(func: PrimFunc, block_name: str, loop_name: str, fresh: Fresh) -> PrimFunc:
    """Compute block `block_name` under loop `loop_name`, right after its producers there."""
    path, block = find_block(func.body, block_name)
    loop_path, loop = find_loop(func.body, loop_name)
    where = f"reverse_compute_at({block_name!r}, {loop_name!r})"
    check(not is_ancestor(loop_path, path), f"{where}: the block is already under that loop")
    _check_movable(block, where)
    under = blocks(loop)
    produced = [
        buf
        for buf in dict.fromkeys(ld.buffer for ld in block_loads(block))
        if any(buf == b.body.buffer for b in under)
    ]
    check(
        len(produced) == 1,
        f"{where}: block must read exactly one buffer produced under the loop, "
        f"found {[b.name for b in produced]}",
    )
    buf = produced[0]
    producers = [b for b in under if b.body.buffer == buf]
    _check_complete(func.body, loop_path, producers, where)
    _check_contiguous(func.body, loop_path, producers, where)
    region = _write_region(func.body, loop_path, producers)
    if region is None:
        raise ScheduleError(f"{where}: cannot infer the region of {buf.name} written under the loop")
    outer = _outer_ranges(func.body, loop_path, loop)
    own_region = _consumer_domain(block, buf, region, outer, where)
    guard = _common_outer_guard(producers, outer)
    new_block, new_nest = _rebuild(block, own_region, outer, fresh, where, by_iter_var=True, guard=guard)
    body = _remove(func.body, path)
    loop_path, loop = find_loop(body, loop_name)
    index = _last_child_with(loop, {p.name for p in producers}) + 1
    body = insert_at(body, loop_path, index, new_nest)
    check_order(func.body, body, new_block.name)
    return replace(func, body=body)


def _common_outer_guard(producers: list[Block], outer: dict[Var, tuple[int, int]]) -> Expr:
    """The conditions of the producers' predicates on the loops at and above the target alone (the
    overhang of a guarded split there): in an iteration where they fail, no producer writes anything,
    and the moved consumer must not run either, or it reads elements no iteration has written yet."""
    first, *others = [conjuncts(p.predicate) for p in producers]
    guard: Expr = TRUE
    for c in first:
        shared = all(any(structural_equal(c, o) for o in other) for other in others)
        if shared and loop_vars(c) <= outer.keys():
            guard = Binary(Op.AND, guard, c)
    return guard


def _check_movable(block: Block, where: str) -> None:
    """A moved block may run more than once per element (overlapping regions), so it must be
    idempotent: not a scan step that reads the state it writes (a stage of a scan's body that only
    reads other buffers may move, as TVM's multi-stage scan schedule moves it), and not a reduction
    update whose init was decomposed away."""
    scan_step = any(iv.kind == "O" for iv in block.iter_vars)
    store = block.body
    own = [ld for ld in block_loads(block) if ld.buffer == store.buffer]
    reads_state = any(
        not all(structural_equal(a, b) for a, b in zip(ld.indices, store.indices)) for ld in own
    )
    check(
        not (scan_step and reads_state),
        f"{where}: block {block.name!r} is a scan step that reads its own state; it cannot be moved",
    )
    check(
        block.init is not None or not block.is_reduction,
        f"{where}: block {block.name!r} accumulates without an init (decompose_reduction was applied); "
        "move it before decomposing the reduction",
    )


def _ranges_between(body: Stmt, loop_path: Path, block_path: Path) -> dict[Var, tuple[int, int]]:
    """Loops strictly inside `loop_path` that enclose the block: they sweep their whole range. A loop
    over a run-time extent sweeps at most its largest range: the region is then the most the loop
    can touch, and the blocks placed over it are guarded by their domains (`_in_domain`), so the
    elements past the run-time extent are neither computed from nor written."""
    return {
        lp.var: extent_range(lp.extent) for p, lp in loops_above(body, block_path) if len(p) > len(loop_path)
    }


def _outer_ranges(body: Stmt, loop_path: Path, loop: For) -> dict[Var, tuple[int, int]]:
    """The loops down to the compute location, each at its numeric bounds (over a symbolic extent, up
    to the range's largest value): the region moved under them is an expression of their variables."""
    ranges = {lp.var: extent_range(lp.extent) for _, lp in loops_above(body, loop_path)}
    ranges[loop.var] = extent_range(loop.extent)
    return ranges


def _union(regions: list[Region]) -> Region:
    out = regions[0]
    for r in regions[1:]:
        out = [
            (simplify(Binary(Op.MIN, a[0], b[0])), simplify(Binary(Op.MAX, a[1], b[1])))
            for a, b in zip(out, r)
        ]
    return out


def _access_region(body: Stmt, loop_path: Path, block: Block, indices: tuple[Expr, ...]) -> Region | None:
    block_path = find_block(body, block.name)[0]
    inner = _ranges_between(body, loop_path, block_path)
    sub = dict(zip((iv.var for iv in block.iter_vars), block.bindings))
    region = []
    for idx in indices:
        r = symbolic_range(substitute(idx, sub), inner)
        if r is None:
            return None
        region.append(r)
    return region


def _read_region(body: Stmt, loop_path: Path, buf: Buffer, consumers: list[Block]) -> Region | None:
    regions = []
    for c in consumers:
        for ld in block_loads(c):
            if ld.buffer == buf:
                r = _access_region(body, loop_path, c, ld.indices)
                if r is None:
                    return None
                regions.append(r)
    return _union(regions)


def _write_region(body: Stmt, loop_path: Path, producers: list[Block]) -> Region | None:
    regions = []
    for p in producers:
        r = _access_region(body, loop_path, p, p.body.indices)
        if r is None:
            return None
        regions.append(r)
    return _union(regions)


def _check_complete(body: Stmt, loop_path: Path, producers: list[Block], where: str) -> None:
    """Under the loop, a producer's reduction must finish within one iteration of the loop."""
    loop = get(body, loop_path)
    assert isinstance(loop, For)
    outer_vars = {lp.var for _, lp in loops_above(body, loop_path)} | {loop.var}
    for p in producers:
        for iv, b in zip(p.iter_vars, p.bindings):
            if iv.kind != "S" and free_vars(b) & outer_vars:
                raise ScheduleError(
                    f"{where}: the {'reduction' if iv.kind == 'R' else 'recurrence'} of producer "
                    f"{p.name!r} over {iv.var.name} is not finished inside the loop"
                )


def _check_contiguous(body: Stmt, loop_path: Path, producers: list[Block], where: str) -> None:
    """One iteration of the loop must produce a dense box of the buffer, not a strided subset.

    The consumer is rebuilt over the box; with gaps it would read elements that a later iteration
    produces, which is wrong once the buffer is compacted to one iteration's region."""
    for p in producers:
        inner = _ranges_between(body, loop_path, find_block(body, p.name)[0])
        sub = dict(zip((iv.var for iv in p.iter_vars), p.bindings))
        indices = tuple(simplify(substitute(idx, sub)) for idx in p.body.indices)
        sparse = [d for d, idx in enumerate(indices) if not _sweeps_interval(idx, inner)]
        if not sparse:
            continue
        check(
            _run_fills_box(body, loop_path, p, indices, inner, range(sparse[0], sparse[-1] + 1)),
            f"{where}: producer {p.name!r} writes a strided part of dimension {sparse[0]} of "
            f"{p.body.buffer.name} in one iteration of the loop; move the block to a loop "
            "outside the strided loops",
        )


def _run_fills_box(
    body: Stmt,
    loop_path: Path,
    producer: Block,
    indices: tuple[Expr, ...],
    inner: dict[Var, tuple[int, int]],
    group: range,
) -> bool:
    """Whether the dimensions `group`, which one iteration does not write densely one by one, are
    written as one contiguous run of their row-major offset that is exactly the box the region gives
    them: a fused loop's `f // W` and `f % W` over whole rows of f (a 1x1 conv's image, its rows
    fused, in tiles of two rows of 14). The run is dense and unguarded, so it writes as many elements
    as it has points; the box, each dimension at its largest extent wherever the outer loops are,
    holds them and is no larger, so they are the box. The other dimensions are dense one by one
    (`_sweeps_interval`) and vary with other loops, so the whole write is a box."""
    if free_vars(producer.predicate) & inner.keys():
        return False  # a guard may skip points of the run: fewer elements written than counted
    shape = producer.body.buffer.shape
    offset: Expr = const(0)
    for d in group:
        offset = Binary(Op.ADD, Binary(Op.MUL, offset, const(static_dim(shape[d], "compute_at"))), indices[d])
    offset = simplify(offset)
    swept = {v for d in group for v in free_vars(indices[d]) & inner.keys()}
    others = {v for d, idx in enumerate(indices) if d not in group for v in free_vars(idx) & inner.keys()}
    if swept & others or not _sweeps_interval(offset, inner):
        return False
    run = 1
    for atom, coef in linear(offset).terms.items():
        if isinstance(atom, Var) and atom in inner:  # the rest is fixed in one iteration (`_sweeps_interval`)
            run += abs(coef) * (inner[atom][1] - inner[atom][0])
    region = _access_region(body, loop_path, producer, producer.body.indices)
    if region is None:
        return False
    loop = get(body, loop_path)
    assert isinstance(loop, For)
    outer = _outer_ranges(body, loop_path, loop)
    box = 1
    for lo, hi in (region[d] for d in group):
        extent = bound(simplify(Binary(Op.ADD, Binary(Op.SUB, hi, lo), const(1)), outer), outer)
        if extent is None:
            return False
        box *= extent[1]
    return box == run


def _sweeps_interval(index: Expr, inner: dict[Var, tuple[int, int]]) -> bool:
    """Whether `index` takes every integer between its bounds as the inner loops sweep their ranges:
    sorted by stride, each loop's stride must not exceed the span the smaller strides cover, plus one."""
    strides = []
    for atom, coef in linear(index).terms.items():
        if not free_vars(atom) & inner.keys():
            continue  # fixed during one iteration of the loop
        if not isinstance(atom, Var):
            return False  # a div/mod of an inner loop: not provably dense
        lo, hi = inner[atom]
        if hi > lo:
            strides.append((abs(coef), hi - lo))
    reach = 0
    for stride, span in sorted(strides):
        if stride > reach + 1:
            return False
        reach += stride * span
    return True


def _consumer_domain(
    block: Block, buf: Buffer, region: Region, outer: dict[Var, tuple[int, int]], where: str
) -> Region:
    """Map the produced region of `buf` onto the consumer's own iteration variables.

    The region is a dense box (see `_check_contiguous`); every read of `buf` must be at the mapped
    variables themselves (no `Y[i + 1]`), so the consumer reads exactly what the iteration produced.
    A variable may also be read as a blocked layout's pair, `v // c` and `v % c` (a conv computed in
    blocks of output channels, read back in NCHW by its epilogue): where the box holds whole blocks,
    v ranges over them (`outer`: the ranges of the loops around the region's bounds)."""
    reads = [ld for ld in block_loads(block) if ld.buffer == buf]
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S"}
    mapped: dict[Var, int] = {}
    for ld in reads:
        for d, idx in enumerate(ld.indices):
            if isinstance(idx, Var) and idx in spatial:
                mapped.setdefault(idx, d)
    blocked = {
        v: pair for v, pair in blocked_reads(reads[0].indices).items() if v in spatial and v not in mapped
    }
    coarse = {
        v: pair
        for v, pair in coarse_reads(reads[0].indices).items()
        if v in spatial and v not in mapped and v not in blocked
    }
    check(
        bool(mapped or blocked or coarse),
        f"{where}: block {block.name!r} must read {buf.name} at its own iteration variables",
    )
    covered = {*mapped.values(), *(d for pair in blocked.values() for d in pair[:2])}
    covered |= {dim for dim, _, _ in coarse.values()}
    # A spatial variable left over its whole range must not read a dimension the loop produces in
    # parts: each iteration would write every element of the consumer from what it did not produce
    # (under a parallel loop, what other iterations are producing).
    for ld in reads:
        for d, idx in enumerate(ld.indices):
            if d in covered or not free_vars(idx) & spatial:
                continue
            check(
                _whole(region[d], static_dim(buf.shape[d], "compute_at"), outer),
                f"{where}: block {block.name!r} reads {buf.name} at dimension {d} by {idx}, "
                "of which the loop produces parts",
            )
    for ld in reads:
        shifted = [v.name for v, d in mapped.items() if not structural_equal(ld.indices[d], v)]
        shifted += [v.name for v, pair in blocked.items() if blocked_reads(ld.indices).get(v) != pair]
        shifted += [v.name for v, pair in coarse.items() if coarse_reads(ld.indices).get(v) != pair]
        check(
            not shifted,
            f"{where}: block {block.name!r} reads {buf.name} at neighbouring elements along {shifted}, "
            "which later iterations of the loop produce",
        )
    ranges = {v: region[d] for v, d in mapped.items()}
    for v, (div_dim, mod_dim, size) in blocked.items():
        check(
            _whole(region[mod_dim], size, outer),
            f"{where}: block {block.name!r} reads {buf.name} in blocks of {size} along {v.name}, "
            "of which the loop produces parts",
        )
        ranges[v] = _blocks_of(region[div_dim], size)
    for v, (dim, size, others) in coarse.items():
        for d in others:
            check(
                _whole(region[d], static_dim(buf.shape[d], "compute_at"), outer),
                f"{where}: block {block.name!r} reads {buf.name} along {v.name} at dimension {d}, "
                "of which the loop produces parts",
            )
        ranges[v] = _blocks_of(region[dim], size)
    return [
        ranges.get(iv.var, (const(0), simplify(Binary(Op.SUB, extent_expr(iv.extent), const(1)))))
        for iv in block.iter_vars
    ]


def _whole(span: tuple[Expr, Expr], extent: int, outer: dict[Var, tuple[int, int]]) -> bool:
    """Whether a region's range along one dimension is all of its `extent`, wherever the loops are."""
    lo, hi = (bound(e, outer) for e in span)
    return lo == (0, 0) and hi == (extent - 1, extent - 1)


def _blocks_of(span: tuple[Expr, Expr], size: int) -> tuple[Expr, Expr]:
    """The range of v where `v // size` spans `span`."""
    first, last = span
    return Binary(Op.MUL, first, const(size)), Binary(
        Op.ADD, Binary(Op.MUL, last, const(size)), const(size - 1)
    )


def blocked_reads(indices: tuple[Expr, ...]) -> dict[Var, tuple[int, int, int]]:
    """The variables an access reads as a blocked layout's pair, `v // c` at one dimension and
    `v % c` at another: each with (the dimension of v // c, that of v % c, c)."""
    parts: dict[tuple[Var, int, Op], int] = {}
    for d, idx in enumerate(indices):
        if (
            isinstance(idx, Binary)
            and idx.op in (Op.FLOORDIV, Op.FLOORMOD)
            and isinstance(idx.a, Var)
            and isinstance(idx.b, Const)
            and isinstance(idx.b.value, int)
        ):
            parts[(idx.a, idx.b.value, idx.op)] = d
    return {
        v: (d, parts[(v, size, Op.FLOORMOD)], size)
        for (v, size, op), d in parts.items()
        if op is Op.FLOORDIV and (v, size, Op.FLOORMOD) in parts
    }


def coarse_reads(indices: tuple[Expr, ...]) -> dict[Var, tuple[int, int, tuple[int, ...]]]:
    """The variables an access reads as `v // c` at one dimension (a Winograd output transform reads
    its tile of the product so: `M[.., y // m, ..]`): each with (that dimension, c, the other
    dimensions whose index involves v, such as the transform point picked by `y % m`)."""
    divided: dict[Var, list[tuple[int, int]]] = {}
    others: dict[Var, list[int]] = {}
    for d, idx in enumerate(indices):
        if (
            isinstance(idx, Binary)
            and idx.op is Op.FLOORDIV
            and isinstance(idx.a, Var)
            and isinstance(idx.b, Const)
            and isinstance(idx.b.value, int)
            and idx.b.value > 0
        ):
            divided.setdefault(idx.a, []).append((d, idx.b.value))
        else:
            for v in free_vars(idx):
                others.setdefault(v, []).append(d)
    return {
        v: (found[0][0], found[0][1], tuple(others.get(v, ())))
        for v, found in divided.items()
        if len(found) == 1
    }


def _rebuild(
    block: Block,
    region: Region,
    outer: dict[Var, tuple[int, int]],
    fresh: Fresh,
    where: str,
    by_iter_var: bool = False,
    guard: Expr = TRUE,
) -> tuple[Block, Stmt]:
    """New loops for `block` covering `region`: one per iteration variable, unit loops dropped.

    With `by_iter_var`, region[k] is the range of iteration variable k; otherwise region[d] is the
    range of dimension d of the block's output, which must be written at plain iteration variables.
    The new block's predicate is `guard` and that each variable stays in its domain.
    """
    ranges = region if by_iter_var else _iter_ranges(block, region, where)
    loops: list[tuple[Var, int | Expr]] = []
    bindings: list[Expr] = []
    guards: Expr = guard
    for iv, (lo, hi) in zip(block.iter_vars, ranges):
        extent = _extent(iv, lo, hi, outer, where)
        if extent == iv.extent:
            lo = const(0)
        if isinstance(extent, int) and extent <= 1 and bound(lo, outer) is not None:
            value = lo
        else:
            v = fresh(f"ax{len(loops)}" if iv.kind == "S" else iv.var.name.removeprefix("v_"))
            loops.append((v, extent))
            value = simplify(Binary(Op.ADD, lo, v)) if iv.kind == "S" else v
        bindings.append(value)
        guards = Binary(Op.AND, guards, _in_domain(value, iv, outer, dict(loops)))
    new_block = replace(block, bindings=tuple(bindings), predicate=simplify(guards))
    stmt: Stmt = new_block
    for v, e in reversed(loops):
        stmt = For(v, e, stmt)
    return new_block, stmt


def _extent(iv: IterVar, lo: Expr, hi: Expr, outer: dict[Var, tuple[int, int]], where: str) -> int | Expr:
    """Iterations a new loop over [lo, hi] of `iv` needs: the region's largest extent, or the whole
    domain when the region can reach past it (clipping `lo + v` to the domain could miss its far end,
    so such a loop covers the whole domain from 0)."""
    extent_expr = simplify(Binary(Op.ADD, Binary(Op.SUB, hi, lo), const(1)), outer)
    ext = bound(extent_expr, outer)
    if ext is None:
        raise ScheduleError(f"{where}: the extent of {iv.var.name} is not bounded ({extent_expr})")
    largest = extent_range(iv.extent)[1] + 1
    return iv.extent if ext[1] >= largest else ext[1]


def _iter_ranges(block: Block, region: Region, where: str) -> list[tuple[Expr, Expr]]:
    """The range of each iteration variable that writes `region`: a spatial variable (or the time
    variable of a scan stage, which writes row `t + start`) from the dimension it indexes, shifted
    by the constant beside it; a reduction variable over its whole domain."""
    write = block.body.indices
    out: list[tuple[Expr, Expr]] = []
    for iv in block.iter_vars:
        if iv.kind == "R":
            out.append((const(0), const(static_extent(iv.extent, "compute_at", iv.var.name) - 1)))
            continue
        dims = [(d, shift) for d, idx in enumerate(write) if (shift := _shift(idx, iv.var)) is not None]
        check(
            len(dims) == 1,
            f"{where}: block {block.name!r} must write its buffer at plain iteration variables "
            f"(found {iv.var.name} in {len(dims)} dimensions)",
        )
        d, shift = dims[0]
        lo, hi = region[d]
        out.append((simplify(lo - shift), simplify(hi - shift)) if shift else (lo, hi))
    return out


def _shift(index: Expr, var: Var) -> int | None:
    """c where `index` is `var + c`, else None."""
    if structural_equal(index, var):
        return 0
    form = linear(index)
    return form.constant if form.terms == {var: 1} else None


def _in_domain(
    value: Expr, iv: IterVar, outer: dict[Var, tuple[int, int]], loops: dict[Var, int | Expr]
) -> Expr:
    """The guard `0 <= value < extent`, dropped where bounds prove it."""
    ranges = {**outer, **{v: extent_range(e) for v, e in loops.items()}}
    lo_ok = simplify(Binary(Op.GE, value, const(0)), ranges)
    hi_ok = simplify(Binary(Op.LT, value, extent_expr(iv.extent)), ranges)
    return simplify(Binary(Op.AND, lo_ok, hi_ok))


def _remove(body: Stmt, path: Path) -> Stmt:
    new = set_at(body, nest_root(body, path), None)
    if new is None:
        raise ScheduleError("cannot move the only block of the function")
    return new


def _child_names(loop: For) -> list[set[str]]:
    kids = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    return [{b.name for b in blocks(k)} for k in kids]


def _first_child_with(loop: For, names: set[str]) -> int:
    return next(i for i, kid in enumerate(_child_names(loop)) if kid & names)


def _last_child_with(loop: For, names: set[str]) -> int:
    return max(i for i, kid in enumerate(_child_names(loop)) if kid & names)
