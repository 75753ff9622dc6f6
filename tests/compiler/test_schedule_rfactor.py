"""rfactor: the partial-result block and the write-back compute what numpy computes for sums, maxima
and matmuls, at every factor axis, after further scheduling of either block; the trace replays and
the program reads back from its TVMScript; what it cannot factor, it refuses."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import Schedule, ScheduleError, Trace, build, te
from compiler.script import from_source
from compiler.visit import free_vars


def reduction(kind: str, m: int, n: int, k: int):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    if kind == "matmul":
        Y = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
        return te.create_prim_func([A, B, Y], name=kind), lambda a, b: a @ b
    if kind == "rowmax":
        Y = te.compute((m,), lambda i: te.max(A[i, r], axis=r), name="Y")
        return te.create_prim_func([A, Y], name=kind), lambda a: a.max(1)
    Y = te.compute((m,), lambda i: te.sum(A[i, r], axis=r), name="Y")
    return te.create_prim_func([A, Y], name=kind), lambda a: a.sum(1)


def check(func, want, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(b.shape).astype("float32") for b in func.params[:-1]]
    out = np.full(func.params[-1].shape, np.nan, dtype="float32")
    build(func, listings=False)(*inputs, out)
    np.testing.assert_allclose(out, want(*inputs), rtol=1e-4, atol=1e-4)


def test_a_batch_one_row_sum_factored_runs_its_partial_sums_in_parallel_and_vectorized():
    func, want = reduction("rowsum", 1, 1, 4096)
    sch = Schedule(func, seed=0)
    _, k = sch.get_loops(sch.get_block("Y"))
    ko, ki = sch.split(k, [2, None])
    kio, kii = sch.split(ki, [None, 16])
    rf = sch.rfactor(ko, 0)
    sch.parallel(ko)
    sch.reorder(ko, kio, kii)
    assert sch.get(rf).name == "Y_rf"
    assert [b.name for b in sch.func.allocs] == ["Y_rf"] and sch.func.allocs[0].shape == (2, 1)
    check(sch.func, want)
    assert "T.parallel(2)" in sch.func.script()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["rowsum", "rowmax", "matmul"]),
    m=st.integers(1, 5),
    k=st.sampled_from([12, 16, 30]),
    data=st.data(),
)
def test_random_factorings_compute_what_numpy_computes(kind, m, k, data):
    func, want = reduction(kind, m, 3, k)
    sch = Schedule(func, seed=data.draw(st.integers(0, 2**20)))
    loops = sch.get_loops(sch.get_block("Y"))
    factors = [d for d in range(1, k + 1) if k % d == 0]  # 1 and k included: the degenerate factorings
    inner = data.draw(st.sampled_from(factors))
    ko, ki = sch.split(loops[-1], [None, inner])
    rank = len(func.params[-1].shape)
    rf = sch.rfactor(data.draw(st.sampled_from([ko, ki])), data.draw(st.integers(0, rank)))
    rf_loops = sch.get_loops(rf)
    if data.draw(st.booleans()):
        sch.decompose_reduction(rf, first_reduction_loop(sch, rf))
    elif data.draw(st.booleans()):
        sch.reorder(*rf_loops[:-2], rf_loops[-1], rf_loops[-2])
    if data.draw(st.booleans()):
        sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[-1])
    check(sch.func, want)
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    assert from_source(sch.func.script()) == sch.func


def first_reduction_loop(sch: Schedule, block):
    blk = sch.get(block)
    names = {v.name for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "R" for v in free_vars(b)}
    return next(lp for lp in sch.get_loops(block) if lp.name in names)


def _split_sum(k: int = 16, inner: int = 4) -> tuple[Schedule, list]:
    func, _ = reduction("rowsum", 3, 1, k)
    sch = Schedule(func, seed=0)
    i, kk = sch.get_loops(sch.get_block("Y"))
    return sch, [i, *sch.split(kk, [None, inner])]


@pytest.mark.parametrize(
    ("act", "message"),
    [
        (lambda sch, ls: sch.rfactor(ls[0], 0), "does not iterate the reduction"),
        (lambda sch, ls: sch.rfactor(ls[2], 2), re.escape("factor_axis must be in [0, 1]")),
        (
            lambda sch, ls: (sch.decompose_reduction(sch.get_block("Y"), ls[1]), sch.rfactor(ls[2], 0)),
            "not a reduction with its init",
        ),
    ],
)
def test_what_rfactor_refuses(act, message):
    sch, loops = _split_sum()
    with pytest.raises(ScheduleError, match=message):
        act(sch, loops)


def test_a_guarded_split_of_the_reduction_is_refused():
    func, _ = reduction("rowsum", 2, 1, 10)
    sch = Schedule(func, seed=0)
    _, k = sch.get_loops(sch.get_block("Y"))
    _, ki = sch.split(k, [None, 4])
    with pytest.raises(ScheduleError, match="needs perfect splits"):
        sch.rfactor(ki, 0)


def test_a_reduction_loop_outside_the_spatial_loops_factors_too():
    func, want = reduction("matmul", 5, 3, 12)
    sch = Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    ko, ki = sch.split(k, [3, None])
    sch.reorder(ko, i, j, ki)
    sch.rfactor(ko, 2)
    assert sch.func.allocs[0].shape == (5, 3, 3)
    check(sch.func, want)


def test_factoring_the_whole_reduction_loop_stores_each_term():
    func, want = reduction("rowmax", 4, 1, 9)
    sch = Schedule(func, seed=0)
    rf = sch.rfactor(sch.get_loops(sch.get_block("Y"))[1], 1)
    assert sch.get(rf).init is None and sch.func.allocs[0].shape == (4, 9)
    check(sch.func, want)
