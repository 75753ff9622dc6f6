"""fuse and reorder, alone and combined with split (the MLC course's sequence among them), and the
loop sets they refuse."""

import itertools

import numpy as np
import pytest
from helpers import (
    ProgramCase,
    assert_computes,
    chain,
    extents,
    is_guarded,
    loops_of,
    matmul,
    mm_relu,
    scan_pipeline,
    schedule_error,
)

from compiler import te


def test_fuse_two_loops():
    wl = chain((37, 53))
    sch = wl.schedule()
    i, j = loops_of(sch, "B")
    fused = sch.fuse(i, j)
    assert extents(sch, loops_of(sch, "B")) == [37 * 53]
    assert extents(sch, [fused]) == [1961]
    assert_computes(wl, sch)


def test_fuse_then_non_divisible_split():
    wl = chain((37, 53))
    sch = wl.schedule()
    fused = sch.fuse(*loops_of(sch, "B"))
    outer, inner = sch.split(fused, [None, 16])  # 1961 = 122 * 16 + 9
    assert extents(sch, [outer, inner]) == [123, 16]
    assert is_guarded(sch, "B")
    assert_computes(wl, sch)


def test_split_then_fuse_back_keeps_the_guard():
    wl = chain((37, 53))
    sch = wl.schedule()
    i, j = loops_of(sch, "B")
    j0, j1 = sch.split(j, [None, 8])  # 7 * 8 = 56 > 53
    fused = sch.fuse(j0, j1)
    assert extents(sch, [fused]) == [56]
    assert is_guarded(sch, "B")
    everything = sch.fuse(i, fused)
    assert extents(sch, [everything]) == [37 * 56]
    assert_computes(wl, sch)


@pytest.mark.parametrize("which", [(0, 1), (1, 2), (0, 1, 2)], ids=["i_j", "j_k", "i_j_k"])
def test_fuse_matmul_loops_including_the_reduction(which):
    wl = matmul()
    sch = wl.schedule()
    loops = loops_of(sch, "C")
    sch.fuse(*[loops[w] for w in which])
    assert_computes(wl, sch)


def test_fuse_split_reorder_around_the_reduction():
    wl = matmul()
    sch = wl.schedule()
    i, j, k = loops_of(sch, "C")
    f0, f1 = sch.split(sch.fuse(i, j), [None, 64])  # 97 * 127 = 12319 = 192 * 64 + 31
    sch.reorder(f0, k, f1)
    assert_computes(wl, sch)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=str)
def test_reorder_every_permutation_of_matmul(order):
    wl = matmul()
    sch = wl.schedule()
    loops = loops_of(sch, "C")
    sch.reorder(*[loops[o] for o in order])
    assert [lp.name for lp in loops_of(sch, "C")] == [loops[o].name for o in order]
    assert_computes(wl, sch)


def test_reorder_split_loops_into_tiles():
    wl = matmul()
    sch = wl.schedule()
    i, j, k = loops_of(sch, "C")
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    assert [lp.name for lp in loops_of(sch, "C")] == [lp.name for lp in (i0, j0, k0, i1, k1, j1)]
    assert_computes(wl, sch)


def test_reorder_of_a_subset_keeps_the_other_loops_in_place():
    wl = matmul()
    sch = wl.schedule()
    i, j, k = loops_of(sch, "C")
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j1, i)  # positions of i and j1 are swapped; j0 and k stay
    assert [lp.name for lp in loops_of(sch, "C")] == [lp.name for lp in (j1, j0, i, k)]
    assert_computes(wl, sch)


@pytest.mark.parametrize("shape", [(128, 128, 128), (97, 127, 61)], ids=["divisible", "odd"])
def test_mlc_sequence_split_reorder_reverse_compute_at_decompose(shape):
    wl = mm_relu(*shape)
    sch = wl.schedule()
    block_y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    init = sch.decompose_reduction(block_y, k)
    assert [lp.name for lp in sch.get_loops(block_y)] == [i.name, j0.name, k.name, j1.name]
    assert [lp.name for lp in sch.get_loops(sch.get_block("C"))][:2] == [i.name, j0.name]
    assert [lp.name for lp in sch.get_loops(init)][:2] == [i.name, j0.name]
    order = [line.strip() for line in sch.func.script().splitlines() if "T.block(" in line]
    assert order == ['with T.block("Y_init"):', 'with T.block("Y_update"):', 'with T.block("C"):']
    assert_computes(wl, sch)


def test_reorder_with_a_loop_of_another_nest_is_refused():
    sch = mm_relu().schedule()
    i, _, k = loops_of(sch, "Y")
    _, cj = loops_of(sch, "C")
    with schedule_error(cj.name, match="not in the nest"):
        sch.reorder(i, cj, k)


def test_reorder_with_a_repeated_loop_is_refused():
    sch = matmul().schedule()
    i, j, _ = loops_of(sch, "C")
    with schedule_error("i", match="twice"):
        sch.reorder(j, i, i)


def test_reorder_across_a_loop_with_two_children_is_refused():
    sch = mm_relu().schedule()
    i, _, k = loops_of(sch, "Y")
    sch.reverse_compute_at(sch.get_block("C"), i)
    with schedule_error("i", match="more than one child"):
        sch.reorder(k, i)


def test_reorder_of_a_scan_recurrence_loop_is_refused():
    sch = scan_pipeline().schedule()
    t, i = loops_of(sch, "scan")
    with schedule_error(t.name, "scan", match="recurrence"):
        sch.reorder(i, t)


def test_reorder_inside_a_scan_step_is_allowed():
    m, n, p = 6, 5, 7
    X = te.placeholder((m, n, p), name="X")
    state = te.placeholder((m, n, p), name="state")
    init = te.compute((1, n, p), lambda _, i, j: X[0, i, j], name="init")
    update = te.compute((m, n, p), lambda t, i, j: state[t - 1, i, j] + X[t, i, j], name="update")
    func = te.create_prim_func([X, te.scan(init, update, state, name="scan")])
    wl = ProgramCase(func, lambda x: (x.astype(np.float64).cumsum(axis=0),), 1)
    sch = wl.schedule()
    _, i, j = loops_of(sch, "scan")
    sch.reorder(j, i)
    assert_computes(wl, sch)


@pytest.mark.parametrize(
    ("pick", "match"),
    [
        (lambda i, j, k: (i, k), "directly nested"),
        (lambda i, j, k: (j, i), "directly nested"),
        (lambda i, j, k: (i,), "at least 2"),
    ],
    ids=["not_adjacent", "inner_first", "single"],
)
def test_fuse_refuses_loops_that_are_not_a_nested_run(pick, match):
    sch = matmul().schedule()
    loops = pick(*loops_of(sch, "C"))
    with schedule_error(*[lp.name for lp in loops], match=match):
        sch.fuse(*loops)


def test_fuse_of_loops_from_two_nests_is_refused():
    sch = mm_relu().schedule()
    i = loops_of(sch, "Y")[0]
    cj = loops_of(sch, "C")[1]
    with schedule_error("i", cj.name):
        sch.fuse(i, cj)


def test_fuse_across_a_loop_with_two_children_is_refused():
    sch = mm_relu().schedule()
    i, j, _ = loops_of(sch, "Y")
    sch.reverse_compute_at(sch.get_block("C"), i)
    with schedule_error("i", match="more than one child"):
        sch.fuse(i, j)
