"""rfactor: turn one loop of a reduction into a spatial axis of partial results, reduced again after.

`Y[i] += A[i, k]` with k split into (ko, ki) and rfactor(ki) becomes a block `Y_rf` that accumulates
`Y_rf[ki, i] += A[i, ko * f + ki]` over ko, whose ki iterations are independent (they can run in
parallel, or as the lanes of a vector), and a write-back block `Y` that reduces `Y_rf` over ki. This
is how a reduction with little spatial parallelism (a batch-1 dense layer, a global pool, a long row
sum) uses more than one core or a vector's lanes: TVM's `sch.rfactor(loop, factor_axis)`.

The new buffer puts the factored axis at `factor_axis` among the output's dimensions; the write-back
block keeps the original name (consumers and later instructions find it as before) and its init,
and the partial results start from the combiner's identity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from compiler.arith import conjuncts, simplify
from compiler.interpret import reduction_parts
from compiler.ir import (
    TRUE,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Expr,
    For,
    IterVar,
    Load,
    PrimFunc,
    Stmt,
    Var,
)
from compiler.names import unique_name
from compiler.ops import Op
from compiler.schedule.errors import check
from compiler.schedule.tree import (
    find_block,
    find_loop,
    insert_sibling,
    loops_above,
    nest_root,
    taken_block_names,
)
from compiler.te import reduction_identity
from compiler.visit import blocks, free_vars, loop_vars, map_blocks, substitute

Fresh = Callable[[str], Var]


def rfactor(func: PrimFunc, loop_name: str, factor_axis: int, fresh: Fresh) -> tuple[PrimFunc, str]:
    """Factor the reduction under loop `loop_name` along that loop; returns the rf block's name."""
    where = f"rfactor({loop_name!r}, {factor_axis})"
    _, loop = find_loop(func.body, loop_name)
    under = blocks(loop)
    check(len(under) == 1, f"{where}: the loop must hold exactly one block, found {[b.name for b in under]}")
    block = under[0]
    parts = reduction_parts(block)
    check(
        block.init is not None and parts is not None,
        f"{where}: block {block.name!r} is not a reduction with its init (out = op(out, value), op "
        "add, max or min; rfactor before decompose_reduction)",
    )
    assert parts is not None and block.init is not None
    combiner, value = parts
    out = block.body.buffer
    check(
        0 <= factor_axis <= len(out.shape),
        f"{where}: factor_axis must be in [0, {len(out.shape)}] for {out.name} of rank {len(out.shape)}",
    )
    path, _ = find_block(func.body, block.name)
    root = nest_root(func.body, path)
    nest = [lp for p, lp in loops_above(func.body, path) if len(p) >= len(root)]
    outer = [lp for p, lp in loops_above(func.body, path) if len(p) < len(root)]
    spatial = _vars_of(block, "S")
    reducing = _vars_of(block, "R")
    check(loop.var in reducing, f"{where}: loop {loop_name!r} does not iterate the reduction")
    mixed = [lp.var.name for lp in nest if lp.var in spatial and lp.var in reducing]
    check(not mixed, f"{where}: loop(s) {mixed} mix spatial and reduction iterations")
    above = [lp.var.name for lp in outer if lp.var in reducing]
    check(not above, f"{where}: reduction loop(s) {above} enclose other blocks' loops too")
    guarded = [c for c in conjuncts(block.predicate) if free_vars(c) & reducing]
    check(not guarded, f"{where}: the reduction's loops are split with a guard; rfactor needs perfect splits")

    rf_var = Var(unique_name(f"v_{loop.var.name}", {iv.var.name for iv in block.iter_vars}))
    rf_buffer = Buffer(
        unique_name(f"{out.name}_rf", {b.name for b in func.params + func.allocs}),
        out.shape[:factor_axis] + (loop.extent,) + out.shape[factor_axis:],
        out.dtype,
    )
    f = _Factoring(block, loop, rf_var, rf_buffer, factor_axis, combiner, nest)
    rf_block = _rf_block(f, value, unique_name(f"{block.name}_rf", taken_block_names(func.body)))
    write_back = _write_back(f, outer, fresh)
    body = map_blocks(func.body, lambda b: rf_block if b.name == block.name else b)
    body = insert_sibling(body, root, write_back, after=True)
    return replace(func, body=body, allocs=(*func.allocs, rf_buffer)), rf_block.name


@dataclass(frozen=True)
class _Factoring:
    """The reduction block, the loop factored out of it, and what the factoring names."""

    block: Block
    loop: For
    rf_var: Var  # the factored axis, spatial in the rf block, reduced by the write-back
    rf_buffer: Buffer
    factor_axis: int
    combiner: Op
    nest: list[For]  # the loops around the block that hold nothing else

    def rf_index(self, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return (*indices[: self.factor_axis], self.rf_var, *indices[self.factor_axis :])


def _vars_of(block: Block, kind: str) -> set[Var]:
    """The loop variables the block's `kind` iteration variables are bound to."""
    out: set[Var] = set()
    for iv, b in zip(block.iter_vars, block.bindings):
        if iv.kind == kind:
            out |= free_vars(b)
    return out


def _rf_block(f: _Factoring, value: Expr, name: str) -> Block:
    """The partial reduction: the block's spatial variables and the factored loop's as spatial ones,
    the nest's other reduction loops as its reduction variables."""
    block = f.block
    reducing = _vars_of(block, "R")
    names = {iv.var.name for iv in block.iter_vars} | {f.rf_var.name}
    new_vars: dict[Var, Var] = {f.loop.var: f.rf_var}
    reduce_ivs = []
    for lp in f.nest:
        if lp.var in reducing and lp.var != f.loop.var:
            v = Var(unique_name(f"v_{lp.var.name}", names))
            names.add(v.name)
            new_vars[lp.var] = v
            reduce_ivs.append((IterVar(v, lp.extent, "R"), lp.var))
    old_reduce = {
        iv.var: simplify(substitute(b, new_vars))
        for iv, b in zip(block.iter_vars, block.bindings)
        if iv.kind == "R"
    }
    spatial = [(iv, b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "S"]
    index = f.rf_index(block.body.indices)
    iter_vars = (
        *(iv for iv, _ in spatial),
        IterVar(f.rf_var, f.loop.extent, "S"),
        *(iv for iv, _ in reduce_ivs),
    )
    bindings = (*(b for _, b in spatial), f.loop.var, *(lv for _, lv in reduce_ivs))
    partial = substitute(value, old_reduce)
    if not reduce_ivs:  # the factored loop was the whole reduction: each partial is one value
        return Block(
            name, iter_vars, bindings, BufferStore(f.rf_buffer, partial, index), None, block.predicate
        )
    return Block(
        name,
        iter_vars,
        bindings,
        BufferStore(f.rf_buffer, Binary(f.combiner, Load(f.rf_buffer, index), partial), index),
        BufferStore(f.rf_buffer, reduction_identity(f.combiner, f.rf_buffer.dtype), index),
        block.predicate,
        block.annotations,
    )


def _write_back(f: _Factoring, outer: list[For], fresh: Fresh) -> Stmt:
    """The block under its own copies of the nest's spatial loops and a loop over the factored axis,
    reducing the partial results into the output with the block's own init."""
    block = f.block
    spatial_loops = _vars_of(block, "S")
    copies = {lp.var: fresh(lp.var.name) for lp in f.nest if lp.var in spatial_loops}
    rf_loop = fresh(f.loop.var.name)
    spatial = [(iv, b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "S"]
    keep = {lp.var for lp in outer} | set(copies)
    pred: Expr = TRUE
    for c in conjuncts(block.predicate):
        if loop_vars(c) <= keep:
            pred = Binary(Op.AND, pred, substitute(c, copies))
    out = block.body
    partials = Load(f.rf_buffer, f.rf_index(out.indices))
    write_back = Block(
        block.name,
        (*(iv for iv, _ in spatial), IterVar(f.rf_var, f.loop.extent, "R")),
        (*(simplify(substitute(b, copies)) for _, b in spatial), rf_loop),
        BufferStore(out.buffer, Binary(f.combiner, Load(out.buffer, out.indices), partials), out.indices),
        block.init,
        simplify(pred),
    )
    stmt: Stmt = For(rf_loop, f.loop.extent, write_back)
    for lp in reversed(f.nest):
        if lp.var in copies:
            stmt = For(copies[lp.var], lp.extent, stmt)
    return stmt
