"""A trace replayed from JSON in a fresh process builds the identical program (script and hash)."""

import json
import pathlib
import subprocess
import sys
import textwrap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import Schedule, ScheduleError, te

ROOT = pathlib.Path(__file__).resolve().parents[2]


def mm_relu(n=64, m=48, kk=40):
    A = te.placeholder((n, kk), name="A")
    B = te.placeholder((kk, m), name="B")
    k = te.reduce_axis((0, kk), name="k")
    Y = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, m), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return te.create_prim_func([A, B, C], name="mm_relu")


def stochastic(sch: Schedule) -> Schedule:
    """A MetaSchedule-like space: tile i and j in 3, k in 2, relu at a sampled loop, a sampled unroll."""
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    i0, i1, i2 = sch.split(i, sch.sample_perfect_tile(i, n=3, max_innermost_factor=16))
    j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=16))
    k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, j1, k0, i2, k1, j2)
    level = sch.sample_categorical([0, 1], [0.5, 0.5])
    sch.reverse_compute_at(sch.get_block("C"), [j0, j1][level])
    sch.decompose_reduction(y, k0)
    sch.vectorize(j2)
    sch.annotate(i0, "unroll", sch.sample_categorical([0, 16, 64], [0.4, 0.3, 0.3]))
    return sch


REPLAY = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, "tests/compiler")
    from test_replay_process import mm_relu
    from compiler import Trace
    for line in sys.stdin:
        sch = Trace.from_json(json.loads(line)).apply(mm_relu())
        print(json.dumps([sch.func.script(), sch.func.structural_hash()]))
    """
)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds=st.lists(st.integers(0, 2**31 - 1), min_size=12, max_size=12, unique=True))
def test_replay_in_new_process_is_identical(seeds):
    expected, traces = [], []
    for seed in seeds:
        try:
            sch = stochastic(Schedule(mm_relu(), seed=seed))
        except ScheduleError:
            continue
        traces.append(json.dumps(sch.trace.to_json()))
        expected.append([sch.func.script(), sch.func.structural_hash()])
    assert traces, "every sampled schedule failed"
    out = subprocess.run(
        [sys.executable, "-c", REPLAY],
        input="\n".join(traces) + "\n",
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert [json.loads(line) for line in out.stdout.splitlines()] == expected
