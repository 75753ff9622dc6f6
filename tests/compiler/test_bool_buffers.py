"""Bool buffers: a bool is a byte in memory (as numpy keeps it) and an i1 in values. Inputs, outputs
and intermediates of bool, compared and selected on, scalar and vectorized (odd widths: masked and
split loads), strided, agree with numpy and with the PrimFunc interpreter."""

import numpy as np
import pytest

from compiler import Schedule, Target, build, te
from compiler.interpret import interpret
from compiler.schedule_rules import default_schedule

RNG = np.random.default_rng(7)


def masks(n: int):
    """x[3, n] int64 and m[n] bool in; below = x < 2 (a bool intermediate, kept), keep = below and m
    (bool out), y = keep ? x : -x (int64 out), and every other element of `below` (strided)."""
    x = te.placeholder((3, n), "int64", "x")
    m = te.placeholder((n,), "bool", "m")
    below = te.compute((3, n), lambda i, j: x[i, j] < 2, name="below")
    keep = te.compute((3, n), lambda i, j: te.all(below[i, j], m[j]), name="keep")
    y = te.compute((3, n), lambda i, j: te.select(keep[i, j], x[i, j], -x[i, j]), name="y")
    half = te.compute((3, n // 2), lambda i, j: below[i, 2 * j], name="half")
    return te.create_prim_func([x, m, keep, y, half], name="masks")


def reference(x: np.ndarray, m: np.ndarray) -> list[np.ndarray]:
    below = x < 2
    keep = below & m
    return [keep, np.where(keep, x, -x), below[:, : 2 * (x.shape[1] // 2) : 2]]


def vectorized(func):
    """Every block's inner loop vectorized, nothing inlined: `below` stays a bool buffer."""
    sch = Schedule(func)
    for name in ("below", "keep", "y", "half"):
        sch.vectorize(sch.get_loops(sch.get_block(name))[-1])
    return sch.func


TARGETS = {"host": Target.host(), "avx2": Target.host().emulated("znver3")}  # AVX2: split odd loads


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("n", [2, 7, 16, 37, 64])
@pytest.mark.parametrize("schedule", ["plain", "vectorized", "default"])
def test_bool_inputs_intermediates_and_outputs_compute_what_numpy_does(n: int, schedule: str, target: str):
    func = masks(n)
    program = {
        "plain": lambda f: f,
        "vectorized": vectorized,
        "default": lambda f: default_schedule(f, TARGETS[target]).func,
    }[schedule](func)
    x = RNG.integers(-4, 6, (3, n)).astype(np.int64)
    m = RNG.random(n) < 0.5
    outs = [np.ones((3, n), bool), np.zeros((3, n), np.int64), np.ones((3, n // 2), bool)]
    build(program, TARGETS[target], listings=False)(x, m, *outs)
    for got, want in zip(outs, reference(x, m)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    for got, want in zip(interpret(func, x, m), reference(x, m)):
        np.testing.assert_array_equal(got, want)


def test_a_bool_array_is_checked_as_bool_by_the_entry():
    func = masks(8)
    kernel = build(func, Target.host(), listings=False)
    x = np.zeros((3, 8), np.int64)
    outs = [np.zeros((3, 8), bool), np.zeros((3, 8), np.int64), np.zeros((3, 4), bool)]
    with pytest.raises(TypeError, match="m"):
        kernel(x, np.zeros(8, np.int8), *outs)  # bytes, not bools
