"""The default schedule's choices: the rules' decisions made by a heuristic instead of at random
(`default.py` applies them). The choices (`Heuristic`) are:

- auto-inline, except a block calling a math function (exp, log, ...) that several blocks read: a
  softmax's exp is read by the row sum and by the division, and inlined it would run twice (2x the
  time of the whole softmax);
- the output tile goes through a local accumulator (or the fused elementwise consumer) per S0 S1
  tile (write level 2). With S2 of size 1 (below) that accumulator is exactly the register tile, a
  small stack buffer that LLVM keeps in registers across the whole reduction. The write-back or the
  fused consumer vectorizes its innermost loop (a conv2d's fused bias + residual + relu: 2.7 -> 2.1 ms
  for the whole kernel, one thread);
- the register tile (S3, the innermost spatial tiles) maximizes a throughput estimate per reduction
  step (`_score`): lanes of useful work over the cycles of the step, the most of its vector FMAs (one
  per accumulator register, as the code generator emits the vector loop: `_registers`), its loads
  (one per vector or broadcast element each operand needs; a strided row's shuffles; on AVX2, an odd
  row's split loads and inserts: `row_loads`) and
  the FMA latency (about `LATENCY_CHAINS` independent accumulators keep the FMA units busy). Within the
  rules' register bounds (`multi_level_tiling._RegisterTile`), so a matmul gets rows of the output
  that share each loaded vector of B (8x48, 6x64: 24 accumulators) and a conv2d rows of filters
  that share each input vector; ties go to more accumulators, then to fewer bytes per step of the
  operands that stream from L2 (`_streamed_bytes`), then to fewer loads. No tile reads more than
  MAX_STREAMS contiguous runs of a streamed operand per step (`_streams`: a batch-1 dense layer on
  weights packed in blocks of columns, one run per block);
- every reduction loop keeps the largest tile the space allows inside (R1), so the accumulators stay in
  registers over as much of the reduction as possible; R0 has the rest. Except where no loop gives
  rows (a batch-1 dense layer: one row of weights per reduction step, each element used once): the
  reduction steps one at a time and the register tile widens along its vector loop (S2), so each step
  streams a long contiguous run of the weights (`_stream_tiles`; 1.9x faster than 64 columns), unless
  a panel (below) takes the columns into the parallel loop;
- S2 and S1 are 1; S0, the parallel loop, gets every tile outside the register tile: thousands of
  iterations for a conv2d layer, enough for every core and balanced by the static schedule;
- except where an input is read as strided rows and reused by many rows of the output (`_panels`:
  matmul's B, read a matrix row apart for every step of the reduction): that input is copied per S0
  tile into a contiguous panel, and S0 keeps only the loops the input depends on (column stripes),
  the others going whole into S1, so the panel is copied once and stays in cache while every row
  tile reads it. On a Zen 3 (AVX2, 512 KiB L2), matmul 512^3 ran 73 GFLOPS without it, 160 with it
  (numpy 174); BERT's 128x3072 by 3072x768 89 -> 153 (bench/results/2026-11-25-b.md, tenth stop).
  With AVX-512 vectors the panels cost a Zen 4 2-4%, and made a Xeon with two FMA ports 1.05x
  (bert.proj) to 2.6x (BERT's feed-forward matmuls) faster (thirteenth stop): every target gets them;
- within S0, the loops the largest operand does not depend on run innermost, so consecutive parallel
  iterations (and so each core's) reuse its panel from cache: a 128x3072 by 3072x768 matmul swept all
  of B for each row tile, 9.0 -> 6.1 ms (one core) with the row tiles inside each column tile;
- a producer (padding) stays at the root, computed in parallel before its consumer, except where
  the tiled block it feeds reads a different part of it for every output (a depthwise conv's
  padding: no output channel reads another's input, so the producer is not shared between tiles):
  there it is computed inside the consumer's parallel loop, per tile, and read back from cache
  (MobileNetV2's depthwise layers with their relu6, NCHWc, 2 threads, warm: 0.146 -> 0.075 ms at
  56x56, 0.105 -> 0.037 at stride 2, 0.220 -> 0.085 for the 96-channel one at 112x112);
- a non-tiled block vectorizes the largest tile of its innermost spatial loop the space allows. A
  non-tiled reduction (pooling, a softmax's row max) keeps its innermost spatial loop out of the
  parallel loop when the loops outside it give every core work: LLVM vectorizes across that loop
  (a max pool's output columns) or along the reduction inside it (a row sum), where fusing it into
  the parallel loop leaves one scalar window per iteration (4x slower, one thread);
- auto-unroll 64: the register tile's unvectorized loops (rows) unroll, the reduction loops do not.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from compiler.arith import bound, ceil_div, divisors, linear, simplify
from compiler.codegen_vector import flat_index, row_loads, stride_in, vector_pieces
from compiler.ir import Buffer, Expr, PrimFunc, Unary, Var, static_dim, static_shape
from compiler.schedule import Schedule
from compiler.schedule.sampling import covered_extent
from compiler.schedule.tree import find_block, loops_above, readers
from compiler.schedule_rules import dot_rows, tensorize_vnni, winograd_tiling
from compiler.schedule_rules.analysis import packable_reads, row_covers
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.decisions import Decision
from compiler.visit import block_loads, block_reads, free_vars, substitute, walk_expr

WRITE_LEVEL = 2
UNROLL_STEP = 64
MATH_CALL = "float_math_call"  # the instruction-mix feature of exp, log, tanh, ... (compiler.ops)
LATENCY_CHAINS = 8  # independent FMAs in flight: ~4 cycles of latency, 1-2 FMAs issued per cycle
PANEL_MIN_ROWS = 32  # output rows that must reuse a panel for its copy to pay
PANEL_MIN_STRIPES = 4  # parallel column stripes per core a panel schedule must leave
PANEL_MIN_ROW = 64  # elements: a shorter row (a 16-lane block of packed weights) is contiguous enough
STREAM_BYTES = 64 << 10  # an operand's bytes per tile beyond which it comes from L2 (2x the smallest L1d)
MAX_STREAMS = LATENCY_CHAINS  # contiguous runs from L2 or beyond one reduction step may read (`_streams`)


@dataclass(frozen=True)
class Heuristic:
    """The choices described in the module docstring, for the machine `cfg` describes."""

    cfg: RuleConfig
    cores: int

    def inline(self, func: PrimFunc, name: str) -> bool:
        _, block = find_block(func.body, name)
        return len(readers(func.body, block.body.buffer)) == 1 or not any(
            isinstance(e, Unary) and e.op.spec.feature.get("float") == MATH_CALL
            for e in walk_expr(block.body.value)
        )

    def write_level(self, sch: Schedule) -> int:
        return WRITE_LEVEL

    def dot_rows(self, rows: int) -> Decision:
        """Up to `dot_rows.ROWS` rows per tile, leaving every core a tile."""
        inner = max(d for d in range(1, dot_rows.ROWS + 1) if rows % d == 0 and rows // d >= self.cores)
        return [rows // inner, inner]

    def rfactor(self, sch: Schedule) -> bool:
        return True

    def vectorize_follower(self) -> bool:
        return True

    def packed_reads(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        nest = _TileNest.of(func, name, kinds)
        return [index for index, _ in self._panels(func, name, nest, self._register_tile(nest))]

    def tiles(self, func: PrimFunc, name: str, kinds: list[str]) -> list[Decision]:
        nest = _TileNest.of(func, name, kinds)
        tile = self._register_tile(nest)
        rows = math.prod(tile) // tile[nest.vector]
        panels = self._panels(func, name, nest, tile)
        stream = self._stream_tiles(nest, tile) if rows == 1 and not panels else 1
        striped = panels[0][1] if panels else None  # every panel's loops are the same
        out: list[Decision] = []
        for loop, (extent, kind) in enumerate(zip(nest.extents, kinds)):
            if kind == "S" and striped is not None and loop not in striped:
                out.append([1, extent // tile[loop], 1, tile[loop]])
            elif kind == "S":
                middle = stream if loop == nest.vector else 1
                out.append([extent // (tile[loop] * middle), 1, middle, tile[loop]])
            elif kind == "R":
                inner = 1 if stream > 1 else _largest_divisor(extent, self.cfg.max_innermost_factor)
                out.append([extent // inner, inner])
            else:
                out.append(None)
        return out

    def outer_order(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        nest = _TileNest.of(func, name, kinds)
        spatial = [k for k, kind in enumerate(kinds) if kind == "S"]
        largest = max(nest.operands, key=lambda o: math.prod(o.buffer.shape), default=None)
        if largest is None:
            return list(range(len(spatial)))
        return sorted(range(len(spatial)), key=lambda p: spatial[p] not in largest.loops)

    def compute_location(self, func: PrimFunc, name: str) -> int | None:
        return 0 if _read_apart_per_output(func, name) else -1

    def vector_tile(self, extent: int) -> Decision:
        inner = _largest_divisor(extent, self.cfg.max_vector_row)
        return [extent // inner, inner]

    def winograd_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        cfg = self.cfg
        return list(
            winograd_tiling.tile_decisions(func, name, cfg.vector_lanes, cfg.vector_registers, self.cores)
        )

    def intrinsic_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        """Up to 4 rows by 4 column tiles of the intrinsic (16 accumulators), fewer columns where
        the column tiles would not give every core one."""
        _, block = find_block(func.body, name)
        rows, columns = (static_dim(iv.extent, "a tensorized GEMM") for iv in block.iter_vars[-3:-1])
        tiles = columns // tensorize_vnni.LANES
        inner_rows = _largest_divisor(rows, 4)
        inner_tiles = _largest_divisor(tiles, 4)
        while inner_tiles > 1 and tiles // inner_tiles < self.cores:
            inner_tiles = _largest_divisor(tiles, inner_tiles - 1)
        return [[rows // inner_rows, inner_rows], [tiles // inner_tiles, inner_tiles]]

    def parallel_loops(self, extents: list[int], reduction_inside: bool) -> int:
        if reduction_inside and len(extents) > 1 and math.prod(extents[:-1]) >= self.cores:
            return len(extents) - 1
        return len(extents)

    def unroll(self, steps: tuple[int, ...]) -> int | None:
        return min(range(len(steps)), key=lambda i: abs(steps[i] - UNROLL_STEP))

    def _panels(
        self, func: PrimFunc, name: str, nest: _TileNest, tile: list[int]
    ) -> list[tuple[int, frozenset[int]]]:
        """The packable inputs worth a panel per column stripe of the register `tile`, with the loops
        each depends on: read as rows longer than the tile and at least PANEL_MIN_ROW long (else a
        stripe of them is contiguous already: weights packed in 16-lane blocks, whose copy would
        only shrink the parallel loop), reused by at least PANEL_MIN_ROWS rows of the output, and leaving
        PANEL_MIN_STRIPES stripes per core for the parallel loop. None when two inputs qualify on
        different loops: the parallel loop would keep the loops of both, a column stripe of neither."""
        _, block = find_block(func.body, name)
        reads = [b for b in block_reads(block) if b != block.body.buffer]
        spatial = [k for k, kind in enumerate(nest.kinds) if kind == "S"]
        out = []
        for index in packable_reads(func, name):
            buffer = reads[index]
            loops = frozenset().union(*(o.loops for o in nest.operands if o.buffer == buffer))
            rows = math.prod(nest.extents[k] for k in spatial if k not in loops)
            stripes = math.prod(nest.extents[k] // tile[k] for k in spatial if k in loops)
            if (
                buffer.shape[-1] > tile[nest.vector]
                and buffer.shape[-1] >= PANEL_MIN_ROW
                and rows >= PANEL_MIN_ROWS
                and stripes >= PANEL_MIN_STRIPES * self.cores
            ):
                out.append((index, loops))
        return out if len({loops for _, loops in out}) <= 1 else []

    def _stream_tiles(self, nest: _TileNest, tile: list[int]) -> int:
        """How many vector tiles of the vectorized loop sit side by side (S2) when the reduction steps
        one at a time: as many as fill the accumulators and leave every core a parallel tile. Only
        the spatial loops give parallel tiles (counting the reduction too, a 784 -> 128 dense layer
        ran on one of two cores)."""
        vectors = _registers(tile[nest.vector], self.cfg.vector_lanes)
        rest = nest.extents[nest.vector] // tile[nest.vector]
        outer = math.prod(
            e // t
            for k, (e, t) in enumerate(zip(nest.extents, tile))
            if k != nest.vector and nest.kinds[k] == "S"
        )
        fits = [
            d
            for d in divisors(rest)
            if d * vectors <= self.cfg.accumulator_registers and outer * (rest // d) >= self.cores
        ]
        return max(fits, default=1)

    def _register_tile(self, nest: _TileNest) -> list[int]:
        """Factor per loop of the best-scoring register tile (1 off the tile)."""
        cfg = self.cfg
        widest = cfg.vector_tile_limit(nest.extents[nest.vector])  # the first bound of _RegisterTile
        best: tuple[tuple[float, int, int, int, int], list[int]] | None = None
        widths = [w for w in divisors(nest.extents[nest.vector]) if w <= widest]
        for width in widths:
            registers = _registers(width, cfg.vector_lanes)
            rows_budget = cfg.accumulator_registers // registers
            if rows_budget == 0 and (registers < cfg.vector_registers or widths == [1, width]):
                # A row wider than the accumulators still gets one row where it leaves a register
                # for the broadcast operand, or where the only other width is 1, scalar code (a
                # prime: 97x113x127 on AVX2 ran 5 GFLOPS). `_score` charges its registers.
                rows_budget = 1
            for tile in _row_tiles(nest, width, rows_budget):
                if _streams(nest, tile) > MAX_STREAMS:
                    continue
                key = _score(nest, tile, cfg)
                if best is None or key > best[0]:
                    best = (key, tile)
        assert best is not None  # width 1 with no rows always fits
        return best[1]


@dataclass(frozen=True)
class _Operand:
    """A load of the block: its buffer, the loops its indices depend on, how far apart the lanes of
    the vectorized loop lie in memory (1 contiguous, 2 every other element (a stride-2 convolution),
    0 when they are not along its last dimension, or not linearly (a gather)), and its indices, in
    the loops' variables (the block's bindings substituted: a fused loop's `f // 7` and `f % 7`)."""

    buffer: Buffer
    loops: frozenset[int]
    stride: int
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class _TileNest:
    """The loops around a block to tile (their variables and extents), and the block's operand loads."""

    extents: list[int]
    kinds: list[str]
    vector: int  # the innermost spatial loop, which the rules vectorize
    operands: list[_Operand]
    loop_vars: list[Var]

    @classmethod
    def of(cls, func: PrimFunc, name: str, kinds: list[str]) -> _TileNest:
        path, block = find_block(func.body, name)
        loops = [lp for _, lp in loops_above(func.body, path)]
        vector = max(k for k, kind in enumerate(kinds) if kind == "S")
        bindings = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
        position = {lp.var: k for k, lp in enumerate(loops)}

        def operand(buffer: Buffer, indices: tuple[Expr, ...]) -> _Operand:
            indices = tuple(simplify(substitute(i, bindings)) for i in indices)
            used = set().union(*(free_vars(i) for i in indices))
            loops_read = frozenset(position[v] for v in used if v in position)
            return _Operand(buffer, loops_read, _lane_stride(buffer, indices, loops[vector].var), indices)

        operands = [
            operand(ld.buffer, ld.indices) for ld in block_loads(block) if ld.buffer != block.body.buffer
        ]
        extents = [static_dim(lp.extent, "the default schedule") for lp in loops]
        # The rows are tiled as the tiling rule covers them (`analysis.row_cover`).
        extents = [
            e if cover is None else covered_extent(e, cover)
            for e, cover in zip(extents, row_covers(extents, kinds))
        ]
        return cls(extents, kinds, vector, operands, [lp.var for lp in loops])


def _lane_stride(buffer: Buffer, indices: tuple[Expr, ...], lane: Var) -> int:
    """`_Operand.stride` of a load at `indices` (in the loops' variables) along the loop `lane`."""
    if stride_in(flat_index(buffer, indices), lane) == 1:
        return 1  # a fused loop's run crosses rows of the last dimension, contiguously
    last = linear(indices[-1])
    return abs(last.terms.get(lane, 0)) if free_vars(indices[-1]) <= set(last.terms) else 0


def _row_tiles(nest: _TileNest, width: int, budget: int) -> Iterator[list[int]]:
    """Every register tile with `width` on the vector loop and factors of the other spatial loops
    whose product (the rows) is at most `budget`."""
    others = [k for k, kind in enumerate(nest.kinds) if kind == "S" and k != nest.vector]

    def extend(k: int, tile: list[int], rows: int) -> Iterator[list[int]]:
        if k == len(others):
            yield tile
            return
        loop = others[k]
        for f in divisors(nest.extents[loop]):
            if rows * f > budget:
                break
            yield from extend(k + 1, [*tile[:loop], f, *tile[loop + 1 :]], rows * f)

    yield from extend(0, [width if k == nest.vector else 1 for k in range(len(nest.kinds))], 1)


def _score(nest: _TileNest, tile: list[int], cfg: RuleConfig) -> tuple[float, int, int, int, int]:
    """Useful lanes per cycle of one reduction step over the register tile, then the tie-breakers:
    more accumulators, fewer bytes streamed from L2, fewer loads, a wider vector."""
    width = tile[nest.vector]
    vectors = _registers(width, cfg.vector_lanes)
    rows = math.prod(tile) // width
    accumulators = vectors * rows
    loads = 0
    for operand in nest.operands:
        count = 1
        for loop in operand.loops:
            if loop == nest.vector and operand.stride == 1:  # a row (split where it is odd on AVX2)
                count *= row_loads(width, cfg.vector_lanes, cfg.masked_odd_rows)
            elif loop == nest.vector:  # strided: the span's vectors and a shuffle per vector; a gather
                count *= vectors * (operand.stride + 1) if operand.stride else width
            else:
                count *= tile[loop]
        loads += count
    cycles = max(accumulators, loads, LATENCY_CHAINS)
    return width * rows / cycles, accumulators, -_streamed_bytes(nest, tile), -loads, width


def _streamed_bytes(nest: _TileNest, tile: list[int]) -> int:
    """Bytes one reduction step of the register `tile` reads from the operands it reads more than
    STREAM_BYTES of over the whole reduction: the parallel tiles that follow reuse them (the loops
    they do not depend on run innermost), but from L2, so each step's share comes from there. A row
    counts its lanes (times its stride), a broadcast its elements. Ties of the throughput estimate
    hide this: on a Xeon with two FMA ports, matmul 512^3's 4x64 tile (a 128 KiB stripe of B, 256
    bytes a step) ran 1.3x slower than 8x32 (64 KiB, within the bound), both with panels; BERT's
    attention context, 3 heads x 2 rows x 64 columns (96 KiB of V), 1.3-1.7x slower than 3 x 4 x 32,
    whose narrower stripes also get panels (bench/results/2026-11-25-d.md, thirteenth stop). A conv's input a
    little over L1 (ResNet-18 conv2_x: 44 KiB) is not streamed: counted so, its tile lost 10%. On
    AVX2 no suite shape's tile changed."""
    total = 0
    for operand in _streamed(nest, tile):
        elements = 1
        for loop in operand.loops:
            elements *= tile[loop] * (max(operand.stride, 1) if loop == nest.vector else 1)
        total += elements * np.dtype(operand.buffer.dtype).itemsize
    return total


def _streams(nest: _TileNest, tile: list[int]) -> int:
    """Contiguous runs one reduction step of the register `tile` reads as vectors from operands that
    stream from L2 or beyond (`_streamed_bytes`): one per row of the tile such an operand depends on.
    Each is a stream the hardware prefetchers must follow, and they follow few. Weights packed in
    16-lane blocks, read at batch 1 (a decode step, a classifier), give one run per block of the tile
    and share nothing between rows but one broadcast element: the throughput estimate took 24 rows
    (24 runs 48 KiB apart), and rows beyond the FMA latency's LATENCY_CHAINS accumulators only add
    runs. A 1 x 768 x 3072 layer ran 28 GFLOPS warm with 24, 70-95 with 8, on a Zen 5's two cores
    (bench/results/2026-12-04.md). A row-major operand's row is one run however wide the tile."""
    return sum(
        math.prod(tile[k] for k in operand.loops if k != nest.vector and nest.kinds[k] == "S")
        for operand in _streamed(nest, tile)
        if operand.stride == 1 and nest.vector in operand.loops
    )


def _streamed(nest: _TileNest, tile: list[int]) -> list[_Operand]:
    """The operands the register `tile` reads more than STREAM_BYTES of over the whole reduction:
    they come from L2 or beyond."""
    return [o for o in nest.operands if _footprint(nest, o, tile) > STREAM_BYTES]


def _footprint(nest: _TileNest, operand: _Operand, tile: list[int]) -> int:
    """Bytes of `operand` one register tile reads over the whole reduction: the span of each index
    with the spatial loops over the tile and the reduction's over their extents (an index with no
    bound spans the whole of its dimension)."""
    ranges = {
        var: (0, (tile[k] if nest.kinds[k] == "S" else nest.extents[k]) - 1)
        for k, var in enumerate(nest.loop_vars)
    }
    total = np.dtype(operand.buffer.dtype).itemsize
    for index, dim in zip(operand.indices, static_shape(operand.buffer.shape, "the default schedule")):
        span = bound(index, ranges)
        total *= dim if span is None else min(dim, span[1] - span[0] + 1)
    return total


def _registers(width: int, lanes: int) -> int:
    """Vector registers one row of a `width`-wide vectorized loop fills, as the code generator emits
    it (`vector_pieces`): 56 lanes are 32 + 16 + 8, 4 AVX-512 registers; 7 lanes in 8 are one vector,
    1 register. (Counted as 4 + 2 + 1 lanes, 3 registers, a 14x14 conv's tile kept 8 of its 24
    accumulators: bench/results/2026-11-25-c.md, eleventh stop.)"""
    return sum(ceil_div(piece, lanes) for piece in vector_pieces(width, lanes))


def _largest_divisor(extent: int, limit: int) -> int:
    return max(d for d in divisors(extent) if d <= limit)


def _read_apart_per_output(func: PrimFunc, name: str) -> bool:
    """Whether the producer `name` feeds one reduction (a tiled block, or a pool's window) that
    indexes it with every one of its output variables: tiles of that block then read disjoint parts
    of it (up to a window's halo), so no tile needs what another computed, and the part each
    parallel iteration reads stays in its core's cache. (ResNet-18's max pool wrote its whole padded
    input, 3.3 MB, and read it back.)"""
    _, block = find_block(func.body, name)
    consumers = [c for c in readers(func.body, block.body.buffer) if c.name != name]
    if len(consumers) != 1 or not consumers[0].is_reduction:
        return False
    spatial = {iv.var for iv in consumers[0].iter_vars if iv.kind == "S"}
    loads = [ld for ld in block_loads(consumers[0]) if ld.buffer == block.body.buffer]
    return all(spatial <= set().union(*(free_vars(i) for i in ld.indices)) for ld in loads)
