"""Vectorized loops emitted as explicit vector code compute exactly what the serial loop computes."""

import re

import numpy as np
import pytest

from compiler import Schedule, Target, build, te
from compiler.build import compile_kernel
from compiler.codegen_vector import can_vectorize, row_loads, vector_pieces
from compiler.lower import lower
from compiler.visit import walk_stmt


def _vectorized_loops(func):
    return [s for s in walk_stmt(lower(func).body) if getattr(s, "kind", None) == "vectorized"]


def _elementwise(n, m, fcompute):
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((m, n), name="B")
    C = te.compute((n, m), lambda i, j: fcompute(A, B, i, j), name="C")
    return te.create_prim_func([A, B, C])


CASES = {
    "contiguous": lambda A, B, i, j: A[i, j] * 2.0 + 1.0,
    "strided_gather": lambda A, B, i, j: A[i, j] + B[j, i],
    "invariant_broadcast": lambda A, B, i, j: A[i, j] * A[i, 0],
    "select_math": lambda A, B, i, j: te.select(A[i, j] > 0.0, te.sqrt(A[i, j]), te.exp(A[i, j])),
    "index_arith": lambda A, B, i, j: A[i, j] + te.cast("float32", j),
    "tanh_per_lane": lambda A, B, i, j: te.tanh(A[i, j]) + te.max(A[i, j], B[j, i]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("m", [7, 14, 24, 28, 64, 97, 200])
def test_vectorized_elementwise_matches_numpy(case, m):
    n = 5
    func = _elementwise(n, m, CASES[case])
    sch = Schedule(func)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.vectorize(j)
    assert all(can_vectorize(loop) for loop in _vectorized_loops(sch.func))
    rng = np.random.default_rng(m)
    a = rng.standard_normal((n, m), dtype=np.float32)
    b = rng.standard_normal((m, n), dtype=np.float32)
    expect, got = np.empty((n, m), np.float32), np.full((n, m), np.nan, np.float32)
    build(func)(a, b, expect)
    build(sch.func)(a, b, got)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("m", "pieces"), [(24, {16, 8}), (97, {64, 32, 1}), (200, {64, 8})])
def test_vector_loops_are_emitted_in_power_of_two_pieces(m, pieces):
    """LLVM widens an odd vector such as <24 x float> with masked lanes, 5-10x slower than 16 + 8."""
    sch = Schedule(_elementwise(5, m, CASES["contiguous"]))
    sch.vectorize(sch.get_loops(sch.get_block("C"))[1])
    ir = build(sch.func, listings=False).compiled.llvm_ir
    widths = {int(w) for w in re.findall(r"<(\d+) x float>", ir)}
    assert widths == pieces


@pytest.mark.parametrize(
    ("extent", "register", "pieces"),
    [
        (7, 8, [7]),
        (14, 16, [14]),
        (16, 16, [16]),
        (28, 16, [16, 12]),
        (28, 8, [16, 8, 4]),
        (56, 16, [32, 16, 8]),
        (97, 16, [64, 32, 1]),
        (200, 16, [64, 64, 64, 8]),
        (118, 8, [64, 32, 16, 6]),
    ],
)
def test_vector_pieces_are_power_of_two_chunks_then_a_remainder_one_register_wide(extent, register, pieces):
    """What the default schedule counts registers by (`_registers`) is what the code generator emits."""
    assert vector_pieces(extent, register) == pieces


@pytest.mark.parametrize(
    ("extent", "register", "masked", "loads"),
    [
        (14, 16, True, 1),
        (14, 8, False, 1 + 3),
        (7, 8, False, 5),
        (7, 8, True, 1),
        (28, 16, True, 2),
        (16, 8, False, 2),
    ],
)
def test_row_loads_count_a_split_odd_piece_as_its_loads_and_inserts(extent, register, masked, loads):
    assert row_loads(extent, register, masked) == loads


AVX512 = Target(Target.host().triple, "x86-64-v4", "+avx2,+fma,+avx512f", 2)
AVX2 = Target(Target.host().triple, "x86-64-v3", "+avx2,+fma,-avx512f", 2)


@pytest.mark.parametrize(
    ("target", "m", "pieces"),
    [
        (AVX512, 7, {7, 8}),
        (AVX512, 14, {14, 16}),
        (AVX512, 28, {16, 12}),
        (AVX2, 7, {7}),
        (AVX2, 28, {16, 8, 4}),
    ],
    ids=["avx512-7", "avx512-14", "avx512-28", "avx2-7", "avx2-28"],
)
def test_a_remainder_narrower_than_a_register_is_one_vector(target, m, pieces):
    """A 7x7 conv's rows as 4 + 2 + 1 lanes took three narrow FMAs where one 8-lane FMA does. (Its
    loads are one masked load of the next power of two: the second width in `pieces`.)"""
    if "x86" not in target.triple:
        pytest.skip("x86 targets")
    sch = Schedule(_elementwise(5, m, CASES["contiguous"]))
    sch.vectorize(sch.get_loops(sch.get_block("C"))[1])
    ir = compile_kernel(sch.func, target).llvm_ir
    assert {int(w) for w in re.findall(r"<(\d+) x float>", ir)} == pieces


@pytest.mark.parametrize("m", [3, 7, 14])
def test_an_odd_row_is_loaded_by_one_masked_load_with_avx512(m):
    """LLVM split a plain 14-lane load into loads of 8, 4 and 2 and two inserts, in a 14x14 conv's
    innermost loop; the masked load stops at the row's last element, the buffer's last row too."""
    target = AVX512
    if "x86" not in target.triple:
        pytest.skip("x86 targets")
    sch = Schedule(_elementwise(5, m, CASES["contiguous"]))
    sch.vectorize(sch.get_loops(sch.get_block("C"))[1])
    compiled = compile_kernel(sch.func, target, listings=True)
    assert "llvm.masked.load" in compiled.llvm_ir
    assert "vinsert" not in compiled.assembly
    if target.vector_bits > Target.host().vector_bits:
        return
    rng = np.random.default_rng(m)
    a, b = rng.standard_normal((5, m), dtype=np.float32), rng.standard_normal((m, 5), dtype=np.float32)
    got = np.full((5, m), np.nan, np.float32)
    build(sch.func, target=target)(a, b, got)
    np.testing.assert_allclose(got, a * 2.0 + 1.0, rtol=1e-6)


@pytest.mark.parametrize(("width", "tile"), [(7, 49), (14, 28), (56, 16), (28, 16)])
def test_fused_rows_split_across_row_ends_are_loaded_as_one_contiguous_run(width, tile):
    """C[c, y, x] with y and x fused and the fused loop split by `tile` (not a multiple of the row):
    each lane's y * width + x is the fused index again, so the lanes are one contiguous run, not a
    gather (a 1x1 conv's rows of 7 fill 49 lanes of 64 so, 7 of 16 unfused)."""
    A = te.placeholder((3, width, width), name="A")
    C = te.compute((3, width, width), lambda c, y, x: A[c, y, x] * 2.0 + 1.0, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    _, y, x = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(sch.fuse(y, x), [None, tile])
    sch.vectorize(inner)
    assert all(can_vectorize(loop) for loop in _vectorized_loops(sch.func))
    kernel = build(sch.func)
    ir = kernel.compiled.llvm_ir
    assert re.search(r"load <\d+ x float>", ir) and not re.search(r"load float,", ir)  # no lane alone
    a = np.random.default_rng(width).standard_normal((3, width, width), dtype=np.float32)
    got = np.full_like(a, np.nan)
    kernel(a, got)
    np.testing.assert_allclose(got, a * 2.0 + 1.0, rtol=1e-6)


def test_reduction_vectorized_over_spatial_axis_uses_wide_registers():
    n = 128
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    Y = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    sch = Schedule(te.create_prim_func([A, B, Y]))
    y = sch.get_block("Y")
    _, j, kk = sch.get_loops(y)
    j0, j1 = sch.split(j, [None, 64])
    sch.reorder(j0, kk, j1)
    sch.decompose_reduction(y, kk)
    sch.vectorize(j1)
    assert all(can_vectorize(loop) for loop in _vectorized_loops(sch.func))
    kernel = build(sch.func)
    if Target.host().vector_bits == 512:
        assert "vfmadd" in kernel.assembly() and "%zmm" in kernel.assembly()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    y_out = np.zeros((n, n), np.float32)
    kernel(a, b, y_out)
    np.testing.assert_allclose(y_out, a @ b, rtol=1e-4, atol=1e-4)


def test_guarded_vector_loop_falls_back_to_scalar_and_stays_correct():
    func = _elementwise(3, 50, CASES["contiguous"])
    sch = Schedule(func)
    _, j = sch.get_loops(sch.get_block("C"))
    _, j1 = sch.split(j, [None, 16])  # 50 = 4 * 16 - 14: the inner loop carries a guard
    sch.vectorize(j1)
    assert not any(can_vectorize(loop) for loop in _vectorized_loops(sch.func))
    a = np.random.default_rng(3).standard_normal((3, 50), dtype=np.float32)
    out = np.full((3, 50), np.nan, np.float32)
    build(sch.func)(a, np.zeros((50, 3), np.float32), out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def test_self_dependent_store_is_not_vectorized():
    X = te.placeholder((10, 32), name="X")
    s_state = te.placeholder((10, 32))
    s_init = te.compute((1, 32), lambda _, i: X[0, i])
    s_update = te.compute((10, 32), lambda t, i: s_state[t - 1, i] + X[t, i])
    res = te.scan(s_init, s_update, s_state)
    func = te.create_prim_func([X, res])
    sch = Schedule(func)
    _, i = sch.get_loops(sch.get_block("scan"))
    sch.vectorize(i)
    x = np.random.default_rng(4).standard_normal((10, 32), dtype=np.float32)
    out = np.zeros((10, 32), np.float32)
    build(sch.func)(x, out)
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)
