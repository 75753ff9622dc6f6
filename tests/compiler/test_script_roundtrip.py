"""Round trip: reading a function's printed TVMScript gives the same function, for every program the
registry, the default schedule and random stochastic schedules produce (the search space's samples
are checked in tests/tuner/search/test_space.py, the models' fused kernels in test_transformers.py)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import te
from compiler.ir import PrimFunc
from compiler.schedule_rules import default_schedule
from compiler.script import from_source
from compiler.target import Target
from compiler.workloads import workload_from_spec
from tests.compiler.test_stochastic_property import SPECS, legal_stochastic_tiling
from tests.compiler.test_workloads import CASES, IDS


def assert_round_trip(func: PrimFunc) -> None:
    text = func.script()
    again = from_source(text)
    assert again == func, text
    assert again.structural_hash() == func.structural_hash()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("op", "params"), CASES, ids=IDS)
def test_registered_ops_and_their_default_schedules_round_trip(op, params, dtype):
    func = workload_from_spec({"op": op, "params": params, "dtype": dtype}).func
    assert_round_trip(func)
    assert_round_trip(default_schedule(func, Target.host()).func)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SPECS)), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_random_stochastic_schedules_round_trip(name, seed, data):
    assert_round_trip(legal_stochastic_tiling(workload_from_spec(SPECS[name]).func, seed, data.draw).func)


def test_integer_boolean_and_scan_programs_round_trip():
    """Casts, selects, comparisons and boolean logic, int32 constants, and te.scan's ordered axis."""
    x = te.placeholder((5, 7), "int32", name="x")
    m = te.placeholder((5, 7), "bool", name="m")
    y = te.compute(
        (5, 7),
        lambda i, j: te.select(
            te.any(te.all(m[i, j], te.not_(x[i, j] < -3)), j == 0), te.cast("float64", x[i, j] % 4), -2.5
        ),
        name="y",
        dtype="float64",
    )
    s_init = te.compute((1, 7), lambda _, j: te.cast("float32", x[0, j]), name="s_init")
    state = te.placeholder((5, 7), name="state")
    s_update = te.compute((5, 7), lambda t, j: state[t - 1, j] + te.cast("float32", x[t, j]), name="s_update")
    scan = te.scan(s_init, s_update, state, inputs=[x])
    assert_round_trip(te.create_prim_func([x, m, y], name="logic"))
    assert_round_trip(te.create_prim_func([x, scan], name="cumsum"))
