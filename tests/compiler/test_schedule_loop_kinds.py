"""parallel, vectorize and unroll, and annotate: legal loops still compute what numpy computes; loops
whose iterations would race or reorder a reduction or recurrence are refused."""

import numpy as np
import pytest
from helpers import (
    ProgramCase,
    assert_computes,
    chain,
    loop_kinds,
    loops_of,
    matmul,
    mm_relu,
    scan_pipeline,
    schedule_error,
    softmax,
)

from compiler import te


def broadcast(n: int = 29, m: int = 43) -> ProgramCase:
    """B[j] = 2 * A[j] feeds every row of C[i, j] = B[j] + X[i, j]."""
    A = te.placeholder((m,), name="A")
    X = te.placeholder((n, m), name="X")
    B = te.compute((m,), lambda j: A[j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[j] + X[i, j], name="C")
    return ProgramCase(te.create_prim_func([A, X, C]), lambda a, x: (2 * a[None, :] + x,), 2)


KINDS = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


@pytest.mark.parametrize("primitive", ["parallel", "vectorize"])
def test_reduction_loop_is_refused(primitive):
    sch = matmul().schedule()
    _, _, k = loops_of(sch, "C")
    with schedule_error("k", "C", match="reduction"):
        getattr(sch, primitive)(k)
    assert loop_kinds(sch, [k]) == ["serial"]


@pytest.mark.parametrize("primitive", ["parallel", "vectorize"])
def test_fused_spatial_and_reduction_loop_is_refused(primitive):
    sch = matmul().schedule()
    _, j, k = loops_of(sch, "C")
    fused = sch.fuse(j, k)
    with schedule_error(fused.name, "C", match="reduction"):
        getattr(sch, primitive)(fused)


def test_vectorizing_a_loop_a_block_does_not_depend_on_is_refused():
    sch = broadcast().schedule()
    i, _ = loops_of(sch, "C")
    sch.compute_at(sch.get_block("B"), i)  # B recomputes all of B[:] in every row
    with schedule_error("i", "B", match="does not depend"):
        sch.vectorize(i)


def test_parallel_loop_a_private_intermediate_does_not_depend_on():
    wl = broadcast()
    sch = wl.schedule()
    i, _ = loops_of(sch, "C")
    sch.compute_at(sch.get_block("B"), i)  # each thread recomputes B into its own copy
    sch.parallel(i)
    assert_computes(wl, sch)


@pytest.mark.parametrize("primitive", ["parallel", "vectorize"])
def test_scan_recurrence_loop_is_refused(primitive):
    sch = scan_pipeline().schedule()
    t, _ = loops_of(sch, "scan")
    with schedule_error(t.name, "scan", match="recurrence"):
        getattr(sch, primitive)(t)


@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "unroll"])
def test_inner_spatial_loop_of_a_scan_step(primitive):
    wl = scan_pipeline()
    sch = wl.schedule()
    _, i = loops_of(sch, "scan")
    getattr(sch, primitive)(i)
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [0, 1], ids=["i", "j"])
def test_parallel_spatial_loops_of_matmul(level):
    wl = matmul()
    sch = wl.schedule()
    loop = loops_of(sch, "C")[level]
    sch.parallel(loop)
    assert loop_kinds(sch, [loop]) == ["parallel"]
    assert "T.parallel(" in sch.func.script()
    assert_computes(wl, sch)


def test_parallel_fused_spatial_loops():
    wl = matmul()
    sch = wl.schedule()
    i, j, _ = loops_of(sch, "C")
    fused = sch.fuse(i, j)
    sch.parallel(fused)
    assert_computes(wl, sch)


def test_parallel_loop_over_a_producer_and_its_consumer():
    wl = mm_relu()
    sch = wl.schedule()
    i = loops_of(sch, "Y")[0]
    sch.reverse_compute_at(sch.get_block("C"), i)
    sch.parallel(i)
    assert_computes(wl, sch)


def test_parallel_loop_with_a_producer_computed_inside():
    wl = chain((37, 53))
    sch = wl.schedule()
    i, j = loops_of(sch, "C")
    sch.compute_at(sch.get_block("B"), j)
    sch.parallel(i)
    assert_computes(wl, sch)


@pytest.mark.parametrize("factor", [16, 8, 5], ids=["16", "8", "5"])
def test_vectorize_inner_split_loop_with_and_without_guard(factor):
    wl = matmul()
    sch = wl.schedule()
    _, j, k = loops_of(sch, "C")
    j0, j1 = sch.split(j, [None, factor])  # 127 is prime: every factor leaves a guard
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    assert loop_kinds(sch, [j1]) == ["vectorized"]
    assert_computes(wl, sch)


def test_vectorize_elementwise_vector():
    wl = chain((1000,), stages=3)
    sch = wl.schedule()
    for name in "BCD":
        (i,) = loops_of(sch, name)
        _, inner = sch.split(i, [None, 16])
        sch.vectorize(inner)
    assert_computes(wl, sch)


def test_vectorize_softmax_rows():
    wl = softmax()
    sch = wl.schedule()
    for name in ("E", "Y"):
        _, j = loops_of(sch, name)
        sch.vectorize(j)
    assert_computes(wl, sch)


def test_vectorize_a_loop_above_the_reduction():
    wl = matmul()
    sch = wl.schedule()
    _, j, _ = loops_of(sch, "C")
    _, j1 = sch.split(j, [None, 4])
    sch.vectorize(j1)  # the block is spatial in j1; the reduction loop k runs inside it
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [0, 1, 2], ids=["i", "j", "k"])
def test_unroll_any_loop_including_the_reduction(level):
    wl = matmul(31, 37, 13)
    sch = wl.schedule()
    loop = loops_of(sch, "C")[level]
    sch.unroll(loop)
    assert loop_kinds(sch, [loop]) == ["unrolled"]
    assert_computes(wl, sch)


def test_all_kinds_together_on_the_mlc_schedule():
    wl = mm_relu()
    sch = wl.schedule()
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(j0, k0, k1, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(y, k0)
    sch.parallel(i)
    sch.unroll(k1)
    sch.vectorize(j1)
    kinds = [inst.kind for inst in sch.trace.instructions[-3:]]
    assert kinds == ["parallel", "unroll", "vectorize"]
    assert loop_kinds(sch, [i, k0, k1, j1]) == ["parallel", "serial", "unrolled", "vectorized"]
    assert_computes(wl, sch)


def test_loop_kind_of_a_dead_handle_is_refused():
    sch = matmul().schedule()
    i, _, _ = loops_of(sch, "C")
    sch.split(i, [None, 2])
    with schedule_error("i", match="does not exist"):
        sch.parallel(i)


def test_annotate_loop_block_and_root_are_printed_and_recorded():
    wl = matmul(31, 37, 13)
    sch = wl.schedule()
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.annotate(i, "pragma_unroll", 16)
    sch.annotate(i, "pragma_unroll", 64)  # a key set twice keeps the last value
    sch.annotate(block, "tile", "SSRSRS")
    sch.annotate(sch.get_block("root"), "target", "llvm")
    script = sch.func.script()
    assert "annotations={'pragma_unroll': 64}" in script
    assert "T.block_attr({'tile': 'SSRSRS'})" in script
    assert "T.func_attr({'target': 'llvm'})" in script
    annotations = [inst.args for inst in sch.trace.instructions if inst.kind == "annotate"]
    assert [(a["key"], a["value"]) for a in annotations] == [
        ("pragma_unroll", 16),
        ("pragma_unroll", 64),
        ("tile", "SSRSRS"),
        ("target", "llvm"),
    ]
    assert_computes(wl, sch)


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, None, np.float32(1.0)], ids=str)
def test_annotate_refuses_values_that_are_not_json_scalars(value):
    sch = matmul(31, 37, 13).schedule()
    i, _, _ = loops_of(sch, "C")
    with schedule_error("i", "pragma"):
        sch.annotate(i, "pragma", value)
