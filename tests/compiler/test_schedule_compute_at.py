"""compute_at and reverse_compute_at at every loop level, after divisible and guarded splits, with the
overlapping halo of a conv's padding, and the moves that must be refused; sample_compute_location
offers only locations where compute_at is legal; the innermost loop of a moved block."""

import numpy as np
import pytest
from helpers import (
    ProgramCase,
    assert_computes,
    bias_relu,
    chain,
    conv2d,
    loops_of,
    matmul,
    mm_relu,
    mm_two_consumers,
    scan_pipeline,
    schedule_error,
    softmax,
    stencil,
)

from compiler import LoopRV, ScheduleError, te
from compiler.ir import For
from compiler.schedule import compute_location
from compiler.schedule.compute_location import can_compute_at
from compiler.schedule.tree import check_order, find_block, loop_iter_kinds, loops_above, nodes

CONV_LOOPS = 7  # b, f, y, x, rc, ry, rx


def block_loop_names(sch, block: str) -> list[str]:
    path, _ = find_block(sch.func.body, block)
    return [lp.var.name for _, lp in loops_above(sch.func.body, path)]


# --- compute_at -----------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0, 1])
def test_compute_at_each_consumer_loop_of_a_chain(level):
    wl = chain((37, 53))
    sch = wl.schedule()
    loop = loops_of(sch, "C")[level]
    sch.compute_at(sch.get_block("B"), loop)
    assert loop.name in block_loop_names(sch, "B")
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(4))
def test_compute_at_after_non_divisible_consumer_splits(level):
    wl = chain((37, 53))
    sch = wl.schedule()
    i, j = loops_of(sch, "C")
    i0, i1 = sch.split(i, [None, 8])  # 40 > 37
    j0, j1 = sch.split(j, [None, 16])  # 64 > 53
    sch.reorder(i0, j0, i1, j1)
    sch.compute_at(sch.get_block("B"), [i0, j0, i1, j1][level])
    assert_computes(wl, sch)


def test_compute_at_a_three_stage_chain_inside_out():
    wl = chain((37, 53), stages=3)
    sch = wl.schedule()
    i, j = loops_of(sch, "D")
    j0, _ = sch.split(j, [None, 8])
    sch.compute_at(sch.get_block("C"), j0)
    sch.compute_at(sch.get_block("B"), j0)  # B's consumer C now lives under j0
    assert block_loop_names(sch, "B")[:2] == [i.name, j0.name]
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [0, 1])
def test_compute_at_of_a_reduction_producer(level):
    wl = mm_relu()
    sch = wl.schedule()
    loop = loops_of(sch, "C")[level]
    sch.compute_at(sch.get_block("Y"), loop)
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(4))
def test_compute_at_of_a_reduction_producer_after_guarded_splits(level):
    wl = mm_relu()
    sch = wl.schedule()
    i, j = loops_of(sch, "C")
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.compute_at(sch.get_block("Y"), [i0, j0, i1, j1][level])
    assert_computes(wl, sch)


def test_compute_at_into_a_fused_and_split_consumer():
    wl = chain((37, 53))
    sch = wl.schedule()
    outer, _ = sch.split(sch.fuse(*loops_of(sch, "C")), [None, 64])  # a tile spans two rows
    sch.compute_at(sch.get_block("B"), outer)
    assert_computes(wl, sch)


@pytest.mark.parametrize("split", [None, 8])
@pytest.mark.parametrize("level", [0, 1])
def test_compute_at_recomputes_the_halo_of_a_stencil(split, level):
    wl = stencil()
    sch = wl.schedule()
    (i,) = loops_of(sch, "C")
    loops = sch.split(i, [None, split]) if split else [i, i]
    sch.compute_at(sch.get_block("P"), loops[level])
    assert_computes(wl, sch)


def test_compute_at_covers_a_read_region_wider_than_the_buffer():
    A = te.placeholder((8,), name="A")
    P = te.compute((8,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((8,), lambda i: te.select(i >= 4, P[i - 4], P[i + 4]), name="C")
    wl = ProgramCase(te.create_prim_func([A, C]), lambda a: (2 * np.roll(a, 4),), 1)
    sch = wl.schedule()
    (i,) = loops_of(sch, "C")
    sch.compute_at(sch.get_block("P"), i)  # reads P[i - 4 .. i + 4]: 9 elements of an 8-element buffer
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(CONV_LOOPS))
def test_compute_at_conv_padding_at_every_conv_loop(level):
    wl = conv2d()
    sch = wl.schedule()
    sch.compute_at(sch.get_block("pad"), loops_of(sch, "conv")[level])
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(4))
def test_compute_at_conv_padding_into_guarded_output_tiles(level):
    wl = conv2d(n=1, ci=2, h=13, w=11, co=3)
    sch = wl.schedule()
    _, f, y, x, *_ = loops_of(sch, "conv")
    y0, y1 = sch.split(y, [None, 4])  # 16 > 13: halo rows at a guarded edge
    x0, x1 = sch.split(x, [None, 4])  # 12 > 11
    sch.reorder(y0, x0, f, y1, x1)
    sch.compute_at(sch.get_block("pad"), [y0, x0, f, y1][level])
    assert_computes(wl, sch)


def test_softmax_fused_into_its_last_block_row_by_row():
    wl = softmax()
    sch = wl.schedule()
    i, _ = loops_of(sch, "Y")
    for name in ("S", "E", "M"):
        sch.compute_at(sch.get_block(name), i)
    assert len({block_loop_names(sch, name)[0] for name in "MESY"}) == 1
    assert_computes(wl, sch)


# --- reverse_compute_at ---------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0, 1])
def test_reverse_compute_at_each_spatial_producer_loop(level):
    wl = mm_relu()
    sch = wl.schedule()
    loop = loops_of(sch, "Y")[level]
    sch.reverse_compute_at(sch.get_block("C"), loop)
    assert loop.name in block_loop_names(sch, "C")
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(4))
def test_reverse_compute_at_tile_loops_above_the_reduction(level):
    wl = mm_relu()
    sch = wl.schedule()
    i, j, k = loops_of(sch, "Y")
    i0, i1, i2 = sch.split(i, [None, 4, 2])  # 13 * 8 = 104 > 97
    j0, j1, j2 = sch.split(j, [4, None, 8])  # 4 * 4 * 8 = 128 > 127
    sch.reorder(i0, j0, i1, j1, k, i2, j2)
    sch.reverse_compute_at(sch.get_block("C"), [i0, j0, i1, j1][level])
    assert_computes(wl, sch)


def test_reverse_compute_at_after_nested_non_divisible_splits():
    wl = mm_relu(16, 27, 8)
    sch = wl.schedule()
    _, j, _ = loops_of(sch, "Y")
    j0, j1 = sch.split(j, [None, 10])
    sch.split(j1, [None, 4])  # its guard cuts a tile of j0 short in the middle of the buffer
    sch.reverse_compute_at(sch.get_block("C"), j0)
    assert_computes(wl, sch)


def test_reverse_compute_at_where_a_tile_spans_parts_of_two_rows_is_refused():
    sch = mm_relu(16, 27, 8).schedule()
    i, j, k = loops_of(sch, "Y")
    sch.reorder(k, i, j)
    f0, f1 = sch.split(sch.fuse(i, j), [None, 16])
    sch.reorder(f0, k, f1)
    with schedule_error("C", f0.name, match="strided part"):
        sch.reverse_compute_at(sch.get_block("C"), f0)


def test_reverse_compute_at_where_a_tile_is_whole_rows_of_a_fused_loop():
    """16 x 14 fused and split by 28: each tile is two whole rows, a box, though neither row index
    (f // 14) nor column (f % 14) is dense alone."""
    wl = mm_relu(16, 14, 8)
    sch = wl.schedule()
    i, j, k = loops_of(sch, "Y")
    sch.reorder(k, i, j)
    f0, f1 = sch.split(sch.fuse(i, j), [None, 28])
    sch.reorder(f0, k, f1)
    sch.reverse_compute_at(sch.get_block("C"), f0)
    assert f0.name in block_loop_names(sch, "C")
    assert_computes(wl, sch)


def test_reverse_compute_at_where_a_guard_skips_part_of_a_fused_run_is_refused():
    """Rows of 2 fused in threes, the fused loop of 6 split by 5 (guard g < 6): the run counts 10
    points, a box of 5 rows, but the guard leaves 3 rows written; the consumer would read the rest
    before any iteration wrote them (under a parallel loop, wrong results)."""
    sch = mm_relu(7, 2, 8).schedule()
    i, j, k = loops_of(sch, "Y")
    i0, i1 = sch.split(i, [None, 3])
    g0, g1 = sch.split(sch.fuse(i1, j), [None, 5])
    sch.reorder(i0, k, g0, g1)
    with schedule_error("C", i0.name, match="strided part"):
        sch.reverse_compute_at(sch.get_block("C"), i0)


def test_reverse_compute_at_under_the_overhang_of_a_guarded_split_runs_only_where_its_producer_does():
    """Rows 4 = 2 x 2 fused with their 2 columns and split 2 x 3 (guard l0 * 3 + l1 < 4): where the
    guard fails the producer writes nothing, and the consumer must not run either (it computed
    elements of other rows from what no iteration had written)."""
    wl = mm_relu(4, 2, 8)
    sch = wl.schedule()
    i, j, k = loops_of(sch, "Y")
    i0, i1 = sch.split(i, [2, None])
    l0, l1 = sch.split(sch.fuse(i1, j), [None, 3])
    sch.reorder(l0, l1, i0, k)
    sch.reverse_compute_at(sch.get_block("C"), i0)
    assert_computes(wl, sch)


def one_by_one_conv_relu(channels: int = 3, filters: int = 4, h: int = 6, w: int = 5) -> ProgramCase:
    """Y[f, y, x] = sum over c of W[f, c] * X[c, y, x] (a 1x1 conv, unbatched), then R = relu(Y)."""
    X, W = te.placeholder((channels, h, w), name="X"), te.placeholder((filters, channels), name="W")
    c = te.reduce_axis((0, channels), name="c")
    Y = te.compute((filters, h, w), lambda f, y, x: te.sum(W[f, c] * X[c, y, x], axis=c), name="Y")
    R = te.compute((filters, h, w), lambda f, y, x: te.max(Y[f, y, x], 0.0), name="R")
    reference = lambda x, wt: (np.maximum(np.einsum("fc,cyx->fyx", wt, x), 0),)  # noqa: E731
    return ProgramCase(te.create_prim_func([X, W, R]), reference, 2)


@pytest.mark.parametrize(("run", "fits"), [(10, True), (15, True), (30, True), (6, False), (3, False)])
def test_reverse_compute_at_a_tile_of_filters_by_a_run_of_the_fused_image(run, fits):
    """Per tile of the fused 6 x 5 image, 2 filters by `run` pixels: a box where the run is whole
    rows; a run ending inside a row (6, or 3, which may: it is not proven not to) is refused."""
    wl = one_by_one_conv_relu()
    sch = wl.schedule()
    f, y, x, c = loops_of(sch, "Y")
    f0, f1 = sch.split(f, [2, None])
    p0, p1 = sch.split(sch.fuse(y, x), [None, run])
    sch.reorder(f0, p0, c, f1, p1)
    if not fits:
        with schedule_error("R", p0.name, match="strided part"):
            sch.reverse_compute_at(sch.get_block("R"), p0)
        return
    sch.reverse_compute_at(sch.get_block("R"), p0)
    assert p0.name in block_loop_names(sch, "R")
    assert_computes(wl, sch)


def test_reverse_compute_at_where_one_iteration_writes_a_strided_set_is_refused():
    sch = mm_relu(16, 24, 8).schedule()
    i, j, _ = loops_of(sch, "Y")
    j0, j1 = sch.split(j, [2, None])
    sch.reorder(i, j1, j0)  # one iteration of j1 writes columns j1 and j1 + 12
    with schedule_error("C", j1.name, match="strided part of dimension 1"):
        sch.reverse_compute_at(sch.get_block("C"), j1)


@pytest.mark.parametrize("level", [0, 1])
def test_reverse_compute_at_bias_add_then_relu(level):
    wl = bias_relu()
    sch = wl.schedule()
    loop = loops_of(sch, "Y")[level]
    sch.reverse_compute_at(sch.get_block("Z"), loop)
    sch.reverse_compute_at(sch.get_block("R"), loop)
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [0, 1], ids=["rows", "columns"])
def test_reverse_compute_at_a_reduction_consumer(level):
    wl = softmax()
    sch = wl.schedule()
    sch.reverse_compute_at(sch.get_block("S"), loops_of(sch, "E")[level])
    assert_computes(wl, sch)


def test_reverse_compute_at_a_consumer_under_its_producer_twice_nested():
    wl = chain((37, 53), stages=3)
    sch = wl.schedule()
    i, j = loops_of(sch, "B")
    sch.reverse_compute_at(sch.get_block("C"), j)
    sch.reverse_compute_at(sch.get_block("D"), i)
    assert_computes(wl, sch)


def blocked_matmul_unblocked(block: int = 8) -> ProgramCase:
    """Y [m, n / block, block] (columns in blocks, as a conv in blocks of output channels computes),
    then R [m, n] = relu(Y), read back at (j // block, j % block)."""
    m, k, n = 5, 7, 24
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    Y = te.compute(
        (m, n // block, block), lambda i, jo, ji: te.sum(A[i, r] * B[r, jo * block + ji], axis=r), name="Y"
    )
    R = te.compute((m, n), lambda i, j: te.max(Y[i, j // block, j % block], 0.0), name="R")
    func = te.create_prim_func([A, B, R], name="blocked_relu")
    return ProgramCase(func, lambda a, b: (np.maximum(a @ b, 0),), 2)


@pytest.mark.parametrize("level", [0, 1, 2], ids=["rows", "column blocks", "inside a block"])
def test_reverse_compute_at_a_consumer_reading_whole_blocks_back_in_plain_layout(level):
    wl = blocked_matmul_unblocked()
    sch = wl.schedule()
    i, jo, ji, _ = loops_of(sch, "Y")
    jo0, jo1 = sch.split(jo, [None, 2])
    sch.reorder(i, jo0, jo1, ji)
    loop = [i, jo1, ji][level]
    if level == 2:  # one lane of a block: the consumer's columns are not a box of its own
        with schedule_error("R", match="blocks of 8"):
            sch.reverse_compute_at(sch.get_block("R"), loop)
        return
    sch.reverse_compute_at(sch.get_block("R"), loop)
    path, _ = find_block(sch.func.body, "R")
    names = [lp.var.name for _, lp in loops_above(sch.func.body, path)]
    inner = [lp.extent for _, lp in loops_above(sch.func.body, path)][names.index(loop.name) + 1 :]
    assert np.prod(inner) == [24, 8][level]  # the columns this iteration produced, not the row
    assert_computes(wl, sch)


def tiles_read_back(m: int = 2, tiles: int = 5) -> ProgramCase:
    """Y [tiles, 6] (a product per tile, as Winograd's), then R [tiles * m - 1, 6] reading the tile
    of each row, `Y[y // m]`, with a coefficient picked by `y % m` (the output transform's), over
    an extent that is not whole tiles."""
    A = te.placeholder((tiles, 7), name="A")
    B = te.placeholder((7, 6), name="B")
    r = te.reduce_axis((0, 7), name="k")
    Y = te.compute((tiles, 6), lambda t, j: te.sum(A[t, r] * B[r, j], axis=r), name="Y")
    rows = tiles * m - 1
    R = te.compute((rows, 6), lambda y, j: Y[y // m, j] * te.select(y % m == 0, 1.0, -1.0), name="R")
    func = te.create_prim_func([A, B, R], name="tiles_read_back")

    def reference(a, b):
        sign = np.where(np.arange(rows) % m == 0, 1.0, -1.0)[:, None]
        return (np.repeat(a @ b, m, axis=0)[:rows] * sign,)

    return ProgramCase(func, reference, 2)


def test_reverse_compute_at_a_consumer_reading_its_producers_tile_of_rows():
    """Under the producer's tile loop the consumer computes the rows of that tile only (y // m is
    the tile), the last tile's extra row guarded off."""
    wl = tiles_read_back()
    sch = wl.schedule()
    t, _, _ = loops_of(sch, "Y")
    sch.reverse_compute_at(sch.get_block("R"), t)
    path, _ = find_block(sch.func.body, "R")
    names = [lp.var.name for _, lp in loops_above(sch.func.body, path)]
    inner = [lp.extent for _, lp in loops_above(sch.func.body, path)][names.index(t.name) + 1 :]
    assert inner == [2, 6]
    sch.parallel(t)  # each iteration writes its own rows
    assert_computes(wl, sch)


def test_reverse_compute_at_a_consumer_reading_a_part_of_its_columns_whole_is_refused():
    """A producer loop over column blocks of Y; the consumer reads Y[i, a * 4 + b] with a and b
    its own variables, which the move would leave over their whole ranges: each iteration would
    compute every element from columns it did not produce (under a parallel loop, a race)."""
    A = te.placeholder((5, 7), name="A")
    B = te.placeholder((7, 8), name="B")
    r = te.reduce_axis((0, 7), name="k")
    Y = te.compute((5, 8), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    R = te.compute((5, 2, 4), lambda i, a, b: Y[i, a * 4 + b] + 1.0, name="R")
    sch = ProgramCase(
        te.create_prim_func([A, B, R]), lambda a, b: ((a @ b + 1).reshape(5, 2, 4),), 2
    ).schedule()
    _, j, _ = loops_of(sch, "Y")
    j0, _ = sch.split(j, [2, None])
    with schedule_error("R", match="produces parts"):
        sch.reverse_compute_at(sch.get_block("R"), j0)


# --- refused moves --------------------------------------------------------------------------------
def test_reverse_compute_at_under_the_reduction_loop_is_refused():
    sch = mm_relu().schedule()
    _, _, k = loops_of(sch, "Y")
    with schedule_error("C", "k", "Y", match="not finished"):
        sch.reverse_compute_at(sch.get_block("C"), k)


def test_reverse_compute_at_inside_a_reordered_reduction_is_refused():
    sch = mm_relu().schedule()
    _, j, k = loops_of(sch, "Y")
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    with schedule_error("C", j1.name, "Y", match="not finished"):
        sch.reverse_compute_at(sch.get_block("C"), j1)


def test_reverse_compute_at_of_a_stencil_consumer_is_refused():
    sch = stencil().schedule()
    (i,) = loops_of(sch, "P")
    with schedule_error("C", "i", match="neighbouring"):
        sch.reverse_compute_at(sch.get_block("C"), i)


def test_compute_at_a_loop_not_above_every_consumer_is_refused():
    sch = mm_two_consumers().schedule()
    i, _ = loops_of(sch, "C")
    with schedule_error("Y", "D", match="not under the loop"):
        sch.compute_at(sch.get_block("Y"), i)


def test_compute_at_of_an_output_block_is_refused():
    sch = mm_relu().schedule()
    i, _, _ = loops_of(sch, "Y")
    with schedule_error("C", "i", match="output"):
        sch.compute_at(sch.get_block("C"), i)


def test_compute_at_a_loop_of_the_block_itself_is_refused():
    sch = mm_relu().schedule()
    i, _, _ = loops_of(sch, "Y")
    with schedule_error("Y", "i", match="already under"):
        sch.compute_at(sch.get_block("Y"), i)


def test_reverse_compute_at_a_loop_without_its_producer_is_refused():
    sch = bias_relu().schedule()
    i, _, _ = loops_of(sch, "Y")
    with schedule_error("R", "i", match="exactly one buffer"):
        sch.reverse_compute_at(sch.get_block("R"), i)


def test_moving_a_decomposed_reduction_update_is_refused():
    sch = mm_relu().schedule()
    y = sch.get_block("Y")
    _, j, _ = sch.get_loops(y)
    sch.decompose_reduction(y, j)
    ci, _ = loops_of(sch, "C")
    with schedule_error("Y_update", match="without an init"):
        sch.compute_at(y, ci)


def test_moving_a_scan_step_is_refused():
    sch = scan_pipeline().schedule()
    t, _ = loops_of(sch, "D")
    with schedule_error("scan", match="scan step"):
        sch.compute_at(sch.get_block("scan"), t)
    x2t, _ = loops_of(sch, "X2")
    with schedule_error("scan", match="scan step"):
        sch.reverse_compute_at(sch.get_block("scan"), x2t)


def test_consumer_of_a_scan_cannot_enter_the_recurrence():
    sch = scan_pipeline().schedule()
    t, i = loops_of(sch, "scan")
    for loop in (t, i):
        with schedule_error("D", loop.name, "scan", match="recurrence"):
            sch.reverse_compute_at(sch.get_block("D"), loop)


def test_producer_of_a_scan_may_enter_the_recurrence():
    wl = scan_pipeline()
    sch = wl.schedule()
    t, _ = loops_of(sch, "scan")
    sch.compute_at(sch.get_block("X2"), t)
    assert_computes(wl, sch)


def test_refused_move_leaves_the_program_and_trace_unchanged():
    sch = mm_relu().schedule()
    _, _, k = loops_of(sch, "Y")
    before, trace = sch.func, sch.trace
    c = sch.get_block("C")
    with schedule_error("C"):
        sch.reverse_compute_at(c, k)
    assert sch.func == before
    assert sch.trace.instructions[:-1] == trace.instructions  # only the get_block was recorded


# --- sample_compute_location ----------------------------------------------------------------------
LOCATION_CASES = {
    "chain_B": (lambda: chain((37, 53)), "B", "C"),
    "chain3_C": (lambda: chain((19, 23), stages=3), "C", "D"),
    "conv_pad": (lambda: conv2d(n=1, ci=2, h=9, w=7, co=3), "pad", "conv"),
    "mm_relu_Y": (lambda: mm_relu(31, 37, 13), "Y", "C"),
    "softmax_M": (softmax, "M", "E"),
    "stencil_P": (stencil, "P", "C"),
}


@pytest.mark.parametrize("case", LOCATION_CASES)
def test_every_sampled_compute_location_is_legal(case):
    make, block, consumer = LOCATION_CASES[case]
    wl = make()
    sch = wl.schedule()
    consumer_loops = {lp.name for lp in loops_of(sch, consumer)}
    candidates = sch.compute_location_candidates(sch.get_block(block))
    assert candidates, "the consumer's own loops should be candidates"
    assert set(candidates) <= consumer_loops
    for decision in range(-1, len(candidates)):
        sch = wl.schedule()
        b = sch.get_block(block)
        loop = sch.sample_compute_location(b, decision=decision)
        assert loop.name == ("root" if decision < 0 else candidates[decision])
        sch.compute_at(b, loop)
        assert sch.trace.instructions[-2].decision == decision
        assert_computes(wl, sch)


def test_sample_compute_location_after_tiling_the_consumer():
    wl = mm_relu(31, 37, 13)
    sch = wl.schedule()
    i, j = loops_of(sch, "C")
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    candidates = sch.compute_location_candidates(sch.get_block("Y"))
    assert candidates == [lp.name for lp in (i0, j0, i1, j1)]
    for seed in range(6):
        s = wl.schedule(seed)
        si, sj = loops_of(s, "C")
        s0, s1 = s.split(si, [None, 4])
        t0, t1 = s.split(sj, [None, 8])
        s.reorder(s0, t0, s1, t1)
        y = s.get_block("Y")
        s.compute_at(y, s.sample_compute_location(y))
        assert_computes(wl, s)


def test_compute_location_candidates_end_at_a_vectorized_loop():
    """A row sum computed per lane of its consumer's vectorized loop would run once per lane, its
    reduction loop inside a loop LLVM cannot vectorize: the vectorized loop is never offered."""
    wl = softmax(n=5, m=64)
    sch = wl.schedule()
    sch.compute_inline(sch.get_block("E"))
    i, j = loops_of(sch, "Y")
    j0, j1 = sch.split(j, [None, 16])
    sch.vectorize(j1)
    candidates = sch.compute_location_candidates(sch.get_block("S"))
    assert candidates == [i.name, j0.name]
    s = sch.get_block("S")
    sch.compute_at(s, sch.sample_compute_location(s, decision=99))
    path, _ = find_block(sch.func.body, "S")
    assert [lp.kind for _, lp in loops_above(sch.func.body, path)][:2] == ["serial", "serial"]
    assert all(lp.kind != "vectorized" for _, lp in loops_above(sch.func.body, path))
    assert_computes(wl, sch)


@pytest.mark.parametrize(("decision", "expected"), [(-7, -1), (99, 1)])
def test_stale_compute_location_decision_is_clamped_and_recorded(decision, expected):
    sch = chain((37, 53)).schedule()
    b = sch.get_block("B")
    loop = sch.sample_compute_location(b, decision=decision)
    assert sch.trace.instructions[-1].decision == expected
    assert loop.name == ("root" if expected < 0 else sch.compute_location_candidates(b)[expected])


def test_sample_compute_location_of_an_output_offers_only_the_root():
    sch = matmul().schedule()
    c = sch.get_block("C")
    assert sch.compute_location_candidates(c) == []
    assert sch.sample_compute_location(c).name == "root"
    assert sch.trace.instructions[-1].decision == -1


@pytest.mark.parametrize("decision", ["1", 1.0, True])
def test_sample_compute_location_refuses_a_decision_that_is_not_an_index(decision):
    sch = chain((37, 53)).schedule()
    b = sch.get_block("B")
    with schedule_error("B", match="not an index"):
        sch.sample_compute_location(b, decision=decision)


def tiled_conv(sch):
    """The conv block of `conv2d(ci=4, h=8, w=8, co=4)` tiled S0 R0 S1 R1, with one unit tile per
    reduction level: returns the tiles of each level."""
    b, f, y, x, rc, ry, rx = loops_of(sch, "conv")
    f0, f1 = sch.split(f, [2, 2])
    y0, y1 = sch.split(y, [2, 4])
    x0, x1 = sch.split(x, [4, 2])
    rc0, rc1 = sch.split(rc, [2, 2])
    ry0, ry1 = sch.split(ry, [3, 1])
    rx0, rx1 = sch.split(rx, [1, 3])
    sch.reorder(b, f0, y0, x0, rc0, ry0, rx0, f1, y1, x1, rc1, ry1, rx1)
    return [b, f0, y0, x0], [rc0, ry0, rx0], [f1, y1, x1], [rc1, ry1, rx1]


def test_compute_location_candidates_end_below_the_outer_reduction_tiles():
    """As in MetaSchedule: unit loops are skipped, reduction loops may follow the outer spatial
    tiles, and the first spatial loop after a reduction loop ends the list; under it the padding
    would be recomputed at every step of loops it does not depend on."""
    wl = conv2d(ci=4, h=8, w=8, co=4)
    sch = wl.schedule()
    (_, f0, y0, x0), (rc0, ry0, _), _, _ = tiled_conv(sch)  # the batch loop and rx0 are unit loops
    candidates = sch.compute_location_candidates(sch.get_block("pad"))
    assert candidates == [lp.name for lp in (f0, y0, x0, rc0, ry0)]
    for decision in range(len(candidates)):
        s = wl.schedule()
        tiled_conv(s)
        pad = s.get_block("pad")
        s.compute_at(pad, s.sample_compute_location(pad, decision=decision))
        assert_computes(wl, s)


def test_trailing_reduction_loops_are_not_compute_locations():
    sch = conv2d().schedule()
    _, f, y, x, _, _, _ = loops_of(sch, "conv")  # the batch loop has extent 1
    assert sch.compute_location_candidates(sch.get_block("pad")) == [f.name, y.name, x.name]


def test_loop_iter_kinds_follow_the_bindings_of_every_block_under_the_loop():
    sch = conv2d(ci=4, h=8, w=8, co=4).schedule()
    (b, f0, _, _), (rc0, _, _), (f1, _, _), _ = tiled_conv(sch)
    kinds = {v.name: kind for v, kind in loop_iter_kinds(sch.func.body).items()}
    assert [kinds[lp.name] for lp in (b, f0, rc0, f1)] == ["S", "S", "R", "S"]
    scan = scan_pipeline().schedule()
    t, i = loops_of(scan, "scan")
    kinds = {v.name: kind for v, kind in loop_iter_kinds(scan.func.body).items()}
    assert (kinds[t.name], kinds[i.name]) == ("-", "S")  # t is the recurrence


def _placements():
    """(schedule, producer block) pairs: untiled and tiled consumers, several producers each."""
    yield conv2d().schedule(), "pad"
    sch = conv2d(ci=4, h=8, w=8, co=4).schedule()
    tiled_conv(sch)
    yield sch, "pad"
    sch = mm_relu(31, 37, 13).schedule()
    i, j = loops_of(sch, "C")
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    yield sch, "Y"
    yield chain((19, 23), stages=3).schedule(), "B"
    yield chain((19, 23), stages=3).schedule(), "C"
    yield softmax().schedule(), "M"
    yield stencil().schedule(), "P"
    yield mm_two_consumers().schedule(), "Y"
    yield scan_pipeline().schedule(), "X2"
    sch = mm_relu().schedule()
    y = sch.get_block("Y")
    sch.decompose_reduction(y, sch.get_loops(y)[1])
    yield sch, "Y"


def test_can_compute_at_agrees_with_compute_at_at_every_loop():
    outcomes = set()
    for sch, block in _placements():
        for _, loop in nodes(sch.func.body):
            if not isinstance(loop, For):
                continue
            legal = can_compute_at(sch.func, block, loop.var.name)
            s = sch.copy()
            try:
                s.compute_at(s.get_block(block), LoopRV("l", loop.var.name))
            except ScheduleError:
                assert not legal, f"{block} at {loop.var.name}: can_compute_at said yes"
                outcomes.add(False)
                continue
            assert legal, f"{block} at {loop.var.name}: can_compute_at said no"
            check_order(sch.func.body, s.func.body, block)  # the order the plan checked is the real one
            outcomes.add(True)
    assert outcomes == {True, False}


@pytest.mark.parametrize(("decision", "checked"), [(-1, 0), (0, 1), (2, 3), (99, 5)])
def test_replaying_a_compute_location_checks_only_the_candidates_up_to_it(monkeypatch, decision, checked):
    sch = conv2d(ci=4, h=8, w=8, co=4).schedule()
    tiled_conv(sch)
    candidates = sch.compute_location_candidates(sch.get_block("pad"))
    calls = []

    def counting(func, block, loop):
        calls.append(loop)
        return can_compute_at(func, block, loop)

    monkeypatch.setattr(compute_location, "can_compute_at", counting)
    loop = sch.sample_compute_location(sch.get_block("pad"), decision=decision)
    assert calls == candidates[:checked]  # every loop checked was legal here, so none is skipped
    assert loop.name == ("root" if decision < 0 else candidates[min(decision, len(candidates) - 1)])


# --- get_innermost_loop --------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [1, 4])
def test_the_innermost_loop_of_a_moved_block_is_one_trace_output_whatever_the_tile(rows):
    """A tile of 1 makes no loop, so get_loops' count depends on the tile; this query's does not."""
    wl = mm_relu()
    sch = wl.schedule()
    i, _, _ = loops_of(sch, "Y")
    i0, _ = sch.split(i, [None, rows])
    sch.reverse_compute_at(sch.get_block("C"), i0)
    innermost = sch.get_innermost_loop(sch.get_block("C"))
    assert innermost.name == block_loop_names(sch, "C")[-1]
    assert sch.trace.instructions[-1].kind == "get_innermost_loop"
    assert len(sch.trace.instructions[-1].outputs) == 1
    sch.vectorize(innermost)
    assert_computes(wl, sch)


def test_the_innermost_loop_of_a_block_without_a_loop_of_its_own_is_refused():
    """Moved under Y's column loop, relu's region is one element: the loop above it is Y's."""
    wl = mm_relu()
    sch = wl.schedule()
    _, j, _ = loops_of(sch, "Y")
    sch.reverse_compute_at(sch.get_block("C"), j)
    with schedule_error("C", match="no loop of its own"):
        sch.get_innermost_loop(sch.get_block("C"))
    assert sch.get_innermost_loop(sch.get_block("Y")).name == block_loop_names(sch, "Y")[-1]
