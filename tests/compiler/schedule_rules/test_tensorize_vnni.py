"""TensorizeVNNI: where the CPU has AVX-512 VNNI, the default schedule and every sample of the search
space compute a uint8 x int8 GEMM (weights [K, N] or a dense layer's [N, K]) with vpdpbusd and give
numpy's int32 result exactly; shapes the intrinsic does not fit, other dtypes and CPUs without VNNI
are left to MultiLevelTiling."""

from dataclasses import replace

import numpy as np
import pytest

from compiler import Schedule, build, te
from compiler.schedule_rules import RuleConfig, default_schedule
from compiler.target import Target
from tests import machines
from tests.compiler.helpers import int8_gemm
from tuner.search.space import rule_space

HOST = Target.host()
needs_vnni = pytest.mark.skipif("avx512vnni" not in HOST.feature_set, reason="this CPU has no AVX-512 VNNI")


def check(func, dense: bool) -> str:
    """Build for this machine, compare with numpy exactly; returns the assembly."""
    m, k = func.params[0].shape
    rng = np.random.default_rng(m + k)
    a = rng.integers(0, 256, (m, k)).astype(func.params[0].dtype)
    w = rng.integers(-128, 128, func.params[1].shape).astype(func.params[1].dtype)
    want = a.astype(np.int32) @ (w.astype(np.int32).T if dense else w.astype(np.int32))
    out = np.full(want.shape, -1, "int32")
    kernel = build(func, HOST)
    kernel(a, w, out)
    np.testing.assert_array_equal(out, want)
    return kernel.assembly()


def tensorized(sch: Schedule) -> bool:
    return any(i.kind == "tensorize" for i in sch.trace.instructions)


@needs_vnni
@pytest.mark.parametrize(("m", "n", "k", "dense"), [(7, 48, 20, False), (5, 64, 36, True), (1, 32, 8, True)])
def test_the_default_schedule_computes_an_int8_gemm_with_vnni(m, n, k, dense):
    sch = default_schedule(int8_gemm(m, n, k, dense), HOST)
    assert tensorized(sch)
    assert "vpdpbusd" in check(sch.func, dense)


@needs_vnni
def test_every_sample_of_the_search_space_is_tensorized_and_exact():
    func = int8_gemm(12, 96, 16, dense=True)
    space = rule_space(RuleConfig.for_target(HOST))
    tiles = set()
    for seed in range(6):
        sch = Schedule(func, seed=seed)
        space(sch)
        assert tensorized(sch)
        tiles.add(tuple(tuple(i.decision) for i in sch.trace.instructions if i.kind == "sample_perfect_tile"))
        check(sch.func, dense=True)
    assert len(tiles) > 1  # the register tile is sampled


@pytest.mark.parametrize(
    ("func", "why"),
    [
        (int8_gemm(4, 40, 8, False), "columns not a multiple of 16"),
        (int8_gemm(4, 32, 6, False), "reduction not a multiple of 4"),
        (int8_gemm(4, 32, 8, False, ("int8", "int8")), "signed rows"),
        (int8_gemm(4, 32, 8, False, ("uint8", "uint8")), "unsigned weights"),
    ],
)
def test_what_the_intrinsic_does_not_fit_is_tiled_as_before(func, why):
    sch = default_schedule(func, HOST)
    assert not tensorized(sch), why
    check(sch.func, dense=False)


def test_a_cpu_without_vnni_gets_the_tiled_schedule():
    with_vnni = replace(machines.AVX512, features=machines.AVX512.features + ",+avx512vnni")
    func = int8_gemm(8, 32, 16, dense=False)
    assert tensorized(default_schedule(func, with_vnni))
    assert not tensorized(default_schedule(func, machines.AVX512))


@needs_vnni
def test_a_models_gemm_with_a_batch_of_one_is_tensorized_too():
    """matmul_integer of [1, tokens, width] activations and [width, out] weights, as a graph has it."""
    from compiler import topi

    A = te.placeholder((1, 12, 20), "uint8", "A")
    W = te.placeholder((20, 32), "int8", "W")
    C = topi.matmul(A, W, "C", accumulate="int32")
    func = te.create_prim_func([A, W, C])
    sch = default_schedule(func, HOST)
    assert tensorized(sch)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (1, 12, 20)).astype("uint8")
    w = rng.integers(-128, 128, (20, 32)).astype("int8")
    out = np.full((1, 12, 32), -1, "int32")
    build(sch.func, HOST)(a, w, out)
    np.testing.assert_array_equal(out, a.astype(np.int32) @ w.astype(np.int32))


@needs_vnni
def test_weights_packed_at_compile_time_need_no_panel():
    """matmul_integer_vnni's weights, [N/16, K/4, 16, 4], are read by the intrinsic as they are."""
    from compiler.graph.ops.matmul_integer_vnni import pack_vnni

    A = te.placeholder((6, 8), "uint8", "A")
    P = te.placeholder((2, 2, 16, 4), "int8", "P")
    r = te.reduce_axis((0, 8), "k")
    C = te.compute(
        (6, 32),
        lambda i, j: te.sum(
            te.cast("int32", A[i, r]) * te.cast("int32", P[j // 16, r // 4, j % 16, r % 4]), axis=r
        ),
        name="C",
    )
    sch = default_schedule(te.create_prim_func([A, P, C]), HOST)
    assert tensorized(sch) and not any(i.kind == "cache_read" for i in sch.trace.instructions)
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (6, 8)).astype("uint8")
    w = rng.integers(-128, 128, (8, 32)).astype("int8")
    out = np.full((6, 32), -1, "int32")
    build(sch.func, HOST)(a, pack_vnni(w), out)
    np.testing.assert_array_equal(out, a.astype(np.int32) @ w.astype(np.int32))
