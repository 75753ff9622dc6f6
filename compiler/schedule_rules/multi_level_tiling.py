"""Multi-level tiling "SSRSRS" of reductions with data reuse (matmul, conv, dense), as MetaSchedule's
rule of that name: spatial loops in 4 tiles, reduction loops in 2, ordered S0 S1 R0 S2 R1 S3.

First, the two innermost spatial loops are fused where every operand reads them as one contiguous run
and the rows are at most half a vector (a 1x1 conv's 7x7 image: `analysis.contiguous_rows`). Each
loop is split with `sample_perfect_tile`, the innermost loop first, so that the innermost spatial
tiles (the register tile) fit the target's vector registers (`_RegisterTile`). The written tile either
stays in place, or goes through a local accumulator (`cache_write` + `reverse_compute_at` at tile
level 1 or 2), or an elementwise consumer is fused there; inputs the decisions name (among
`analysis.packable_reads`: matmul's B) are copied into a contiguous panel per S0 tile; the outer
spatial tiles are fused and run in parallel, the innermost spatial tile is vectorized, the reduction's
init is decomposed out. A loop of rows with an awkward extent (`analysis.row_cover`: 197 tokens) is
tiled as its extent rounded up, the last tile guarded (`sample_covering_tile`)."""

from __future__ import annotations

from compiler.ir import PrimFunc, static_dim
from compiler.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from compiler.schedule.tree import find_block, find_loop
from compiler.schedule_rules.analysis import (
    contiguous_rows,
    elementwise_consumer,
    is_tiling_target,
    loop_kinds,
    row_covers,
)
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.rule import BlockRule, RuleContext, attempt
from compiler.visit import block_loads, free_vars, substitute


class MultiLevelTiling(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        if is_tiling_target(sch.func, name):
            ctx.placed |= _tile(sch, name, ctx)


def _tile(sch: Schedule, name: str, ctx: RuleContext) -> set[str]:
    """Returns the names of the blocks it placed (this one, and a write-back or fused consumer)."""
    cfg, decide = ctx.cfg, ctx.decide
    block = sch.get_block(name)
    placed = {name}
    level = decide.write_level(sch)
    consumer = elementwise_consumer(sch.func, name)
    follower: BlockRV | None = sch.get_block(consumer) if level and consumer else None
    if level and follower is None:
        try:
            follower = sch.cache_write(block, 0, "local")
        except ScheduleError:
            follower = None
    rows = contiguous_rows(sch.func, name, cfg.vector_lanes)
    if rows is not None:
        loops = sch.get_loops(block)
        sch.fuse(loops[rows], loops[rows + 1])
    kinds = loop_kinds(sch.func, name)
    # Every choice before the panels and the splits: the choices read the block's unsplit loops and
    # its inputs.
    decisions = decide.tiles(sch.func, name, kinds)
    order = decide.outer_order(sch.func, name, kinds)
    panels = [sch.cache_read(block, index) for index in decide.packed_reads(sch.func, name, kinds)]
    levels: dict[str, list[list[LoopRV]]] = {"S": [[], [], [], []], "R": [[], []]}
    loops = sch.get_loops(block)
    limits = _RegisterTile(cfg)
    # Innermost loop first: the vectorized tile decides how many registers the other tiles may fill.
    extents = [static_dim(find_loop(sch.func.body, lp.name)[1].extent, "tiling") for lp in loops]
    covers = row_covers(extents, kinds)
    for k, loop, kind, decision in reversed(list(zip(range(len(loops)), loops, kinds, decisions))):
        if kind == "-":
            continue
        n = len(levels[kind])
        limit = limits.next_limit(extents[k]) if kind == "S" else cfg.max_innermost_factor
        cover = covers[k]
        if cover is None:
            tiles = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=limit, decision=decision)
        else:
            tiles = sch.sample_covering_tile(loop, n, limit, cover, decision=decision)
        if kind == "S":
            limits.take(int(tiles[-1]))
        for depth, part in enumerate(sch.split(loop, tiles)):
            levels[kind][depth].insert(0, part)
    s, r = levels["S"], levels["R"]
    s[0] = [s[0][k] for k in order]
    sch.reorder(*s[0], *s[1], *r[0], *s[2], *r[1], *s[3])
    placed |= {panel.name for panel in panels if attempt(sch.compute_at, panel, s[0][-1])}
    if follower is not None and attempt(sch.reverse_compute_at, follower, s[level - 1][-1]):
        placed.add(follower.name)
        if decide.vectorize_follower():
            attempt(_vectorize_innermost, sch, follower)
    placed.add(sch.decompose_reduction(block, r[0][0]).name)
    sch.vectorize(s[3][-1])
    if gathers(sch.func, name, s[3][-1].name):
        ctx.unroll_steps = tuple(step for step in ctx.unroll_steps if step <= GATHER_UNROLL_STEP)
    sch.parallel(sch.fuse(*s[0]) if len(s[0]) > 1 else s[0][0])
    return placed


# A vectorized tile that reads an operand across its rows (a dense layer with its weight transposed,
# W[j, k] with j in the vector) loads one element per lane; unrolled 64 deep, LLVM took 12 s to
# compile the MLC course's 784 -> 128 linear layer and the kernel ran slower (15.9 us, 9.7 us at 16
# or none; bench/results/2026-11-28.md).
GATHER_UNROLL_STEP = 16


def gathers(func: PrimFunc, name: str, vector_loop: str) -> bool:
    """Whether the block reads some input across rows along the vectorized loop: the loop indexes a
    dimension other than the last (a strided row, as a stride-2 conv reads, is not counted)."""
    _, block = find_block(func.body, name)
    lane = find_loop(func.body, vector_loop)[1].var
    bindings = dict(zip((iv.var for iv in block.iter_vars), block.bindings))
    return any(
        lane in free_vars(substitute(index, bindings))
        for load in block_loads(block)
        if load.buffer != block.body.buffer
        for index in load.indices[:-1]
    )


def _vectorize_innermost(sch: Schedule, block: BlockRV) -> None:
    sch.vectorize(sch.get_innermost_loop(block))


class _RegisterTile:
    """Bounds on the innermost spatial tiles, the register tile: the vectorized one (innermost) at
    four vectors (`RuleConfig.vector_tile_limit`), and the product of all of them at the
    accumulator registers' worth of lanes. A tile that overflows the registers spills every
    accumulator on every reduction step (a 480^3 matmul with an 8x32 float tile: 121-131 GFLOPS on
    AVX2, where 6x16 makes 188-219, bench/results/2026-11-23-a.md)."""

    def __init__(self, cfg: RuleConfig) -> None:
        self.cfg = cfg
        self.vectors: int | None = None  # registers per row of the tile, once the vector tile is known
        self.rows = 1

    def next_limit(self, extent: int) -> int:
        """The bound of the next spatial tile inward, a loop of `extent` (which only the first, the
        vectorized one, depends on)."""
        cfg = self.cfg
        if self.vectors is None:
            return cfg.vector_tile_limit(extent)
        return max(1, min(cfg.max_innermost_factor, cfg.accumulator_registers // (self.vectors * self.rows)))

    def take(self, factor: int) -> None:
        if self.vectors is None:
            self.vectors = -(-factor // self.cfg.vector_lanes)
        else:
            self.rows *= factor
