"""What the schedule rules and the default schedule's heuristic ask of a block: how its loops feed its
iteration variables, whether tiling pays, which inputs a panel could pack, which consumer can follow
its tiles, which window a reduction vectorizes."""

from __future__ import annotations

from compiler.codegen_vector import flat_index, stride_in
from compiler.ir import Block, Buffer, Expr, For, IterVar, PrimFunc, const, structural_equal
from compiler.schedule.compute_location import blocked_reads
from compiler.schedule.tree import find_block, loops_above, readers
from compiler.visit import block_loads, block_reads, free_vars

# The largest step, in elements, of a window reduction's reads along the loop it vectorizes: a
# stride-2 pool reads every other element (`codegen_vector`'s strided loads); a reduction that reads
# rows further apart (a softmax's row max, a global mean over channels) would gather each lane.
WINDOW_STRIDE = 2


# A tiled block's loop of rows whose extent has no divisor from COVER_MIN to COVER_MAX (a ViT's 197
# tokens, a prime) is tiled as if rounded up to a multiple in that range, the last tile guarded
# (`Schedule.sample_covering_tile`): the register tile takes several rows at a time only where they
# divide the loop, so 197 rows ran one at a time (a (197 x 768) x (768 x 3072) dense layer with its
# gelu, Zen 4, 2 threads: 44.4 ms so, 9.9 ms on rows padded to 200 in the graph, the padding's copy
# and slice included, bench/results/2026-11-28.md). Guarded instead of padded, the rows keep their
# count and the layer its epilogues (bench/results/2026-12-04.md).
COVER_MIN, COVER_MAX = 4, 8
COVER_FROM = 16  # fewer rows: a batch-1 style loop, whose tiles run along the columns


def row_cover(extent: int, columns: int) -> int | None:
    """The multiple a loop of rows of this static extent is tiled for, beside a vectorized loop of
    `columns`; None where some tile from COVER_MIN to COVER_MAX divides it, or where there is no
    vector (one column: a row max kept as a column, each row's reduction contiguous, which LLVM
    vectorizes along the reduction; 6 rows side by side ran 8x slower). Else the multiple that
    covers it with the fewest extra rows, the larger on a tie (197: 6, tiled as 198)."""
    multiples = range(COVER_MIN, COVER_MAX + 1)
    if columns == 1 or extent < COVER_FROM or any(extent % m == 0 for m in multiples):
        return None
    return min(multiples, key=lambda m: (-extent % m, -m))


def row_covers(extents: list[int], kinds: list[str]) -> list[int | None]:
    """`row_cover` of each loop around a tiled block (`loop_kinds`), None but for its spatial loops
    other than the vectorized one, the innermost: what the tiling rule and the heuristic both read."""
    vector = max(k for k, kind in enumerate(kinds) if kind == "S")
    return [
        row_cover(extent, extents[vector]) if kind == "S" and k != vector else None
        for k, (extent, kind) in enumerate(zip(extents, kinds))
    ]


def block_of(func: PrimFunc, name: str) -> Block:
    return find_block(func.body, name)[1]


def is_tiling_target(func: PrimFunc, name: str) -> bool:
    """A reduction where some input is not indexed by some spatial variable: its data is reused
    across that variable, which tiling turns into cache and register reuse."""
    block = block_of(func, name)
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


def loop_kinds(func: PrimFunc, name: str) -> list[str]:
    """For each loop around the block: "S" if it feeds only spatial bindings, "R" if it feeds a
    reduction binding, "-" if it feeds none."""
    path, block = find_block(func.body, name)
    out = []
    for _, lp in loops_above(func.body, path):
        kinds = {iv.kind for iv, b in zip(block.iter_vars, block.bindings) if lp.var in free_vars(b)}
        out.append("R" if kinds - {"S"} else "S" if kinds else "-")
    return out


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
    kinds = loop_kinds(func, name)
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
    kinds = loop_kinds(func, name)
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


def elementwise_consumer(func: PrimFunc, name: str) -> str | None:
    """The single elementwise block that reads this block's output, if it writes a function output."""
    buf: Buffer = block_of(func, name).body.buffer
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


def window_loop(func: PrimFunc, name: str) -> int | None:
    """For a reduction whose loops are spatial then reduction loops (not a tiling target), the index
    of its innermost spatial loop if every read moves at most `WINDOW_STRIDE` elements along it."""
    path, block = find_block(func.body, name)
    kinds = loop_kinds(func, name)
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
