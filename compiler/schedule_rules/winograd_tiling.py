"""The schedule rule of a Winograd convolution (compiler/winograd.py), for the block whose compute names
it (`te.SCHEDULE_RULE`, as MetaSchedule's block annotation): its batched matmul tiled as a GEMM, and
the transforms placed around it in one of two forms, by the size of the weights.

Tiled block by block (the generic rules), each stage of the conv ran over the whole image at the
root: the padded input, V and M (3.2 MB each for ResNet-18's 56x56 layer) were written to memory and
read back by the next stage, and the matmul read V a cache line per step of its reduction.

- Fused (transformed weights up to `FUSED_WEIGHT_BYTES`): one parallel iteration takes a block of
  tiles (rows of tiles, a part of each row); it pads and transforms their windows, multiplies them
  by every transformed weight and transforms the products back through the epilogue, each
  intermediate the size of a few tiles, in cache. The matmul's loops, outside in:

      n, K (parallel part), tile rows (outer), tile columns (outer)   -- one parallel loop
      tile rows (inner), alpha, alpha, tile columns (middle), K (middle), C, tile columns (inner), K (inner)

- Staged (larger weights, a small image: ResNet-18's 14x14 layers, 4 MB of them for 49 tiles):
  read again for every block of tiles, the weights would be most of the traffic; so each stage
  runs over the whole image, and the matmul's parallel loop is the transform points and parts of
  K, each iteration one block of weights in cache for every tile:

      alpha, alpha, K (parallel part)   -- one parallel loop
      n, tile rows, tile columns (outer, middle), K (middle), C, tile columns (inner), K (inner)

In both, the inner tile columns and the vectorized inner K are the register tile, accumulated in a
local buffer across the reduction over C; the matmul reads V as a GEMM reads A, a broadcast per tile
column along C, and the weights as B, vectors along K. The transforms run their nonzero terms
outside a vector along C (input) or a block of K (output).

The decisions: the tiles of the rows, the columns and K (`sample_perfect_tile`; `tile_decisions`
gives the default's). Which form, and where each stage goes, are not sampled.
"""

from __future__ import annotations

from compiler import te
from compiler.arith import divisors
from compiler.ir import Block, Buffer, PrimFunc, static_dim
from compiler.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from compiler.schedule.tree import find_block, find_loop, readers, writers
from compiler.schedule_rules.analysis import is_tiling_target
from compiler.schedule_rules.rule import BlockRule, RuleContext
from compiler.visit import block_reads
from compiler.winograd import PRODUCT_RULE

# Loops of the annotated product block, in the order compiler.winograd defines them.
PRODUCT_LOOPS = ("e", "u", "n", "y", "x", "k", "rc")
MAX_ROWS = 4  # tile rows per parallel iteration: each holds its windows' padded rows
MAX_LANES = 64  # the longest vector of a transform or a copy (compiler.codegen_vector.MAX_LANES)
ITERATIONS_PER_CORE = 4  # parallel iterations per core the default leaves, for balance
# Transformed weights above this are read once (the staged form), not once per block of tiles: on a
# Rocket Lake (2 MB L2 per core), ResNet-18's 14x14 layer (4 MB of them) ran 0.84-0.93 ms fused and
# 0.45-0.47 staged (warm); its 28x28 layer (1 MB) 0.48-0.51 fused (bench/results/2026-11-26.md).
FUSED_WEIGHT_BYTES = 1 << 20
# The largest auto-unroll budget a function with a Winograd product samples: its transforms' loops of
# nonzero terms unrolled 512 steps deep made ResNet-18's 56x56 kernel compile in 4.7-9.4 s instead
# of 0.6-0.7, and run 1.45 ms instead of 0.55.
MAX_UNROLL_STEP = 64
# Bytes of one column block of the weights (C x K's block) a parallel iteration of the staged form
# reads: it stays in cache for every tile.
STAGED_WEIGHT_COLUMNS_BYTES = 64 << 10


class WinogradTiling(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        if not (is_tiling_target(sch.func, name) and is_winograd_product(sch.func, name)):
            return
        decisions = ctx.decide.winograd_tiles(sch.func, name)
        ctx.placed |= tile(sch, name, decisions, ctx.cfg.vector_lanes, ctx.cfg.vector_registers)
        ctx.unroll_steps = tuple(s for s in ctx.unroll_steps if s <= MAX_UNROLL_STEP)


def is_winograd_product(func: PrimFunc, name: str) -> bool:
    _, block = find_block(func.body, name)
    return (te.SCHEDULE_RULE, PRODUCT_RULE) in block.annotations


def tile_decisions(func: PrimFunc, name: str, lanes: int, registers: int, cores: int) -> list[list[int]]:
    """The default's tiles of the rows, the columns and K (`tile` samples them in that order):
    one row per parallel iteration; the register tile with the most accumulators up to half the
    registers (the rest hold what each step loads), K's vector of at most four registers preferred
    wide; the columns split for the parallel loop only where the rows alone leave fewer than
    `ITERATIONS_PER_CORE` iterations per core."""
    _, _, n, rows, columns, k, c = _extents(func, name)
    best = (0, 0, 1, lanes)
    for k_tile in (d for d in divisors(k) if d % lanes == 0 and d <= 4 * lanes):
        for x_tile in divisors(columns):
            accumulators = x_tile * k_tile // lanes
            if accumulators <= registers // 2:
                best = max(best, (accumulators, k_tile, x_tile, k_tile))
    _, _, x_tile, k_tile = best
    outer = columns // x_tile
    split = next((d for d in divisors(outer) if n * rows * d >= ITERATIONS_PER_CORE * cores), outer)
    if staged(func, name):
        parts = next(
            (d for d in divisors(k // k_tile) if c * k * 4 // d <= STAGED_WEIGHT_COLUMNS_BYTES), k // k_tile
        )
        return [[rows, 1], [1, outer, x_tile], [parts, k // k_tile // parts, k_tile]]
    return [[rows, 1], [split, outer // split, x_tile], [k // k_tile, k_tile]]


def staged(func: PrimFunc, name: str) -> bool:
    """Whether the product's transformed weights are too large to be read again for every block of
    tiles (`FUSED_WEIGHT_BYTES`): then each stage runs over the whole image, and the matmul reads each
    weight once."""
    alpha, _, _, _, _, k, c = _extents(func, name)
    return alpha * alpha * c * k * 4 > FUSED_WEIGHT_BYTES


def tile(sch: Schedule, name: str, decisions: list[list[int] | None], lanes: int, registers: int) -> set[str]:
    """The rule on the product block `name`; returns the blocks it placed. `decisions` are the rows',
    the columns' and K's tiles (K in three in the staged form, its first part parallel; in two in the
    fused form), or None to sample them."""
    func = sch.func
    transform_in = _producer(func, name)
    pads = [
        b.name
        for buf in block_reads(transform_in)
        for b in writers(func.body, buf)
        if b.name != transform_in.name
    ]
    consumers = _consumer_chain(func, name)
    is_staged = staged(func, name)
    block = sch.get_block(name)
    accumulator = sch.cache_write(block, 0, "local")
    e, u, n, y, x, k, rc = sch.get_loops(block)
    rows_d, columns_d, k_d = decisions
    yo, yi = sch.split(y, sch.sample_perfect_tile(y, n=2, max_innermost_factor=MAX_ROWS, decision=rows_d))
    # The fused form's output transform reads every output channel of its tiles: K is not split there.
    k_tiles = sch.sample_perfect_tile(
        k, n=3 if is_staged else 2, max_innermost_factor=4 * lanes, decision=k_d
    )
    kp, ko, ki = sch.split(k, k_tiles if is_staged else [1, *k_tiles])
    rows_limit = max(1, registers * 3 // 4 // max(1, -(-int(k_tiles[-1]) // lanes)))
    xp, xo, xi = sch.split(
        x, sch.sample_perfect_tile(x, n=3, max_innermost_factor=rows_limit, decision=columns_d)
    )
    if is_staged:
        sch.reorder(e, u, kp, n, yo, xp, yi, xo, ko, rc, xi, ki)
        parallel = sch.fuse(e, u, kp)
    else:
        sch.reorder(n, kp, yo, xp, yi, e, u, xo, ko, rc, xi, ki)
        parallel = sch.fuse(n, kp, yo, xp)
    sch.reverse_compute_at(accumulator, ko)
    _vectorize_innermost(sch, accumulator, below=ko)
    placed = {name, accumulator.name}
    sch.parallel(parallel)
    placed.add(sch.decompose_reduction(block, rc).name)
    sch.vectorize(ki)
    if is_staged:
        return placed | _stages_at_root(sch, transform_in.name, pads, consumers)
    for consumer in consumers:
        if not _attempt_reverse_compute_at(sch, consumer, parallel):
            break
        placed.add(consumer)
    sch.compute_at(sch.get_block(transform_in.name), parallel)
    placed.add(transform_in.name)
    for pad in pads:
        if _attempt_compute_at(sch, pad, parallel):
            placed.add(pad)
    for transform in (transform_in.name, consumers[0]):
        placed.add(_reduce_outside_vector(sch, sch.get_block(transform)))
    for other in [*consumers[1:], *pads]:
        if other in placed:
            _vectorize_innermost(sch, sch.get_block(other), below=parallel)
    return placed


def _stages_at_root(sch: Schedule, transform_in: str, pads: list[str], consumers: list[str]) -> set[str]:
    """The staged form's other stages, each over the whole image in parallel: the padding by rows,
    the input transform by transform point and row of tiles, the output transform by block of
    output channels and row with the epilogue computed there."""
    placed = set()
    for pad in pads:
        loops = sch.get_loops(sch.get_block(pad))
        outer = sch.fuse(*loops[:2])
        sch.parallel(outer)
        _vectorize_innermost(sch, sch.get_block(pad), below=outer)
        placed.add(pad)
    block = sch.get_block(transform_in)
    loops = sch.get_loops(block)
    sch.parallel(sch.fuse(*loops[:4]))
    placed |= {transform_in, _reduce_outside_vector(sch, block)}
    block = sch.get_block(consumers[0])
    loops = sch.get_loops(block)
    rows = sch.fuse(*loops[:3])
    for consumer in consumers[1:]:
        if not _attempt_reverse_compute_at(sch, consumer, rows):
            break
        _vectorize_innermost(sch, sch.get_block(consumer), below=rows)
        placed.add(consumer)
    sch.parallel(rows)
    placed |= {consumers[0], _reduce_outside_vector(sch, block)}
    return placed


def _attempt_compute_at(sch: Schedule, name: str, loop: LoopRV) -> bool:
    try:
        sch.compute_at(sch.get_block(name), loop)
    except ScheduleError:
        return False  # left at the root, where the generic rules parallelize it
    return True


def _extents(func: PrimFunc, name: str) -> list[int]:
    _, block = find_block(func.body, name)
    if len(block.iter_vars) != len(PRODUCT_LOOPS):
        raise ScheduleError(
            f"{name}: a Winograd product has loops {PRODUCT_LOOPS}, got {len(block.iter_vars)}"
        )
    return [static_dim(iv.extent, name) for iv in block.iter_vars]


def _producer(func: PrimFunc, name: str) -> Block:
    """The input transform: the block writing the product's one input that is not a parameter."""
    _, block = find_block(func.body, name)
    made = [b for buf in block_reads(block) if buf not in func.params for b in writers(func.body, buf)]
    made = [b for b in made if b.name != name]
    if len(made) != 1:
        raise ScheduleError(f"{name}: a Winograd product reads one transformed input, found {len(made)}")
    return made[0]


def _consumer_chain(func: PrimFunc, name: str) -> list[str]:
    """The output transform and the blocks after it, each the only reader of the one before, up to
    the block that writes a parameter (the epilogue)."""
    chain: list[str] = []
    buf: Buffer = find_block(func.body, name)[1].body.buffer
    while buf not in func.params:
        after = [b for b in readers(func.body, buf) if b.name not in (name, *chain)]
        if len(after) != 1:
            break
        chain.append(after[0].name)
        buf = after[0].body.buffer
    if not chain:
        raise ScheduleError(f"{name}: a Winograd product has no output transform")
    return chain


def _attempt_reverse_compute_at(sch: Schedule, name: str, loop: LoopRV) -> bool:
    try:
        sch.reverse_compute_at(sch.get_block(name), loop)
    except ScheduleError:
        return False
    return True


def _reduce_outside_vector(sch: Schedule, block: BlockRV) -> str:
    """A transform's loops end in its vector axis (C or K's block) then its reduction over the
    matrix's nonzero terms: the terms go outside a vector of the axis, which the init is decomposed
    from. Returns the init's name."""
    loops = sch.get_loops(block)
    vector, terms = loops[-3], loops[-2:]
    inner = _split_for_vector(sch, vector)
    sch.reorder(*terms, inner)
    init = sch.decompose_reduction(block, terms[0])
    sch.vectorize(inner)
    return init.name


def _vectorize_innermost(sch: Schedule, block: BlockRV, below: LoopRV) -> None:
    """Vectorize the block's innermost loop of those inside `below`; none where the block has no
    loop of its own there (a write-back of a register tile of one element)."""
    loops = [lp.name for lp in sch.get_loops(block)]
    if loops[-1] != below.name:
        sch.vectorize(_split_for_vector(sch, sch.get_loops(block)[-1]))


def _split_for_vector(sch: Schedule, loop: LoopRV) -> LoopRV:
    """The loop, or its inner part of at most `MAX_LANES` iterations."""
    extent = static_dim(find_loop(sch.func.body, loop.name)[1].extent, "winograd tiling")
    if extent <= MAX_LANES:
        return loop
    inner = max(d for d in divisors(extent) if d <= MAX_LANES)
    return sch.split(loop, [extent // inner, inner])[1]
