"""Property: random stochastic schedules of matmul, mm_relu and conv2d compute what numpy computes."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import Schedule, ScheduleError, build
from compiler.workloads import workload_from_spec

SPECS = {
    "matmul": {"op": "matmul", "params": {"M": 37, "N": 48, "K": 29}},
    "matmul_relu": {"op": "matmul_relu", "params": {"M": 24, "N": 31, "K": 16}},
    "conv2d": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 3, "H": 10, "W": 9, "K": 4, "R": 3, "S": 3, "padding": 1},
    },
}


def _main_block(sch: Schedule):
    blocks = sch.get_child_blocks(sch.get_block("root"))
    reductions = [b for b in blocks if b.name in ("C", "Y", "conv2d_nchw")]
    return blocks, next(b for b in reductions if b.name != "C" or len(blocks) == 1)


def stochastic_tiling(sch: Schedule, draw) -> Schedule:
    """Multi-level tiling in the spirit of MetaSchedule's SRSR structure, with sampled decisions and
    sampled placement of the producer (padding) and consumer (relu) blocks."""
    blocks, main = _main_block(sch)
    loops = sch.get_loops(main)
    kinds = [
        "R" if k >= len(loops) - (3 if main.name == "conv2d_nchw" else 1) else "S" for k in range(len(loops))
    ]
    outer, inner = [], []
    for loop, kind in zip(loops, kinds):
        tiles = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=draw(st.sampled_from([4, 8, 16])))
        lo, hi = sch.split(loop, tiles)
        outer.append((lo, kind))
        inner.append((hi, kind))
    order = [lp for lp, k in outer if k == "S"] + [lp for lp, k in outer if k == "R"]
    order += [lp for lp, k in inner if k == "R"] + [lp for lp, k in inner if k == "S"]
    sch.reorder(*order)
    spatial_outer = [lp for lp, k in outer if k == "S"]
    for other in blocks:
        if other.name == "pad_temp":
            if draw(st.booleans()):
                sch.compute_inline(other)
            else:
                sch.compute_at(other, sch.sample_compute_location(other))
        elif other.name == "C" and other is not main:
            sch.reverse_compute_at(other, spatial_outer[draw(st.integers(0, len(spatial_outer) - 1))])
    if draw(st.booleans()):
        sch.decompose_reduction(main, next(lp for lp, k in outer if k == "R"))
    if draw(st.booleans()):
        sch.vectorize([lp for lp, k in inner if k == "S"][-1])
    if draw(st.booleans()):
        try:
            sch.parallel(spatial_outer[0])
        except ScheduleError as e:  # legal only if every block under the loop depends on it
            assert "does not depend on it" in str(e)
    return sch


def legal_stochastic_tiling(func, seed: int, draw) -> Schedule:
    """`stochastic_tiling` of `func`, which only makes legal choices: a refusal fails the test."""
    try:
        return stochastic_tiling(Schedule(func, seed=seed), draw)
    except ScheduleError as e:
        raise AssertionError(f"a schedule built only from legal choices was refused: {e}") from e


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SPECS)), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_random_stochastic_schedules_match_numpy(name, seed, data):
    workload = workload_from_spec(SPECS[name])
    sch = legal_stochastic_tiling(workload.func, seed, data.draw)
    inputs = workload.random_inputs(np.random.default_rng(seed))
    outputs = workload.empty_outputs()
    build(sch.func, listings=False)(*inputs, *outputs)
    for got, want in zip(outputs, workload.reference(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
