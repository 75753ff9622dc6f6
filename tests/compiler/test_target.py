"""Target emulation: another CPU's subset of this machine's features, whose code runs here."""

import numpy as np
import pytest

from compiler import te
from compiler.build import build
from compiler.schedule import Schedule
from compiler.target import Target


def test_a_narrower_cpu_turns_its_missing_features_off_and_keeps_the_rest_explicit() -> None:
    host = Target.host()
    sse = host.emulated("x86-64-v2")
    assert sse.mcpu == "x86-64-v2" and sse.vector_bits == 128
    assert not {"avx", "avx2", "fma"} & sse.feature_set and "sse4.2" in sse.feature_set
    assert sse.key != host.key and sse.cores == host.cores
    assert len(sse.features.split(",")) == len(host.features.split(","))  # every feature + or -
    assert "avx512f" not in host.emulated("znver3").feature_set
    assert host.emulated("x86-64-v2,-sse4.2").feature_set == sse.feature_set - {"sse4.2"}
    assert not any(f.startswith("sse4") for f in host.emulated("x86-64-v2,-sse4*").feature_set)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "name a CPU first"),
        ("znver3,avx2", "is not \\+FEATURE or -FEATURE"),
        ("x86-64-v2,+no-such-feature", "this machine has no 'no-such-feature'"),
        ("znver3,-nosuch*", "no feature matches 'nosuch\\*'"),
    ],
)
def test_a_bad_target_is_refused_with_the_reason(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Target.host().emulated(spec)


def test_code_for_an_emulated_target_uses_only_its_features_and_runs_here() -> None:
    A = te.placeholder((64,), "float32", name="A")
    B = te.placeholder((64,), "float32", name="B")
    Y = te.compute((64,), lambda i: A[i] * B[i] + A[i], name="Y")
    sch = Schedule(te.create_prim_func([A, B, Y], name="muladd"))
    (i,) = sch.get_loops(sch.get_block("Y"))
    _, inner = sch.split(i, factors=[None, 16])
    sch.vectorize(inner)
    kernel = build(sch.func, Target.host().emulated("x86-64-v2"))
    assert "ymm" not in kernel.assembly() and "zmm" not in kernel.assembly() and "xmm" in kernel.assembly()
    a, b = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")
    y = np.empty(64, "float32")
    kernel(a, b, y)
    np.testing.assert_allclose(y, a * b + a, rtol=1e-6)
