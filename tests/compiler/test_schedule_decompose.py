"""decompose_reduction at every legal loop (after reorders, guarded splits and compute_at), and the
loops where the init would run more than once per element."""

import pytest
from helpers import (
    assert_computes,
    conv2d,
    extents,
    loop_kinds,
    loops_of,
    matmul,
    mm_relu,
    schedule_error,
    softmax,
)

from compiler.schedule.tree import find_block


def has_init(sch, block: str) -> bool:
    return find_block(sch.func.body, block)[1].init is not None


@pytest.mark.parametrize("level", range(3), ids=["i", "j", "k"])
def test_decompose_at_each_matmul_loop(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    loops = sch.get_loops(c)
    init = sch.decompose_reduction(c, loops[level])
    assert init.name == "C_init"
    assert not has_init(sch, "C")
    assert extents(sch, sch.get_loops(init)) == [97, 127]  # one init per output element
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(2), ids=["i", "k"])
def test_decompose_above_a_reduction_loop_that_encloses_spatial_loops(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    sch.decompose_reduction(c, [i, k][level])
    assert_computes(wl, sch)


def test_decompose_inside_a_reduction_loop_is_refused():
    sch = matmul().schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    with schedule_error("C", "j", "k", match="enclose"):
        sch.decompose_reduction(c, j)


def test_decompose_inside_an_outer_part_of_a_split_reduction_is_refused():
    sch = matmul().schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(i, k0, j, k1)
    with schedule_error("C", k0.name, match="enclose"):
        sch.decompose_reduction(c, j)
    with schedule_error("C", k1.name, match="enclose"):
        sch.decompose_reduction(c, k1)


@pytest.mark.parametrize("level", range(3))
def test_decompose_after_guarded_splits(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 16])  # 127 -> 8 * 16: the init keeps the guard of j
    k0, k1 = sch.split(k, [None, 8])  # 61 -> 8 * 8: the init drops the guard of k
    sch.reorder(i, j0, k0, k1, j1)
    sch.decompose_reduction(c, [i, j0, k0][level])
    assert_computes(wl, sch)


def test_decompose_the_mlc_schedule_with_a_vectorized_inner_loop():
    wl = mm_relu()
    sch = wl.schedule()
    y = sch.get_block("Y")
    _, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    init = sch.decompose_reduction(y, k)
    assert loop_kinds(sch, sch.get_loops(init))[-1] == "vectorized"
    assert_computes(wl, sch)


def test_decompose_a_reduction_computed_at_its_consumer():
    wl = mm_relu()
    sch = wl.schedule()
    y = sch.get_block("Y")
    ci, _ = loops_of(sch, "C")
    sch.compute_at(y, ci)
    loops = sch.get_loops(y)
    sch.decompose_reduction(y, loops[-1])
    assert_computes(wl, sch)


@pytest.mark.parametrize("block", ["M", "S"])
def test_decompose_max_and_sum_of_softmax(block):
    wl = softmax()
    sch = wl.schedule()
    b = sch.get_block(block)
    _, k = sch.get_loops(b)
    sch.decompose_reduction(b, k)
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(5), ids=["b", "f", "y", "x", "rc"])
def test_decompose_conv_at_loops_outside_its_reduction(level):
    wl = conv2d()
    sch = wl.schedule()
    conv = sch.get_block("conv")
    sch.decompose_reduction(conv, sch.get_loops(conv)[level])
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [5, 6], ids=["ry", "rx"])
def test_decompose_conv_inside_its_reduction_is_refused(level):
    sch = conv2d().schedule()
    conv = sch.get_block("conv")
    loop = sch.get_loops(conv)[level]
    with schedule_error("conv", loop.name, "rc", match="enclose"):
        sch.decompose_reduction(conv, loop)


def test_decompose_a_loop_that_mixes_spatial_and_reduction_is_refused():
    sch = matmul().schedule()
    c = sch.get_block("C")
    _, j, k = sch.get_loops(c)
    fused = sch.fuse(j, k)
    with schedule_error("C", fused.name, match="mix"):
        sch.decompose_reduction(c, fused)


def test_decompose_a_block_without_init_is_refused():
    sch = mm_relu().schedule()
    c = sch.get_block("C")
    with schedule_error("C", match="no init"):
        sch.decompose_reduction(c, sch.get_loops(c)[0])
    y = sch.get_block("Y")
    i, _, _ = sch.get_loops(y)
    sch.decompose_reduction(y, i)
    with schedule_error("Y", match="no init"):
        sch.decompose_reduction(y, i)


def test_decompose_at_a_loop_that_does_not_enclose_the_block_is_refused():
    sch = mm_relu().schedule()
    ci, _ = loops_of(sch, "C")
    with schedule_error("Y", ci.name, match="does not enclose"):
        sch.decompose_reduction(sch.get_block("Y"), ci)
