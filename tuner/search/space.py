"""Search spaces: a function that applies stochastic primitives to a fresh Schedule.

A space is any `ScheduleFn` (the MLC course's `stochastic_schedule_mm` is one). `rule_space` builds
the default one from schedule rules in the spirit of MetaSchedule's PostOrderApply, walking the blocks
consumers first:

- auto-inline: an elementwise intermediate without a select is inlined into its consumers;
- multi-level tiling "SSRSRS" of reductions with data reuse (matmul, conv, dense); first, the two
  innermost spatial loops are fused where every operand reads them as one contiguous run and the
  rows are at most half a vector (a 1x1 conv's 7x7 image: `contiguous_rows`); each loop split
  with `sample_perfect_tile`, the innermost loop first, so that the innermost spatial tiles (the
  register tile) fit the target's vector registers (see `_RegisterTile`); the written tile either
  stays in place, or goes through a local accumulator (`cache_write` + `reverse_compute_at` at tile
  level 1 or 2), or an elementwise consumer is fused there; inputs the choices name (`packable_reads`:
  matmul's B) are copied into a contiguous panel per S0 tile; the outer spatial tiles are fused and
  run in parallel, the innermost spatial tile is vectorized, the reduction's init is decomposed out;
- a reduction whose compute names a schedule rule (`te.SCHEDULE_RULE`, as MetaSchedule's block
  annotation) gets that rule instead: a Winograd conv's batched matmul is tiled as a GEMM with the
  transforms and the epilogue computed per block of its tiles (`winograd_rule.py`);
- other blocks: a producer (e.g. padding) samples its compute location; the rest get their outer
  spatial loops fused in parallel and their innermost spatial loop split and vectorized (a pool's
  window loops move inside that loop's outer tile: `window_loop`);
- an unroll budget sampled from (0, 16, 64, 512), as `pragma_auto_unroll_max_step` on the root.

Structural choices (which variant of a rule) are drawn from the schedule's seeded generator, so the
trace records the resulting instructions; values (tile sizes, unroll, compute location) are sampling
instructions whose decisions the search mutates. A primitive that refuses is skipped: the trace holds
only what succeeded.

The rules take their choices from a `Decisions` object: `SAMPLED` draws them at random (the space);
the default schedule (default_schedule.py) picks each one by a heuristic, through the same rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, Protocol

from compiler import BlockRV, LoopRV, Schedule, ScheduleError
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.codegen_vector import flat_index, masks_odd_rows, stride_in
from compiler.ir import Block, Buffer, Expr, For, IterVar, PrimFunc, Select, const, structural_equal
from compiler.schedule.compute_location import blocked_reads
from compiler.schedule.tree import find_block, find_loop, loops_above, readers
from compiler.target import Target
from compiler.visit import block_loads, block_reads, free_vars, walk_expr
from tuner.search import winograd_rule

ScheduleFn = Callable[[Schedule], None]
P = ParamSpec("P")

UNROLL_STEPS = (0, 16, 64, 512)


@dataclass(frozen=True)
class SpaceConfig:
    """`vector_lanes` and `vector_registers` describe the machine the programs will run on: they bound
    the innermost spatial tile, which the code generator keeps in vector registers."""

    max_innermost_factor: int = 64
    # The longest row a non-tiled block (padding, pooling, an epilogue) vectorizes whole: the code
    # generator emits any length as power-of-two vectors, so a prime row (a 113-wide padded image)
    # need not run one element per parallel iteration (ResNet-18's max pool: see `parallelize_vectorize`).
    max_vector_row: int = 256
    # The longest prime row a reduction's register tile may vectorize whole (`vector_tile_limit`):
    # 113 lanes are 8 zmm or 15 ymm registers, in one row of accumulators.
    max_prime_row: int = 128
    unroll_steps: tuple[int, ...] = UNROLL_STEPS
    vector_lanes: int = 16  # float32 lanes per vector register
    vector_registers: int = 32
    masked_odd_rows: bool = True  # an odd row is one masked load, not split (`codegen_vector.masks_odd_rows`)

    @classmethod
    def for_target(cls, target: Target) -> SpaceConfig:
        return cls(
            vector_lanes=target.vector_lanes("float32"),
            vector_registers=target.vector_registers,
            masked_odd_rows=masks_odd_rows(target),
        )

    def vector_tile_limit(self, extent: int) -> int:
        """The largest vectorized tile of a loop of `extent`: four vectors; or the whole loop, up to
        `max_prime_row` lanes, when no tile of at least half a vector divides it (a prime such as 113,
        whose only tiles are 1 and itself: one lane at a time otherwise, 0.25x TVM on 97x113x127 with
        AVX-512, 0.18x with AVX2 while the bound was eight vectors, 64 lanes there)."""
        widest = min(self.max_innermost_factor, 4 * self.vector_lanes)
        narrowest = max(1, self.vector_lanes // 2)
        if extent <= self.max_prime_row and not any(extent % f == 0 for f in range(narrowest, widest + 1)):
            return max(widest, extent)
        return widest

    @property
    def accumulator_registers(self) -> int:
        """Registers the register tile may fill: the rest hold the operands loaded or broadcast."""
        return self.vector_registers * 3 // 4


Decision = list[int] | None  # a tile decision for sample_perfect_tile; None: sample it


class Decisions(Protocol):
    """Where the rules get their choices. A method that returns a decision (an int, a tile list)
    gives what the sampling instruction records, or None to let it sample from the schedule's
    generator; the others make the structural choices, which the space draws or fixes."""

    def inline(self, func: PrimFunc, name: str) -> bool:
        """Whether auto-inline inlines this elementwise block (which it may) into its consumers."""
        ...

    def write_level(self, sch: Schedule) -> int:
        """Where a tiled block's output tile is written: 0 in place; 1 or 2 through an accumulator
        (or a fused elementwise consumer) per tile of S0 or of S0 S1."""
        ...

    def packed_reads(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        """The tiled block's inputs (`cache_read` indices, among `packable_reads`) copied into a
        contiguous panel per S0 tile before the tile runs."""
        ...

    def vectorize_follower(self) -> bool:
        """Whether the write-back or the fused consumer placed under a tile vectorizes its innermost
        loop."""
        ...

    def tiles(self, func: PrimFunc, name: str, kinds: list[str]) -> list[Decision]:
        """One tile decision per loop around the block (see `_loop_kinds`), for the SSRSRS split:
        four tiles for an "S" loop, two for an "R" loop, nothing for a "-" loop."""
        ...

    def outer_order(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        """The order of the tiled block's outermost spatial tiles (S0, the parallel loop), as indices
        of its "S" loops: consecutive parallel iterations share the operands that the loops placed
        last do not index."""
        ...

    def compute_location(self, func: PrimFunc, name: str) -> int | None:
        """The index into the compute-location candidates of the producer block `name`; -1 leaves it
        at the root."""
        ...

    def vector_tile(self, extent: int) -> Decision:
        """The [outer, inner] split of a non-tiled block's innermost spatial loop; inner is vectorized."""
        ...

    def winograd_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        """The tiles of a Winograd product's rows, columns and K (`winograd_rule.apply`)."""
        ...

    def parallel_loops(self, extents: list[int], reduction_inside: bool) -> int:
        """How many of a non-tiled block's leading spatial loops (of these extents) are fused into its
        parallel loop; the rest stay serial. `reduction_inside`: reduction loops follow them."""
        ...

    def unroll(self, steps: tuple[int, ...]) -> int | None:
        """The index of the auto-unroll budget among `steps`."""
        ...


class Sampled:
    """Every choice drawn at random from the schedule's generator: the search space."""

    def inline(self, func: PrimFunc, name: str) -> bool:
        return True

    def write_level(self, sch: Schedule) -> int:
        return sch.rng.randrange(3)

    def packed_reads(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        """No input: a panel's worth depends on tiles that other decisions sample, and a sampled choice
        to pack lost to not packing in the search (paired by seed, bench/RESULTS.md 2026-11-25).
        Packing reaches the search through the default schedule it starts from."""
        return []

    def vectorize_follower(self) -> bool:
        return False

    def tiles(self, func: PrimFunc, name: str, kinds: list[str]) -> list[Decision]:
        return [None] * len(kinds)

    def outer_order(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        return list(range(kinds.count("S")))

    def compute_location(self, func: PrimFunc, name: str) -> int | None:
        return None

    def vector_tile(self, extent: int) -> Decision:
        return None

    def winograd_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        return [None, None, None]

    def parallel_loops(self, extents: list[int], reduction_inside: bool) -> int:
        return len(extents)

    def unroll(self, steps: tuple[int, ...]) -> int | None:
        return None


SAMPLED = Sampled()


def rule_space(cfg: SpaceConfig) -> ScheduleFn:
    """The default space generator for CPU: the rules above, as one ScheduleFn, for the machine
    `cfg` describes (`SpaceConfig.for_target`)."""

    def apply(sch: Schedule) -> None:
        apply_rules(sch, cfg, SAMPLED)

    return apply


def apply_rules(sch: Schedule, cfg: SpaceConfig, decide: Decisions) -> None:
    """The rules, in order, with the choices `decide` makes."""
    for name in reversed(block_names(sch)):
        _auto_inline(sch, name, decide)
    placed: set[str] = set()
    unroll_steps = cfg.unroll_steps
    for name in reversed(block_names(sch)):
        if is_tiling_target(sch.func, name) and winograd_rule.is_winograd_product(sch.func, name):
            decisions = decide.winograd_tiles(sch.func, name)
            placed |= winograd_rule.apply(sch, name, decisions, cfg.vector_lanes, cfg.vector_registers)
            unroll_steps = tuple(s for s in unroll_steps if s <= winograd_rule.MAX_UNROLL_STEP)
        elif is_tiling_target(sch.func, name):
            placed |= _multi_level_tile(sch, name, cfg, decide)
    for name in reversed(block_names(sch)):
        if name not in placed:
            _place_or_parallelize(sch, name, cfg, decide)
    annotate_unroll(sch, cfg, decide, unroll_steps)


def annotate_unroll(
    sch: Schedule, cfg: SpaceConfig, decide: Decisions, unroll_steps: tuple[int, ...] | None = None
) -> None:
    """The auto-unroll budget of the whole function, on the root block, one of `unroll_steps` (by
    default the space's)."""
    choices = unroll_steps or cfg.unroll_steps
    probs = [1.0] * len(choices)
    steps = sch.sample_categorical(list(choices), probs, decision=decide.unroll(choices))
    sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, steps)


def block_names(sch: Schedule) -> list[str]:
    return [b.name for b in sch.get_child_blocks(sch.get_block("root"))]


def _block(func: PrimFunc, name: str) -> Block:
    return find_block(func.body, name)[1]


def _attempt(primitive: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> bool:
    """Apply a primitive (a bound Schedule method) if it is legal here; a refusing primitive leaves the
    schedule unchanged."""
    try:
        primitive(*args, **kwargs)
    except ScheduleError:
        return False
    return True


def _vectorize_innermost(sch: Schedule, block: BlockRV) -> None:
    sch.vectorize(sch.get_innermost_loop(block))


def _auto_inline(sch: Schedule, name: str, decide: Decisions) -> None:
    block = _block(sch.func, name)
    has_select = any(isinstance(e, Select) for e in walk_expr(block.body.value))
    if block.is_reduction or has_select or block.body.buffer in sch.func.params:
        return
    if decide.inline(sch.func, name):
        _attempt(sch.compute_inline, sch.get_block(name))


def is_tiling_target(func: PrimFunc, name: str) -> bool:
    """A reduction where some input is not indexed by some spatial variable: its data is reused
    across that variable, which tiling turns into cache and register reuse."""
    block = _block(func, name)
    if not block.is_reduction or any(iv.kind not in "SR" for iv in block.iter_vars):
        return False
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S"}
    for load in block_loads(block):
        if load.buffer == block.body.buffer:
            continue
        used = set().union(*(free_vars(i) for i in load.indices))
        if spatial - used:
            return True
    return False


def _loop_kinds(func: PrimFunc, name: str) -> list[str]:
    """For each loop around the block: "S" if it feeds only spatial bindings, "R" if it feeds a
    reduction binding, "-" if it feeds none."""
    path, block = find_block(func.body, name)
    out = []
    for _, lp in loops_above(func.body, path):
        kinds = {iv.kind for iv, b in zip(block.iter_vars, block.bindings) if lp.var in free_vars(b)}
        out.append("R" if kinds - {"S"} else "S" if kinds else "-")
    return out


def _multi_level_tile(sch: Schedule, name: str, cfg: SpaceConfig, decide: Decisions) -> set[str]:
    """SSRSRS: spatial loops in 4 tiles, reduction loops in 2, ordered S0 S1 R0 S2 R1 S3.
    Returns the names of the blocks it placed (this one, and a write-back or fused consumer)."""
    block = sch.get_block(name)
    placed = {name}
    level = decide.write_level(sch)
    consumer = _elementwise_consumer(sch.func, name)
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
    kinds = _loop_kinds(sch.func, name)
    # Every choice before the panels and the splits: the choices read the block's unsplit loops and
    # its inputs.
    decisions = decide.tiles(sch.func, name, kinds)
    order = decide.outer_order(sch.func, name, kinds)
    panels = [sch.cache_read(block, index) for index in decide.packed_reads(sch.func, name, kinds)]
    levels: dict[str, list[list[LoopRV]]] = {"S": [[], [], [], []], "R": [[], []]}
    loops = sch.get_loops(block)
    limits = _RegisterTile(cfg)
    # Innermost loop first: the vectorized tile decides how many registers the other tiles may fill.
    for loop, kind, decision in reversed(list(zip(loops, kinds, decisions))):
        if kind == "-":
            continue
        if kind == "S":
            limit = limits.next_limit(find_loop(sch.func.body, loop.name)[1].extent)
        else:
            limit = cfg.max_innermost_factor
        tiles = sch.sample_perfect_tile(
            loop, n=len(levels[kind]), max_innermost_factor=limit, decision=decision
        )
        if kind == "S":
            limits.take(int(tiles[-1]))
        for depth, part in enumerate(sch.split(loop, tiles)):
            levels[kind][depth].insert(0, part)
    s, r = levels["S"], levels["R"]
    s[0] = [s[0][k] for k in order]
    sch.reorder(*s[0], *s[1], *r[0], *s[2], *r[1], *s[3])
    placed |= {panel.name for panel in panels if _attempt(sch.compute_at, panel, s[0][-1])}
    if follower is not None and _attempt(sch.reverse_compute_at, follower, s[level - 1][-1]):
        placed.add(follower.name)
        if decide.vectorize_follower():
            _attempt(_vectorize_innermost, sch, follower)
    placed.add(sch.decompose_reduction(block, r[0][0]).name)
    sch.vectorize(s[3][-1])
    sch.parallel(sch.fuse(*s[0]) if len(s[0]) > 1 else s[0][0])
    return placed


def contiguous_rows(func: PrimFunc, name: str, lanes: int) -> int | None:
    """The index of the loop outside the innermost spatial loop, where the two are spatial loops,
    directly nested and each bound to one variable of the block, the inner one at most half a vector
    of `lanes` long, and every access of the block reads them as one contiguous run (y * W + x with
    x of extent W, or neither): a 1x1 conv's rows of 7. Fused before tiling, they are one loop whose
    runs the register tile vectorizes: 49 of 64 lanes at 7x7, where a row filled 7 of 16. Every tile
    of such a loop (1, 7, 49) is whole rows or part of one, so the write-back or a fused epilogue
    still follows the tile (`reverse_compute_at`). Longer rows fill their vectors well already, and
    many of their runs would end inside rows: the written tile is then no box, and the write-back runs
    on its own after the whole conv (MobileNetV2's 56x56 expansion ran 3x slower so; at 14x14, 7 of
    26 sampled tiles lost their write-back, for no gain in the tuned conv)."""
    path, block = find_block(func.body, name)
    loops = [lp for _, lp in loops_above(func.body, path)]
    kinds = _loop_kinds(func, name)
    spatial = [k for k, kind in enumerate(kinds) if kind == "S"]
    if len(spatial) < 2 or spatial[-2] + 1 != spatial[-1]:
        return None
    outer, inner = spatial[-2], spatial[-1]
    y, x = _bound_alone(block, loops[outer]), _bound_alone(block, loops[inner])
    if y is None or x is None or 2 * x.extent > lanes:
        return None
    accesses = [(ld.buffer, ld.indices) for ld in block_loads(block)]
    accesses.append((block.body.buffer, block.body.indices))
    for buffer, indices in accesses:
        flat = flat_index(buffer, indices)
        step_x, step_y = stride_in(flat, x.var), stride_in(flat, y.var)
        if step_x not in (0, 1) or step_y != (step_x or 0) * x.extent:
            return None
    return outer


def _bound_alone(block: Block, loop: For) -> IterVar | None:
    """The block's one variable bound to `loop`, if its binding is the loop's variable itself."""
    bound = [(iv, b) for iv, b in zip(block.iter_vars, block.bindings) if loop.var in free_vars(b)]
    return bound[0][0] if len(bound) == 1 and structural_equal(bound[0][1], loop.var) else None


def packable_reads(func: PrimFunc, name: str) -> list[int]:
    """The inputs of the block a panel could pack, as `cache_read` indices: function parameters whose
    last index follows the innermost spatial variable (the vectorized one) and that miss some other
    spatial variable, so a tile reuses them across it. In place, a tile reads such an input as rows a
    whole row of the matrix apart (a 512-wide B: 2 KiB, every row in the same few cache sets)."""
    path, block = find_block(func.body, name)
    kinds = _loop_kinds(func, name)
    if "S" not in kinds:
        return []
    vector_loop = [lp for _, lp in loops_above(func.body, path)][len(kinds) - 1 - kinds[::-1].index("S")]
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S"}
    lanes = {iv.var for iv, b in zip(block.iter_vars, block.bindings) if vector_loop.var in free_vars(b)}
    reads = [b for b in block_reads(block) if b != block.body.buffer]
    out = []
    for load in block_loads(block):
        if load.buffer not in func.params or load.buffer == block.body.buffer or not load.indices:
            continue
        used = set().union(*(free_vars(i) for i in load.indices))
        if lanes & free_vars(load.indices[-1]) and spatial - used:
            index = reads.index(load.buffer)
            if index not in out:
                out.append(index)
    return out


class _RegisterTile:
    """Bounds on the innermost spatial tiles, the register tile: the vectorized one (innermost) at
    four vectors (`SpaceConfig.vector_tile_limit`), and the product of all of them at the
    accumulator registers' worth of lanes. A tile that overflows the registers spills every
    accumulator on every reduction step (a 480^3 matmul with an 8x32 float tile: 121-131 GFLOPS on
    AVX2, where 6x16 makes 188-219, bench/RESULTS.md)."""

    def __init__(self, cfg: SpaceConfig) -> None:
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


def _elementwise_consumer(func: PrimFunc, name: str) -> str | None:
    """The single elementwise block that reads this block's output, if it writes a function output."""
    buf: Buffer = _block(func, name).body.buffer
    consumers = [c for c in readers(func.body, buf) if c.name != name]  # a reduction reads its own output
    if len(consumers) != 1 or consumers[0].is_reduction:
        return None
    c = consumers[0]
    if c.body.buffer not in func.params:
        return None
    same = all(_reads_own_element(c, ld.indices) for ld in block_loads(c) if ld.buffer == buf)
    return c.name if same else None


def _reads_own_element(block: Block, indices: tuple[Expr, ...]) -> bool:
    """Whether `indices` name the element the block writes: its iteration variables in order, where
    a variable of extent 1 may appear as 0 (a batch-1 model's kernels index their batch so: every
    conv of MobileNetV2 wrote its whole output, 4.8 MB for the largest, and read it back for its
    bias and relu6, unfused) and one may be read as a blocked layout's pair, `v // c` and `v % c`
    (a conv computed in blocks of output channels, its epilogue writing NCHW)."""
    pairs = blocked_reads(indices)
    outer = {d: v for v, (d, _, _) in pairs.items()}
    inner = {d for _, d, _ in pairs.values()}
    flat = [outer.get(d, index) for d, index in enumerate(indices) if d not in inner]
    return len(flat) == len(block.iter_vars) and all(
        structural_equal(index, iv.var) or (iv.extent == 1 and structural_equal(index, const(0)))
        for index, iv in zip(flat, block.iter_vars)
    )


def _place_or_parallelize(sch: Schedule, name: str, cfg: SpaceConfig, decide: Decisions) -> None:
    """A producer samples where to compute (root or a loop of its consumer); a block left at the
    root gets parallel and vector loops."""
    block = _block(sch.func, name)
    if block.body.buffer not in sch.func.params and readers(sch.func.body, block.body.buffer):
        rv = sch.get_block(name)
        loop = sch.sample_compute_location(rv, decision=decide.compute_location(sch.func, name))
        if loop.name != "root" and _attempt(sch.compute_at, rv, loop):
            return
    parallelize_vectorize(sch, name, cfg, decide)


def parallelize_vectorize(sch: Schedule, name: str, cfg: SpaceConfig, decide: Decisions) -> None:
    """Vectorize a tile of the innermost spatial loop; run the leading spatial loops in parallel.

    A reduction whose loops end in its reduction loops vectorizes its innermost spatial loop when
    the block reads along it in steps of at most `WINDOW_STRIDE` elements (a pool's window, a
    column sum): the reduction loops move inside that loop's outer tile and the init is decomposed
    out, so each step of the window is one vector operation over a row of outputs. ResNet-18's max
    pool ran its 9 taps one output at a time: 226 us tuned, 93 us so by default with its padding
    computed per row (`default_schedule`), on a Rocket Lake (bench/RESULTS.md)."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = _loop_kinds(sch.func, name)
    at = len(kinds) - 1 if kinds and kinds[-1] == "S" else window_loop(sch.func, name)
    if at is not None:
        extent = find_loop(sch.func.body, loops[at].name)[1].extent
        tiles = sch.sample_perfect_tile(
            loops[at], n=2, max_innermost_factor=cfg.max_vector_row, decision=decide.vector_tile(extent)
        )
        outer, inner = sch.split(loops[at], tiles)
        reductions = loops[at + 1 :]
        if reductions:
            sch.reorder(outer, *reductions, inner)
            sch.decompose_reduction(block, reductions[0])
        _attempt(sch.vectorize, inner)
        loops = [*loops[:at], outer, *reductions]
    leading = []
    for loop, kind in zip(loops, kinds):
        if kind != "S":
            break
        leading.append(loop)
    extents = [find_loop(sch.func.body, lp.name)[1].extent for lp in leading]
    leading = leading[: decide.parallel_loops(extents, reduction_inside=len(leading) < len(loops))]
    if leading:
        _attempt(sch.parallel, sch.fuse(*leading) if len(leading) > 1 else leading[0])


# The largest step, in elements, of a window reduction's reads along the loop it vectorizes: a
# stride-2 pool reads every other element (`codegen_vector`'s strided loads); a reduction that reads
# rows further apart (a softmax's row max, a global mean over channels) would gather each lane.
WINDOW_STRIDE = 2


def window_loop(func: PrimFunc, name: str) -> int | None:
    """For a reduction whose loops are spatial then reduction loops (not a tiling target), the index
    of its innermost spatial loop if every read moves at most `WINDOW_STRIDE` elements along it."""
    path, block = find_block(func.body, name)
    kinds = _loop_kinds(func, name)
    if not block.is_reduction or "S" not in kinds or kinds[-1] != "R" or is_tiling_target(func, name):
        return None
    at = max(k for k, kind in enumerate(kinds) if kind == "S")
    if "R" in kinds[:at]:
        return None
    loop = loops_above(func.body, path)[at][1]
    bound = [iv.var for iv, b in zip(block.iter_vars, block.bindings) if structural_equal(b, loop.var)]
    if len(bound) != 1:
        return None
    for load in block_loads(block):
        step = stride_in(flat_index(load.buffer, load.indices), bound[0])
        if step is None or abs(step) > WINDOW_STRIDE:
            return None
    return at
