"""A matrix-vector product whose matrix is read along the reduction (`y[j] = sum_k x[k] * w[j, k]`: a
dense layer's [out, in] weights at batch 1) as dot products of contiguous rows, as TVM's dlight
GEMV rule schedules it on GPUs.

Multi-level tiling vectorizes a spatial loop: here the only one is j, along which the weights are
a row apart, so each vector of the register tile gathered 16 rows (1x1024 -> 1024 ran 473-913 us
against numpy's 45). Instead the reduction is split by the vector's lanes and factored along its
inner part (`rfactor`): each row of a tile of the matrix accumulates a vector of partial sums from
contiguous loads, in registers (a local tile), the tiles run in parallel, and a small block sums
each row's lanes. The rows per tile are the one choice (`Decisions.dot_rows`). So scheduled, 1x512
-> 1000 to 1x3072 -> 768 ran 0.87-0.98x numpy (bench/results/2026-12-02-d.md)."""

from __future__ import annotations

from compiler.codegen_vector import flat_index, stride_in
from compiler.interpret import reduction_parts
from compiler.schedule import Schedule
from compiler.schedule.tree import find_block, loops_above
from compiler.schedule_rules.analysis import is_tiling_target, loop_kinds
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.rule import BlockRule, RuleContext
from compiler.visit import block_loads

ROWS = 4  # the default schedule's rows of the matrix per tile: their partial sums fill 4 registers
MAX_ROWS = 8  # the search's most (8 ran 0.76-1.27x numpy by hand, 4 0.63-1.06x, shape by shape)
# The smallest matrix the rule takes: 1x128 -> 10 took 3.5 us so in parallel, 2.7 serial, 2.1
# as multi-level tiling schedules it.
MIN_ELEMENTS = 1 << 15


class DotRows(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        rows = _dot_rows(sch, name, ctx.cfg)
        if rows is None:
            return
        lanes = ctx.cfg.vector_lanes
        block = sch.get_block(name)
        *spatial, k = sch.get_loops(block)
        _, lane = sch.split(k, [None, lanes])
        rf = sch.rfactor(lane, len(spatial))  # the partial sums' buffer: lanes last, contiguous
        *outer, row, k_outer, k_lane = sch.get_loops(rf)
        tiles = sch.sample_perfect_tile(
            row, n=2, max_innermost_factor=MAX_ROWS, decision=ctx.decide.dot_rows(rows)
        )
        rows_outer, rows_inner = sch.split(row, tiles)
        sch.reorder(*outer, rows_outer, k_outer, rows_inner, k_lane)
        parallel = sch.fuse(*outer, rows_outer) if outer else rows_outer
        sch.parallel(parallel)
        sch.vectorize(k_lane)
        local = sch.cache_write(rf, 0, "local")
        sch.reverse_compute_at(local, parallel)
        ctx.placed |= {rf.name, local.name}


def _dot_rows(sch: Schedule, name: str, cfg: RuleConfig) -> int | None:
    """The extent of j where the block is a float32 te-form reduction over one loop (spatial loops,
    then it) of a whole number of vectors, its spatial loops of extent 1 but the last (j, at least
    one row per core, MIN_ELEMENTS with the reduction), reading some operand contiguously along the
    reduction and rows apart along j (the matrix), and some operand not along j (the vector); else
    None."""
    path, block = find_block(sch.func.body, name)  # read from the IR: no query enters the trace
    loops = [lp for _, lp in loops_above(sch.func.body, path)]
    if block.init is None or reduction_parts(block) is None or block.body.buffer.dtype != "float32":
        return None
    if not is_tiling_target(sch.func, name):
        return None  # no vector shared by the rows: a row sum (`add_rfactor`, `parallel_vectorize`)
    if [iv.kind for iv in block.iter_vars] != loop_kinds(sch.func, name) or block.iter_vars[-1].kind != "R":
        return None
    if any(b is not lp.var for b, lp in zip(block.bindings, loops)) or len(loops) < 2:
        return None  # scheduled already, or not one loop per variable
    *spatial, reduction = [lp.extent for lp in loops]
    if "R" in [iv.kind for iv in block.iter_vars[:-1]] or any(e != 1 for e in spatial[:-1]):
        return None
    rows = spatial[-1]
    lanes = cfg.vector_lanes
    if (
        not isinstance(rows, int)
        or not isinstance(reduction, int)
        or reduction % lanes
        or rows * reduction < MIN_ELEMENTS
        or rows < cfg.cores
    ):
        return None
    j, k = block.iter_vars[-2].var, block.iter_vars[-1].var
    for load in block_loads(block):
        flat = flat_index(load.buffer, load.indices)
        if stride_in(flat, k) == 1 and (stride_in(flat, j) or 0) >= lanes:
            return rows
    return None
