"""build(): LLVM code from the IR, called on numpy arrays without copies, with clear argument errors."""

import numpy as np
import pytest

from compiler import Schedule, Target, build, te
from compiler.ir import Binary, BufferStore, Const, For, PrimFunc, Var
from compiler.lower import LoweringError, lower, verify_lowered
from compiler.ops import Op


def axpy(n=1000, dtype="float32"):
    X = te.placeholder((n,), dtype, name="X")
    Y = te.placeholder((n,), dtype, name="Y")
    Z = te.compute((n,), lambda i: X[i] * 2.0 + Y[i], name="Z")
    return te.create_prim_func([X, Y, Z], name="axpy")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_writes_output_in_place(dtype):
    x = np.arange(1000, dtype=dtype)
    y = np.ones(1000, dtype=dtype)
    z = np.zeros(1000, dtype=dtype)
    build(axpy(dtype=dtype))(x, y, z)
    np.testing.assert_array_equal(z, 2 * x + 1)


def test_wrong_arguments_are_refused_clearly():
    kernel = build(axpy(n=8))
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="takes 3 arrays"):
        kernel(x, x)
    with pytest.raises(TypeError, match=r"Y: expected dtype float32, got float64"):
        kernel(x, np.zeros(8), x)
    with pytest.raises(ValueError, match=r"Z: expected shape \(8,\), got \(9,\)"):
        kernel(x, x, np.zeros(9, np.float32))
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):
        kernel(x, [0.0] * 8, x)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel(x, np.zeros(16, np.float32)[::2], x)


def test_the_native_entry_checks_each_argument_and_leaves_refusals_to_python():
    """Arrays are checked in native code (compiler.numpy_entry); any other argument is refused
    there by its index, and the Python path then names the problem or accepts a subclass."""
    kernel = build(axpy(n=8))
    entry = kernel._numpy
    assert entry is not None  # this interpreter's numpy has the layout the entry reads
    x = np.arange(8, dtype=np.float32)
    refused = [
        np.zeros(8),
        np.zeros(9, np.float32),
        np.zeros((8, 1), np.float32),
        np.zeros(16, np.float32)[::2],
        np.zeros(8, ">f4"),
        [0.0] * 8,
        3,
        x.view(type("Sub", (np.ndarray,), {})),
    ]
    for k in range(3):
        for bad in refused:
            args = [x, x, np.empty(8, np.float32)]
            args[k] = bad
            assert entry(*map(id, args)) == k + 1, (k, bad)
    z = np.zeros(8, np.float32)
    assert entry(id(x), id(x), id(z)) == 0
    np.testing.assert_array_equal(z, 3 * x)
    sub = np.zeros(8, np.float32).view(type("Sub", (np.ndarray,), {}))
    kernel(x, x, sub)
    np.testing.assert_array_equal(np.asarray(sub), 3 * x)
    with pytest.raises(TypeError, match=r"Y: expected dtype float32, got >f4"):
        kernel(x, np.zeros(8, ">f4"), z)


def test_integer_floor_division_matches_python_on_negative_values():
    A = te.placeholder((11,), "int64", name="A")
    out = te.compute((11,), lambda i: (A[i] // 3) * 10 + A[i] % 3, name="out")
    a = np.arange(-5, 6, dtype=np.int64)
    o = np.zeros(11, np.int64)
    build(te.create_prim_func([A, out]))(a, o)
    np.testing.assert_array_equal(o, (a // 3) * 10 + a % 3)


def test_vectorized_loop_becomes_vector_instructions():
    sch = Schedule(axpy(n=1024), seed=0)
    (i,) = sch.get_loops(sch.get_block("Z"))
    _, inner = sch.split(i, [None, 64])
    sch.vectorize(inner)
    asm = build(sch.func).assembly()
    register = {512: "zmm", 256: "ymm", 128: "xmm"}[Target.host().vector_bits]
    assert f"%{register}" in asm
    assert "fmadd" in asm or "vfmadd" in asm or "vmul" in asm


def test_host_target_has_features_and_stable_key():
    t = Target.host()
    assert t.mcpu and "+" in t.features and t.cores >= 1
    assert t.key == Target.host().key


def test_verifier_catches_unbound_variables():
    buf = te.placeholder((4,), name="A").buffer
    body = For(Var("i"), 4, BufferStore(buf, Const(0.0, "float32"), (Binary(Op.ADD, Var("i"), Var("j")),)))
    with pytest.raises(LoweringError, match="unbound"):
        verify_lowered(PrimFunc("f", (buf,), body))


def test_lowering_removes_blocks_and_guards_inits():
    A = te.placeholder((6, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    S = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="S")
    lowered = lower(te.create_prim_func([A, S]))
    assert "T.block" not in lowered.script()
    assert "if k == 0:" in lowered.script()


def test_parallel_loops_nested_sequential_and_inside_serial_loops_are_correct():
    A = te.placeholder((37, 53), name="A")
    B = te.compute((37, 53), lambda i, j: A[i, j] * 3.0, name="B")
    C = te.compute((37, 53), lambda i, j: B[i, j] + A[i, j], name="C")
    sch = Schedule(te.create_prim_func([A, C]), seed=0)
    bi, bj = sch.get_loops(sch.get_block("B"))
    sch.parallel(bi)
    sch.parallel(bj)  # nested region: libgomp runs it on a team of one thread
    _, cj = sch.get_loops(sch.get_block("C"))
    _, cj1 = sch.split(cj, [None, 7])
    sch.parallel(cj1)  # a region inside serial loops: captures the serial loop variables
    a = np.random.default_rng(0).standard_normal((37, 53), dtype=np.float32)
    c = np.full((37, 53), np.nan, np.float32)
    build(sch.func)(a, c)
    np.testing.assert_allclose(c, 4 * a, rtol=1e-6)


def test_a_parallel_loop_of_one_iteration_runs_without_forking_a_team():
    A = te.placeholder((1, 67), name="A")
    B = te.compute((1, 67), lambda i, j: A[i, j] * 2.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]), seed=0)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    kernel = build(sch.func)
    assert "GOMP_parallel" not in kernel.optimized_ir()
    a = np.random.default_rng(2).standard_normal((1, 67), dtype=np.float32)
    b = np.zeros((1, 67), np.float32)
    kernel(a, b)
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)


def test_parallel_reduction_over_spatial_rows():
    A = te.placeholder((101, 67), name="A")
    k = te.reduce_axis((0, 67), name="k")
    S = te.compute((101,), lambda i: te.sum(A[i, k], axis=k), name="S")
    sch = Schedule(te.create_prim_func([A, S]), seed=0)
    i, _ = sch.get_loops(sch.get_block("S"))
    sch.parallel(i)
    kernel = build(sch.func)
    assert "GOMP_parallel" in kernel.optimized_ir()
    a = np.random.default_rng(1).standard_normal((101, 67), dtype=np.float32)
    s = np.zeros(101, np.float32)
    kernel(a, s)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-4, atol=1e-4)
