"""float32 exp, erf, tanh, log, expm1 and log1p compile to inline polynomials (compiler.llvm_math),
not to a libm call per lane: accurate against float64 on dense grids, exact at the special values, in
scalar and vector builds alike; float64 keeps the intrinsic and libm."""

import math

import numpy as np
import pytest

from compiler import Schedule, build, te

LANES = 16
TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32
SUBNORMAL = float(np.finfo(np.float32).smallest_subnormal)
erf64 = np.vectorize(math.erf, otypes=[np.float64])


def kernels(fn, n: int, dtype: str = "float32") -> dict[str, object]:
    """`fn` over a 1-D buffer of `n` points: the unscheduled (scalar) build and a vectorized one."""
    x = te.placeholder((n,), dtype, "X")
    y = te.compute((n,), lambda i: fn(x[i]), name="Y")
    func = te.create_prim_func([x, y])
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("Y"))
    _, inner = sch.split(i, [None, LANES])
    sch.vectorize(inner)
    return {"scalar": build(func), "vector": build(sch.func)}


def run(kernel, x: np.ndarray) -> np.ndarray:
    y = np.full_like(x, 7.0)
    kernel(x, y)
    return y


def ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float32 spacing at `exact` (float64)."""
    spacing = np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


def grid(lo: float, hi: float, n: int) -> np.ndarray:
    return np.linspace(lo, hi, n // LANES * LANES).astype(np.float32)


def padded(values: list[float]) -> np.ndarray:
    """The values, repeated to a whole number of vectors."""
    return np.resize(np.array(values, np.float32), -(-len(values) // LANES) * LANES)


@pytest.fixture(scope="module")
def exp_grid() -> tuple[np.ndarray, dict[str, object]]:
    x = grid(-103.9, 88.7, 1 << 20)  # from deep in the subnormal results to just below overflow
    return x, kernels(te.exp, x.size)


@pytest.fixture(scope="module")
def erf_grid() -> tuple[np.ndarray, dict[str, object]]:
    x = grid(-6.0, 6.0, 1 << 20)
    return x, kernels(te.erf, x.size)


@pytest.mark.parametrize("build_kind", ["scalar", "vector"])
def test_exp_is_within_2_ulp_and_underflows_gradually(exp_grid, build_kind):
    x, built = exp_grid
    got, exact = run(built[build_kind], x), np.exp(x.astype(np.float64))
    normal = exact >= TINY
    assert ulps(got[normal], exact[normal]).max() <= 2.0  # measured 0.99
    assert np.abs(got[~normal] - exact[~normal]).max() <= SUBNORMAL  # measured 0.75 of it


@pytest.mark.parametrize("build_kind", ["scalar", "vector"])
def test_erf_is_within_relative_5e_7(erf_grid, build_kind):
    x, built = erf_grid
    got, exact = run(built[build_kind], x), erf64(x.astype(np.float64))
    nonzero = exact != 0
    assert np.abs(got[nonzero] / exact[nonzero] - 1).max() <= 5e-7  # measured 3.5e-7, near |x| = 0.6
    assert np.all(got[x == 0] == 0)


def test_erf_of_tiny_arguments_is_2x_over_sqrt_pi():
    tiny = np.float32(10.0) ** -np.linspace(1, 37, 1024).astype(np.float32)
    x = np.concatenate([tiny, -tiny])
    exact = erf64(x.astype(np.float64))
    for kernel in kernels(te.erf, x.size).values():
        assert np.abs(run(kernel, x) / exact - 1).max() <= 2e-7  # measured 1.3e-7


@pytest.mark.parametrize("build_kind", ["scalar", "vector"])
def test_tanh_is_within_relative_3e_7(build_kind):
    x = np.concatenate(
        [grid(-12.0, 12.0, 1 << 18), np.float32(10.0) ** -np.linspace(1, 44, 1024, dtype=np.float32)]
    )
    got, exact = run(kernels(te.tanh, x.size)[build_kind], x), np.tanh(x.astype(np.float64))
    nonzero = exact != 0
    assert np.abs(got[nonzero] / exact[nonzero] - 1).max() <= 3e-7  # measured 1.4e-7


@pytest.mark.parametrize("build_kind", ["scalar", "vector"])
def test_log_is_within_2_ulp_subnormals_included(build_kind):
    normal = np.exp(np.linspace(-87.0, 88.7, 1 << 18))
    near_one = np.linspace(0.5, 2.0, 1 << 16)
    subnormal = 2.0 ** -np.linspace(126.5, 149.0, 1024)
    x = np.concatenate([normal, near_one, subnormal]).astype(np.float32)
    got, exact = run(kernels(te.log, x.size)[build_kind], x), np.log(x.astype(np.float64))
    assert ulps(got, exact).max() <= 2.0  # measured 1.2


@pytest.mark.parametrize("build_kind", ["scalar", "vector"])
@pytest.mark.parametrize(
    "fn, reference, lo, hi",
    [(te.expm1, np.expm1, -20.0, 88.0), (te.log1p, np.log1p, -0.999, 1e6)],
    ids=["expm1", "log1p"],
)
def test_expm1_and_log1p_keep_relative_accuracy_near_0(build_kind, fn, reference, lo, hi):
    tiny = np.float32(10.0) ** -np.linspace(2, 40, 2048, dtype=np.float32)
    x = np.concatenate([grid(lo, 1.0, 1 << 16), np.geomspace(1.0, hi, 4096), tiny, -tiny]).astype(np.float32)
    got, exact = run(kernels(fn, x.size)[build_kind], x), reference(x.astype(np.float64))
    assert np.abs(got / exact - 1).max() <= 5e-7  # measured 2.6e-7 (expm1), 1.9e-7 (log1p)


EXP_SPECIAL = [0.0, -0.0, 1e-30, -1e-30, math.inf, -math.inf, math.nan, 89.0, 100.0, 1e30, -104.0, -1e30]
ERF_SPECIAL = [0.0, -0.0, 1e-30, -1e-38, math.inf, -math.inf, math.nan, 4.0, 5.0, -5.0, 1e30, -1e30]
TANH_SPECIAL = [0.0, -0.0, 1e-30, -1e-30, math.inf, -math.inf, math.nan, 10.0, -10.0, 1e30]
EXPM1_SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 100.0, -200.0]
LOG1P_SPECIAL = [0.0, -0.0, math.inf, -1.0, -2.0, math.nan, 3e38]
LOG_SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, 1.0, 2.0, 1e-45, -1e-45]


@pytest.mark.parametrize(
    "fn, values, expected",
    [
        # e^0 = 1 either sign; overflow is inf, underflow past half the smallest subnormal is 0
        (te.exp, EXP_SPECIAL, [1, 1, 1, 1, math.inf, 0, math.nan, math.inf, math.inf, math.inf, 0, 0]),
        # odd (erf(-0) = -0), 2x/sqrt(pi) near 0, +-1 from |x| = 4 on
        (
            te.erf,
            ERF_SPECIAL,
            [0, -0.0, 2e-30 / math.sqrt(math.pi), -2e-38 / math.sqrt(math.pi)]
            + [1, -1, math.nan, 1, 1, -1, 1, -1],
        ),
        # odd, x near 0, +-1 far out
        (te.tanh, TANH_SPECIAL, [0, -0.0, 1e-30, -1e-30, 1, -1, math.nan, 1, -1, 1]),
        # -inf at either zero, NaN below it, the smallest subnormal's log
        (
            te.log,
            LOG_SPECIAL,
            [-math.inf, -math.inf, math.inf, math.nan, math.nan, math.nan, 0, math.log(2)]
            + [math.log(1.401298464324817e-45), math.nan],
        ),
        (te.expm1, EXPM1_SPECIAL, [0, -0.0, math.inf, -1, math.nan, math.inf, -1]),
        (te.log1p, LOG1P_SPECIAL, [0, -0.0, math.inf, -math.inf, math.nan, math.nan, math.log(3e38)]),
    ],
    ids=["exp", "erf", "tanh", "log", "expm1", "log1p"],
)
def test_special_values(fn, values, expected):
    x = padded(values)
    want = np.array(expected, np.float32)
    for got in (run(k, x)[: len(values)] for k in kernels(fn, x.size).values()):
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0 stays -0


@pytest.mark.parametrize(
    "fn",
    [te.exp, te.erf, te.tanh, te.log, te.expm1, te.log1p],
    ids=["exp", "erf", "tanh", "log", "expm1", "log1p"],
)
def test_vectorized_float32_kernels_call_nothing(fn):
    """No libm call per lane (expf, erff) nor any other: the kernel is straight vector arithmetic."""
    kernel = kernels(fn, 4 * LANES)["vector"]
    assembly = kernel.assembly()
    body = assembly[assembly.index("main:") : assembly.index(".Lfunc_end0:")]
    assert "call" not in body and "expf" not in body and "erff" not in body  # nor a tail call (jmp)
    assert "%zmm" in body or "%ymm" in body


@pytest.mark.parametrize(
    "fn, reference",
    [(te.exp, np.exp), (te.erf, erf64), (te.tanh, np.tanh), (te.log, np.log)],
    ids=["exp", "erf", "tanh", "log"],
)
def test_float64_keeps_the_library_functions(fn, reference):
    x = np.linspace(0.01, 5, 4 * LANES) if fn is te.log else np.linspace(-5, 5, 4 * LANES)
    for kernel in kernels(fn, x.size, "float64").values():
        np.testing.assert_allclose(run(kernel, x), reference(x), rtol=1e-15, atol=1e-300)
