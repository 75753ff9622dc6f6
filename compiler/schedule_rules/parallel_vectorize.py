"""The blocks no other rule placed: a producer (e.g. padding) samples its compute location (the root
or a loop of its consumer); a block left at the root gets its outer spatial loops fused in parallel
and its innermost spatial loop split and vectorized (a pool's window loops move inside that loop's
outer tile: `analysis.window_loop`). One rule, not two, because a consumer's loops must be
parallelized before its producer picks one of them (the blocks go consumers first)."""

from __future__ import annotations

from compiler.ir import static_dim
from compiler.schedule import Schedule
from compiler.schedule.tree import find_loop, readers
from compiler.schedule_rules.analysis import block_of, loop_kinds, window_loop
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.decisions import Decisions
from compiler.schedule_rules.rule import BlockRule, RuleContext, attempt


class ParallelVectorize(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        block = block_of(sch.func, name)
        if block.body.buffer not in sch.func.params and readers(sch.func.body, block.body.buffer):
            rv = sch.get_block(name)
            loop = sch.sample_compute_location(rv, decision=ctx.decide.compute_location(sch.func, name))
            if loop.name != "root" and attempt(sch.compute_at, rv, loop):
                return
        parallelize_vectorize(sch, name, ctx.cfg, ctx.decide)


def parallelize_vectorize(sch: Schedule, name: str, cfg: RuleConfig, decide: Decisions) -> None:
    """Vectorize a tile of the innermost spatial loop; run the leading spatial loops in parallel.

    A reduction whose loops end in its reduction loops vectorizes its innermost spatial loop when
    the block reads along it in steps of at most `analysis.WINDOW_STRIDE` elements (a pool's window, a
    column sum): the reduction loops move inside that loop's outer tile and the init is decomposed
    out, so each step of the window is one vector operation over a row of outputs. ResNet-18's max
    pool ran its 9 taps one output at a time: 226 us tuned, 93 us so by default with its padding
    computed per row (`default_schedule`), on a Rocket Lake (bench/results/2026-11-25-e.md)."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = loop_kinds(sch.func, name)
    at = len(kinds) - 1 if kinds and kinds[-1] == "S" else window_loop(sch.func, name)
    if at is not None:
        extent = static_dim(find_loop(sch.func.body, loops[at].name)[1].extent, "parallel_vectorize")
        tiles = sch.sample_perfect_tile(
            loops[at], n=2, max_innermost_factor=cfg.max_vector_row, decision=decide.vector_tile(extent)
        )
        outer, inner = sch.split(loops[at], tiles)
        reductions = loops[at + 1 :]
        if reductions:
            sch.reorder(outer, *reductions, inner)
            sch.decompose_reduction(block, reductions[0])
        attempt(sch.vectorize, inner)
        loops = [*loops[:at], outer, *reductions]
    leading = []
    for loop, kind in zip(loops, kinds):
        if kind != "S":
            break
        leading.append(loop)
    extents = [
        static_dim(find_loop(sch.func.body, lp.name)[1].extent, "parallel_vectorize") for lp in leading
    ]
    leading = leading[: decide.parallel_loops(extents, reduction_inside=len(leading) < len(loops))]
    if leading:
        attempt(sch.parallel, sch.fuse(*leading) if len(leading) > 1 else leading[0])
