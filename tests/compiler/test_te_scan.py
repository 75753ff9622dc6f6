"""Multi-stage scans (TVM's scan tutorial): stages between the state and the update are computed row
by row inside the time loop, may be moved under the update's tiles, and match numpy."""

import numpy as np
import pytest

from compiler import Schedule, ScheduleError, build, te
from compiler.te import TensorError


def rnn(steps: int = 7, width: int = 13):
    """h[t] = tanh(h[t-1] @ W + X[t]): a reduction stage (the matmul row) and an elementwise update."""
    X = te.placeholder((steps, width), name="X")
    W = te.placeholder((width, width), name="W")
    h = te.placeholder((steps, width), name="h")
    init = te.compute((1, width), lambda _, i: te.tanh(X[0, i]), name="init")
    k = te.reduce_axis((0, width), name="k")
    mm = te.compute((steps, width), lambda t, i: te.sum(h[t - 1, k] * W[k, i], axis=k), name="mm")
    update = te.compute((steps, width), lambda t, i: te.tanh(mm[t, i] + X[t, i]), name="update")
    out = te.scan(init, update, h, inputs=[X], name="hidden")
    return te.create_prim_func([X, W, out], name="rnn")


def rnn_numpy(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    out[0] = np.tanh(x[0])
    for t in range(1, len(x)):
        out[t] = np.tanh(out[t - 1] @ w + x[t])
    return out


def test_a_scan_with_a_reduction_stage_matches_numpy_and_its_stage_moves_under_the_update():
    func = rnn()
    assert [b.name for b in func.allocs] == ["mm"]
    sch = Schedule(func, seed=0)
    _, i = sch.get_loops(sch.get_block("hidden"))
    outer, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("mm"), outer)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 13)).astype("float32")
    w = (rng.standard_normal((13, 13)) / 4).astype("float32")
    for program in (func, sch.func):
        got = np.empty_like(x)
        build(program)(x, w, got)
        np.testing.assert_allclose(got, rnn_numpy(x, w), rtol=1e-5, atol=1e-6)
    # Under the tile, the stage computes the tile's four columns of this step's row, not every row.
    text = sch.func.script()
    assert text.count("range(6)") == 1 and "for ax0 in range(4):" in text


def test_an_update_that_reads_its_own_state_does_not_move():
    X = te.placeholder((6, 4), name="X")
    h = te.placeholder((6, 4), name="h")
    doubled = te.compute((6, 4), lambda t, i: X[t, i] * 2.0, name="doubled")
    init = te.compute((1, 4), lambda _, i: X[0, i], name="init")
    update = te.compute((6, 4), lambda t, i: h[t - 1, i] + doubled[t, i], name="update")
    sch = Schedule(te.create_prim_func([X, te.scan(init, update, h, inputs=[X], name="s")]), seed=0)
    _, i = sch.get_loops(sch.get_block("doubled"))
    with pytest.raises(ScheduleError, match="reads its own state"):
        sch.reverse_compute_at(sch.get_block("s"), i)


def test_a_stage_with_other_rows_than_the_state_is_refused():
    X = te.placeholder((6, 4), name="X")
    h = te.placeholder((6, 4), name="h")
    init = te.compute((1, 4), lambda _, i: X[0, i], name="init")
    short = te.compute((5, 4), lambda t, i: h[t, i] * 2.0, name="short")
    update = te.compute((6, 4), lambda t, i: short[t - 1, i] + X[t, i], name="update")
    out = te.scan(init, update, h, inputs=[X], name="s")
    with pytest.raises(TensorError, match="stage short must have the states' 6 rows"):
        te.create_prim_func([X, out])
