"""tensorize: a uint8 x int8 matmul computed by AVX-512 VNNI's vpdpbusd gives numpy's int32 result
exactly, a float32 one by the hand-written FMA micro-kernel numpy's; a nest that is not what the
intrinsic describes is refused at the primitive, a layout it cannot take or a CPU without the
instruction at the build, never with wrong numbers; a user's intrinsic registers and runs; the
annotation reads back from TVMScript and the trace replays."""

from dataclasses import replace

import llvmlite.ir as ll
import numpy as np
import pytest
from helpers import fma_tiles, int8_gemm, matmul

from compiler import Schedule, ScheduleError, Trace, build, te
from compiler.ir import structural_equal
from compiler.script import from_source
from compiler.target import Target
from compiler.tensor_intrin import IntrinsicError, TensorIntrin

needs_vnni = pytest.mark.skipif(
    "avx512vnni" not in Target.host().feature_set, reason="this CPU has no AVX-512 VNNI"
)


def vnni_target() -> Target:
    """The host, or where it has no VNNI a Zen 4's features to compile for: the builds that use it
    fail, as they must, before any code runs."""
    host = Target.host()
    if "avx512vnni" in host.feature_set:
        return host
    zen4 = "+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vnni"
    return replace(host, mcpu="znver4", features=zen4)


def vnni_schedule(func, rows: int = 2, tiles: int = 2, pack: bool = True) -> Schedule:
    """The int8 GEMM of the VNNI intrinsic: a 16 x 4 weight panel packed per column tile, `rows` x
    `tiles` x 16 int32 accumulators, each step of four reduction iterations one vpdpbusd."""
    sch = Schedule(func, seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, rows])
    jo, jj, ji = sch.split(j, [None, tiles, 16])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(jo, io, ko, ii, jj, ji, ki)
    panel = sch.cache_read(c, 1)
    sch.compute_at(panel, jo)
    if pack:
        sch.transform_layout(panel, ("write", 0), lambda k, j: (j // 16, k // 4, j % 16, k % 4))
    acc = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(acc, io)
    sch.decompose_reduction(c, ko)
    sch.tensorize(ji, "dot_16x4_vnni")
    sch.unroll(ii)
    sch.unroll(jj)
    sch.parallel(jo)
    return sch


def run_int8(func, m: int, n: int, k: int, target=None) -> tuple[np.ndarray, np.ndarray, object]:
    rng = np.random.default_rng(m * n + k)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    b = rng.integers(-128, 128, (k, n)).astype("int8")
    out = np.full((m, n), -1, "int32")
    kernel = build(func, target)
    kernel(a, b, out)
    return out, a.astype(np.int32) @ b.astype(np.int32), kernel


@needs_vnni
@pytest.mark.parametrize(
    ("m", "n", "k", "rows", "tiles"), [(7, 48, 20, 7, 3), (12, 64, 36, 4, 2), (1, 32, 4, 1, 1)]
)
def test_a_vnni_tensorized_int8_matmul_gives_numpys_int32_result_exactly(m, n, k, rows, tiles):
    sch = vnni_schedule(int8_gemm(m, n, k), rows, tiles)
    out, want, kernel = run_int8(sch.func, m, n, k)
    np.testing.assert_array_equal(out, want)
    assert "vpdpbusd" in kernel.assembly()


@needs_vnni
def test_the_tensorized_program_reads_back_from_its_script_and_its_trace_replays():
    sch = vnni_schedule(int8_gemm(8, 32, 16))
    text = sch.func.script()
    assert "annotations={'tensorize': 'dot_16x4_vnni'}" in text
    assert structural_equal(from_source(text), sch.func)
    replayed = Trace.from_json(sch.trace.to_json()).apply(sch.original).func
    assert structural_equal(replayed, sch.func)
    out, want, _ = run_int8(from_source(text), 8, 32, 16)
    np.testing.assert_array_equal(out, want)


def test_weights_not_packed_16_by_4_fail_the_build_naming_the_layout_it_needs():
    sch = vnni_schedule(int8_gemm(4, 32, 8), pack=False)
    with pytest.raises(IntrinsicError, match=r"B_global has strides \[1, 32\].*pack it 16 x 4"):
        build(sch.func, vnni_target(), listings=False)


def test_a_cpu_without_vnni_cannot_build_it():
    host = Target.host()
    plain = replace(host, features=",".join(f for f in host.features.split(",") if "vnni" not in f))
    sch = vnni_schedule(int8_gemm(4, 32, 8))
    with pytest.raises(IntrinsicError, match=r"needs the CPU feature\(s\) \['avx512vnni'\]"):
        build(sch.func, plain, listings=False)


def matmul_nest(func, j_tile: int = 16):
    sch = Schedule(func, seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    jo, ji = sch.split(j, [None, j_tile])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(i, jo, ko, ji, ki)
    return sch, c, ko, ji


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: matmul_nest(int8_gemm(4, 32, 8)), "has an init; decompose_reduction first"),
        (lambda: matmul_nest(int8_gemm(4, 40, 8)), "is guarded"),
        (lambda: matmul_nest(int8_gemm(4, 32, 8), j_tile=8), "has extent 8, the intrinsic's 16"),
    ],
)
def test_a_nest_that_is_not_the_intrinsics_is_refused_with_the_reason(make, match):
    sch, c, ko, ji = make()
    if "init" not in match:
        sch.decompose_reduction(c, ko)
    with pytest.raises(ScheduleError, match=match):
        sch.tensorize(ji, "dot_16x4_vnni")


def test_a_float_matmul_or_a_vectorized_loop_or_an_unknown_name_is_refused():
    sch, c, ko, ji = matmul_nest(matmul(4, 32, 8).func)
    sch.decompose_reduction(c, ko)
    with pytest.raises(ScheduleError, match=r"computes .* where the intrinsic computes"):
        sch.tensorize(ji, "dot_16x4_vnni")
    with pytest.raises(ScheduleError, match="no tensor intrinsic is named 'vpdpbusd'"):
        sch.tensorize(ji, "vpdpbusd")
    sch.vectorize(ji)
    with pytest.raises(ScheduleError, match="parallel or vectorized"):
        sch.tensorize(ji, "dot_16x4_vnni")


@pytest.mark.parametrize(("m", "n", "k"), [(8, 32, 13), (4, 48, 1), (12, 16, 37)])
def test_the_fma_micro_kernel_computes_a_float_matmul(m, n, k):
    sch = Schedule(matmul(m, n, k).func, seed=0)
    fma_tiles(sch)
    rng = np.random.default_rng(k)
    a, b = rng.standard_normal((m, k)).astype("float32"), rng.standard_normal((k, n)).astype("float32")
    out = np.full((m, n), np.nan, "float32")
    kernel = build(sch.func)
    kernel(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    assert "vfmadd" in kernel.assembly()


ADD4 = """
@T.prim_func
def add4(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("update"):
            vi = T.axis.spatial(4, i)
            C[vi] = C[vi] + A[vi]
"""


def _add4(cg, ops) -> None:
    """Four adds as one <4 x float> operation, whatever the strides (gathered lane by lane)."""
    a, c = ops
    v4 = ll.VectorType(ll.FloatType(), 4)
    b = cg.builder
    lanes_a = [b.load(b.gep(a.pointer, [ll.IntType(64)(i * a.strides[0])])) for i in range(4)]
    lanes_c = [b.load(b.gep(c.pointer, [ll.IntType(64)(i * c.strides[0])])) for i in range(4)]
    va, vc = ll.Constant(v4, ll.Undefined), ll.Constant(v4, ll.Undefined)
    for i in range(4):
        va = b.insert_element(va, lanes_a[i], ll.IntType(32)(i))
        vc = b.insert_element(vc, lanes_c[i], ll.IntType(32)(i))
    total = b.fadd(va, vc)
    for i in range(4):
        b.store(
            b.extract_element(total, ll.IntType(32)(i)), b.gep(c.pointer, [ll.IntType(64)(i * c.strides[0])])
        )


def test_a_users_intrinsic_registers_from_tensorir_and_runs_where_a_nest_matches():
    TensorIntrin.register("test_add4", from_source(ADD4), _add4, override=True)
    with pytest.raises(ValueError, match="registered already"):
        TensorIntrin.register("test_add4", from_source(ADD4), _add4)
    X = te.placeholder((6, 8), name="X")
    R = te.reduce_axis((0, 6), "r")
    S = te.compute((8,), lambda j: te.sum(X[R, j], axis=R), name="S")
    sch = Schedule(te.create_prim_func([X, S]), seed=0)
    s = sch.get_block("S")
    j, r = sch.get_loops(s)
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(jo, r, ji)
    sch.decompose_reduction(s, r)
    sch.tensorize(ji, "test_add4")
    x = np.random.default_rng(3).standard_normal((6, 8)).astype("float32")
    out = np.full(8, np.nan, "float32")
    build(sch.func, listings=False)(x, out)
    np.testing.assert_allclose(out, x.sum(0), rtol=1e-5)


def test_a_description_that_is_not_one_update_is_refused_when_registered():
    with_init = ADD4.replace(
        "            C[vi] = C[vi] + A[vi]",
        "            with T.init():\n                C[vi] = T.float32(0)\n            C[vi] = C[vi] + A[vi]",
    )
    with pytest.raises(IntrinsicError, match="an update without an init"):
        TensorIntrin.register("test_bad", from_source(with_init), _add4)
    shifted = ADD4.replace("C[vi] + A[vi]", "C[vi] + A[3 - vi]")
    with pytest.raises(IntrinsicError, match="indexed by its loops alone"):
        TensorIntrin.register("test_bad", from_source(shifted), _add4)


def test_a_script_that_claims_a_nest_the_intrinsic_does_not_compute_fails_its_build():
    """The annotation alone (from a script, skipping the primitive's check) never gives wrong code."""
    sch, c, ko, ji = matmul_nest(int8_gemm(4, 32, 8))
    sch.decompose_reduction(c, ko)
    sch.tensorize(ji, "dot_16x4_vnni")
    text = sch.func.script().replace("T.Cast('int32', A[", "T.Cast('int32', A[0 * ")
    tampered = from_source(text.replace("* T.Cast('int32', B", "+ T.Cast('int32', B"))
    with pytest.raises(IntrinsicError, match=r"where the intrinsic (computes|loads)"):
        build(tampered, vnni_target(), listings=False)


DOUBLES = """
@T.prim_func
def doubles(Y: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("Y"):
            vi = T.axis.spatial(8, i)
            Y[vi] = Y[vi] + Y[vi]
"""


def test_an_intrinsics_two_buffers_on_one_program_buffer_are_refused():
    """Y[i] += Y[i] over add4's nest: the implementation would read what it writes at once."""
    TensorIntrin.register("test_add4", from_source(ADD4), _add4, override=True)
    sch = Schedule(from_source(DOUBLES), seed=0)
    (i,) = sch.get_loops(sch.get_block("Y"))
    _, inner = sch.split(i, [None, 4])
    with pytest.raises(ScheduleError, match="two of the intrinsic's buffers are one program buffer"):
        sch.tensorize(inner, "test_add4")
