"""cache_read and cache_write, then placing the cache block with compute_at / reverse_compute_at as
MetaSchedule does (cache_write + reverse_compute_at at tile levels 1 and 2)."""

import pytest
from helpers import (
    assert_computes,
    conv2d,
    loops_of,
    matmul,
    mm_relu,
    schedule_error,
)

from compiler import Schedule
from compiler.schedule.tree import find_block
from compiler.visit import block_reads, blocks


def block_names(sch) -> list[str]:
    return [b.name for b in blocks(sch.func.body)]


def reads_of(sch, block: str) -> list[str]:
    return [b.name for b in block_reads(find_block(sch.func.body, block)[1])]


def tile_ssrsrs(sch: Schedule, block: str, i_factors, j_factors, k_factors):
    """MetaSchedule's multi-level tiling of a matmul: i, j in 3 levels, k in 2, ordered S S R S R S."""
    i, j, k = loops_of(sch, block)
    i0, i1, i2 = sch.split(i, i_factors)
    j0, j1, j2 = sch.split(j, j_factors)
    k0, k1 = sch.split(k, k_factors)
    sch.reorder(i0, j0, i1, j1, k0, i2, k1, j2)
    return i0, j0, i1, j1, k0, i2, k1, j2


def test_read_indices_follow_the_order_of_loads():
    sch = matmul().schedule()
    assert reads_of(sch, "C") == ["C", "A", "B"]  # a reduction reads its own output first


@pytest.mark.parametrize("level", range(3))
def test_cache_read_of_A_computed_at_each_matmul_loop(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    cached = sch.cache_read(c, 0)
    assert cached.name == "A_global"
    assert reads_of(sch, "C") == ["C", "A_global", "B"]
    sch.compute_at(cached, sch.get_loops(c)[level])
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(6))
def test_cache_read_of_B_computed_at_each_tile_loop(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    cached = sch.cache_read(c, 1)
    loops = tile_ssrsrs(sch, "C", [None, 4, 2], [None, 4, 8], [None, 8])
    sch.compute_at(cached, loops[level])
    assert_computes(wl, sch)


def test_cache_read_without_moving_it():
    wl = matmul()
    sch = wl.schedule()
    sch.cache_read(sch.get_block("C"), 1)
    assert block_names(sch) == ["B_global", "C"]
    assert_computes(wl, sch)


@pytest.mark.parametrize(("index", "match"), [(2, "out of range"), (-1, "out of range")])
def test_cache_read_of_a_bad_index_is_refused(index, match):
    sch = matmul().schedule()
    with schedule_error("C", match=match):
        sch.cache_read(sch.get_block("C"), index)


def test_cache_read_names_are_unique():
    sch = matmul().schedule()
    c = sch.get_block("C")
    first = sch.cache_read(c, 0)
    second = sch.cache_read(c, 0)  # now caches A_global
    assert (first.name, second.name) == ("A_global", "A_global_global")
    assert reads_of(sch, "C") == ["C", "A_global_global", "B"]


@pytest.mark.parametrize("level", [1, 2])
def test_cache_write_then_reverse_compute_at_tile_level(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    write_back = sch.cache_write(c, 0)
    _, j0, _, j1, k0, *_ = tile_ssrsrs(sch, "C", [None, 4, 2], [2, None, 8], [None, 8])
    sch.reverse_compute_at(write_back, [j0, j1][level - 1])
    sch.decompose_reduction(c, k0)
    assert_computes(wl, sch)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [1, 2])
def test_cache_write_with_sampled_perfect_tiles(seed, level):
    wl = matmul(96, 128, 64)
    sch = wl.schedule(seed)
    c = sch.get_block("C")
    write_back = sch.cache_write(c, 0)
    i, j, k = sch.get_loops(c)
    tiles = [sch.sample_perfect_tile(lp, n=n) for lp, n in ((i, 3), (j, 3), (k, 2))]
    loops = tile_ssrsrs(sch, "C", *tiles)
    sch.reverse_compute_at(write_back, loops[2 * level - 1])
    sch.decompose_reduction(c, loops[4])
    sch.vectorize(loops[-1])
    assert_computes(wl, sch)


def test_cache_write_of_an_intermediate_feeding_relu():
    wl = mm_relu()
    sch = wl.schedule()
    y = sch.get_block("Y")
    write_back = sch.cache_write(y, 0)
    assert block_names(sch) == ["Y", write_back.name, "C"]
    i, j, _ = sch.get_loops(y)
    sch.reverse_compute_at(write_back, j)
    sch.reverse_compute_at(sch.get_block("C"), i)
    assert_computes(wl, sch)


def test_cache_write_of_an_elementwise_output():
    wl = mm_relu()
    sch = wl.schedule()
    c = sch.get_block("C")
    write_back = sch.cache_write(c, 0)
    ci, _ = sch.get_loops(c)
    sch.reverse_compute_at(write_back, ci)
    assert_computes(wl, sch)


def test_cache_write_of_a_bad_index_is_refused():
    sch = matmul().schedule()
    with schedule_error("C", match="index 1"):
        sch.cache_write(sch.get_block("C"), 1)


def test_cache_write_after_a_consumer_joined_the_nest_is_refused():
    sch = mm_relu().schedule()
    i, _, _ = loops_of(sch, "Y")
    sch.reverse_compute_at(sch.get_block("C"), i)
    with schedule_error("Y", "C", match="share its loop nest"):
        sch.cache_write(sch.get_block("Y"), 0)


def test_cache_read_of_a_buffer_produced_in_the_same_nest_is_refused():
    sch = conv2d().schedule()
    sch.compute_at(sch.get_block("pad"), loops_of(sch, "conv")[2])
    with schedule_error("conv", "pad", match="share its loop nest"):
        sch.cache_read(sch.get_block("conv"), 0)


def test_cache_read_of_an_input_used_by_a_block_in_a_shared_nest():
    wl = conv2d()
    sch = wl.schedule()
    sch.compute_at(sch.get_block("pad"), loops_of(sch, "conv")[2])
    weights = sch.cache_read(sch.get_block("conv"), 1)  # W is read by conv only
    sch.compute_at(weights, loops_of(sch, "conv")[1])
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_cache_read_of_the_conv_input_at_padding_loops(level):
    wl = conv2d()
    sch = wl.schedule()
    pad = sch.get_block("pad")
    cached = sch.cache_read(pad, 0)
    sch.compute_at(cached, sch.get_loops(pad)[level])
    assert_computes(wl, sch)


def test_cache_read_and_write_around_a_tiled_matmul():
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    a_cache = sch.cache_read(c, 0)
    b_cache = sch.cache_read(c, 1)
    write_back = sch.cache_write(c, 0)
    *_, j1, k0, _, _, _ = tile_ssrsrs(sch, "C", [None, 2, 4], [None, 2, 16], [None, 4])
    sch.compute_at(a_cache, k0)
    sch.compute_at(b_cache, k0)
    sch.reverse_compute_at(write_back, j1)
    sch.decompose_reduction(c, k0)
    assert_computes(wl, sch)
