"""decompose_reduction: move a reduction's init into its own block before a loop, so the update loop
nest has no branch and vectorizes cleanly. As in TVM, the two blocks are `<name>_init` and
`<name>_update`; the update remembers its old name (`Block.former_name`), by which handles, stored
traces and schedule rules still find it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from compiler.arith import conjuncts, simplify
from compiler.ir import TRUE, Binary, Block, Expr, For, PrimFunc, Stmt, Var
from compiler.names import unique_name
from compiler.ops import Op
from compiler.schedule.errors import ScheduleError, check
from compiler.schedule.tree import (
    find_block,
    find_loop,
    insert_sibling,
    is_ancestor,
    loops_above,
    taken_block_names,
)
from compiler.visit import free_vars, loop_vars, map_blocks, substitute

Fresh = Callable[[str], Var]


def decompose_reduction(
    func: PrimFunc, block_name: str, loop_name: str, fresh: Fresh
) -> tuple[PrimFunc, str]:
    """Split block `block_name` into `<name>_init` placed before loop `loop_name`, and the update,
    renamed `<name>_update`; returns the init's name. Each name is made unique (a te compute may be
    called `Y_update` already)."""
    where = f"decompose_reduction({block_name!r}, {loop_name!r})"
    path, block = find_block(func.body, block_name)
    loop_path, _ = find_loop(func.body, loop_name)
    if block.init is None:
        raise ScheduleError(f"{where}: block has no init (not a reduction, or already decomposed)")
    check(is_ancestor(loop_path, path), f"{where}: the loop does not enclose the block")
    enclosing = loops_above(func.body, path)
    outer = [lp for p, lp in enclosing if len(p) < len(loop_path)]
    inner = [lp for p, lp in enclosing if len(p) >= len(loop_path)]
    reduce_vars = set().union(
        *(free_vars(b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind != "S")
    )
    spatial_vars = set().union(
        *(free_vars(b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "S")
    )
    above = [lp.var.name for lp in outer if lp.var in reduce_vars]
    check(not above, f"{where}: reduction loop(s) {above} enclose the loop; the init would run repeatedly")
    mixed = [lp.var.name for lp in inner if lp.var in reduce_vars and lp.var in spatial_vars]
    check(not mixed, f"{where}: loop(s) {mixed} mix spatial and reduction iterations")
    copies = {lp.var: fresh(f"{lp.var.name}_init") for lp in inner if lp.var in spatial_vars}
    keep = {lp.var for lp in outer} | set(copies)
    spatial = [(iv, b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "S"]
    pred: Expr = TRUE
    for c in conjuncts(block.predicate):
        if loop_vars(c) <= keep:  # guards of reduction loops do not concern the init
            pred = Binary(Op.AND, pred, substitute(c, copies))
    taken = taken_block_names(func.body)
    init_name = unique_name(f"{block_name}_init", taken)
    update_name = unique_name(f"{block_name}_update", taken | {init_name})
    init = Block(
        init_name,
        tuple(iv for iv, _ in spatial),
        tuple(simplify(substitute(b, copies)) for _, b in spatial),
        block.init,
        None,
        simplify(pred),
    )
    stmt: Stmt = init
    for lp in reversed(inner):
        if lp.var in copies:
            stmt = For(copies[lp.var], lp.extent, stmt, lp.kind)
    update = replace(block, name=update_name, init=None, former_name=block.handle_name)
    body = map_blocks(func.body, lambda b: update if b.name == block_name else b)
    return replace(func, body=insert_sibling(body, loop_path, stmt)), init_name
