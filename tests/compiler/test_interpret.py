"""The numpy interpreter of unscheduled PrimFuncs: it computes what every registered operator's
hand-written reference and the expression language's own interpreter compute, within bounded time and
memory, and refuses what it cannot evaluate faithfully."""

from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings

from compiler import Schedule, te
from compiler.interpret import InterpretError, interpret
from compiler.ir import Block, BufferStore, PrimFunc
from compiler.visit import map_blocks
from compiler.workloads import Workload, workload_from_spec
from tests.compiler.test_workload_spec import FORMULAS, programs
from tests.compiler.test_workloads import CASES, IDS


def agree(w: Workload, func: PrimFunc | None = None, seed: int = 0, tol: float | None = None) -> None:
    inputs = w.random_inputs(np.random.default_rng(seed))
    tol = tol or (1e-4 if w.func.params[0].dtype == "float32" else 1e-10)
    got = interpret(func or w.func, *inputs)
    for g, want in zip(got, w.reference(*inputs), strict=True):
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("op", "params"), CASES, ids=IDS)
def test_every_registered_op_matches_its_reference(op, params, dtype):
    agree(workload_from_spec({"op": op, "params": params, "dtype": dtype}))


@pytest.mark.parametrize(("expr", "inputs"), [(e, i) for e, i, f in FORMULAS if f is not None])
def test_custom_formulas_match_the_expression_interpreter(expr, inputs):
    agree(workload_from_spec({"expr": expr, "inputs": inputs, "dtype": "float64"}))


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_custom_programs_match_the_expression_interpreter(expr):
    agree(workload_from_spec({"expr": expr, "inputs": {"A": [4, 4], "B": [4, 4]}, "dtype": "float64"}))


@pytest.mark.parametrize(("op", "params"), [c for c in CASES if c[0] in ("conv2d_nchw", "softmax")])
def test_boxes_smaller_than_a_row_give_the_same_result(monkeypatch, op, params):
    """Tiny temporaries split every domain into many boxes, partial rows and reduce slabs included."""
    monkeypatch.setattr("compiler.interpret.TEMP_ELEMENTS", 7)
    agree(workload_from_spec({"op": op, "params": params, "dtype": "float64"}))


def test_resnet_conv_runs_in_bounded_memory():
    """A 3x3 conv of 64 channels on 56x56 (116M multiply-adds) over strided views of its input, in
    bounded memory. Not timed: on a loaded CI machine a time bound is a coin toss."""
    spec = {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1}
    w = workload_from_spec({"op": "conv2d_nchw", "params": spec})
    inputs = w.random_inputs(np.random.default_rng(0))
    tracemalloc.start()
    try:
        (out,) = interpret(w.func, *inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, peak
    np.testing.assert_allclose(out, w.reference(*inputs)[0], rtol=1e-3, atol=1e-3)


def test_scans_of_several_states_run_in_order():
    """Two recurrences advancing together (te.scan): the time loop holds a seq of two nests."""
    m, n = 6, 3
    x = te.placeholder((m, n), "float64", "x")
    s1, s2 = te.placeholder((m, n), "float64", "s1"), te.placeholder((m, n), "float64", "s2")
    init1 = te.compute((1, n), lambda _, i: x[0, i], name="init1")
    init2 = te.compute((1, n), lambda _, i: x[0, i] * 2.0, name="init2")
    up1 = te.compute((m, n), lambda t, i: s1[t - 1, i] + s2[t - 1, i], name="up1")
    up2 = te.compute((m, n), lambda t, i: s2[t - 1, i] * 0.5 + x[t, i], name="up2")
    a, b = te.scan([init1, init2], [up1, up2], [s1, s2], name="scan")
    func = te.create_prim_func([x, a, b])
    xs = np.random.default_rng(0).standard_normal((m, n))
    want_a, want_b = np.empty((m, n)), np.empty((m, n))
    want_a[0], want_b[0] = xs[0], 2 * xs[0]
    for t in range(1, m):
        want_a[t] = want_a[t - 1] + want_b[t - 1]
        want_b[t] = want_b[t - 1] * 0.5 + xs[t]
    got_a, got_b = interpret(func, xs)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-12)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-12)


def test_spatial_loops_bound_otherwise_are_iterated():
    """A split spatial loop is no longer bound one to one: its block runs once per iteration of it."""
    w = workload_from_spec({"op": "matmul", "params": {"M": 6, "N": 4, "K": 5}, "dtype": "float64"})
    sch = Schedule(w.func)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [2, 3])
    agree(w, sch.func)


def test_a_split_reduction_is_refused():
    w = workload_from_spec({"op": "matmul", "params": {"M": 6, "N": 4, "K": 6}})
    sch = Schedule(w.func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [2, 3])
    with pytest.raises(InterpretError, match="reduce variable v_k needs a loop of its own"):
        interpret(sch.func, *w.random_inputs(np.random.default_rng(0)))


def test_a_load_out_of_bounds_is_refused_unless_a_select_discards_it():
    a = te.placeholder((5,), "float32", "A")
    guarded = te.compute((7,), lambda i: te.select(te.all(i >= 1, i < 6), a[i - 1], -1.0), name="B")
    (out,) = interpret(te.create_prim_func([a, guarded]), np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(out, [-1, 0, 1, 2, 3, 4, -1])
    bare = te.compute((7,), lambda i: a[i - 1] + 1.0, name="B")
    with pytest.raises(InterpretError, match=r"index 0 of A, v_i - 1, leaves \[0, 5\): it reaches -1"):
        interpret(te.create_prim_func([a, bare]), np.arange(5, dtype=np.float32))


def test_gathered_indices_from_data():
    """take: indices loaded from an int buffer and wrapped, a gather rather than a strided view."""
    data = te.placeholder((5, 3), "float32", "data")
    idx = te.placeholder((4,), "int64", "idx")
    out = te.compute((4, 3), lambda i, j: data[idx[i] % 5, j], name="take")
    d = np.arange(15, dtype=np.float32).reshape(5, 3)
    ids = np.array([0, -1, 7, 2])
    (got,) = interpret(te.create_prim_func([data, idx, out]), d, ids)
    np.testing.assert_array_equal(got, d[ids % 5])


def test_inputs_are_never_written():
    """A hand-made function that stores into its input writes a copy, not the caller's array."""
    a = te.placeholder((3,), "float32", "A")
    b = te.compute((3,), lambda i: a[i] * 2.0, name="B")
    func = te.create_prim_func([a, b])

    def into_a(block: Block) -> Block:
        return dataclasses.replace(block, body=BufferStore(a.buffer, block.body.value, block.body.indices))

    func = dataclasses.replace(func, body=map_blocks(func.body, into_a))
    x = np.ones(3, np.float32)
    (out,) = interpret(func, x)
    np.testing.assert_array_equal(x, 1)
    assert np.isnan(out).all()  # never written: NaN


def test_inputs_must_match_the_parameters():
    w = workload_from_spec({"op": "relu", "params": {"shape": [4]}})
    with pytest.raises(InterpretError, match=r"A: expected float32 \(4,\), got float64 \(4,\)"):
        interpret(w.func, np.zeros(4))
    with pytest.raises(InterpretError, match="has 2 parameters, given 2 inputs"):
        interpret(w.func, np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_a_predicated_block_is_refused():
    w = workload_from_spec({"op": "relu", "params": {"shape": [7]}})
    sch = Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    with pytest.raises(InterpretError, match="block B has a predicate"):
        interpret(sch.func, np.zeros(7, np.float32))
