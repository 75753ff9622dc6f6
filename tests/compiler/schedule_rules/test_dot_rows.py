"""DotRows: a matrix-vector product reading its matrix along the reduction ([out, in] weights at
batch 1) is scheduled as dot products of contiguous rows, in the default schedule and the search
space; every program computes what numpy computes, odd row counts included; products it does not
describe are left to the other rules."""

import numpy as np
import pytest

from compiler import Schedule, build, te
from compiler.schedule_rules import RuleConfig, default_schedule
from tests import machines
from tuner.search.space import rule_space


def dense(batch: int, inputs: int, outputs: int, transposed: bool = True):
    x = te.placeholder((batch, inputs), name="X")
    w = te.placeholder((outputs, inputs) if transposed else (inputs, outputs), name="W")
    k = te.reduce_axis((0, inputs), name="k")
    weight = (lambda j: w[j, k]) if transposed else (lambda j: w[k, j])
    y = te.compute((batch, outputs), lambda i, j: te.sum(x[i, k] * weight(j), axis=k), name="Y")
    return te.create_prim_func([x, w, y], name="dense")


def check(func, transposed: bool = True) -> None:
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal(b.shape).astype("float32") for b in func.params[:2])
    out = np.empty(func.params[-1].shape, "float32")
    build(func, listings=False)(x, w, out)
    np.testing.assert_allclose(out, x @ (w.T if transposed else w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("machine", [machines.AVX512, machines.AVX2])
@pytest.mark.parametrize(("inputs", "outputs"), [(1024, 1024), (512, 1001), (784, 130)])
def test_a_batch_one_product_of_rows_accumulates_vectors_along_each_row(machine, inputs, outputs):
    sch = default_schedule(dense(1, inputs, outputs), machine)
    (partial,) = [b for b in sch.func.allocs if b.name == "Y_rf"]
    assert partial.shape == (1, outputs, machine.vector_lanes("float32"))
    assert "T.vectorized" in sch.func.script() and "T.parallel" in sch.func.script()
    check(sch.func)


@pytest.mark.parametrize(
    ("batch", "inputs", "outputs", "transposed"),
    [(4, 1024, 1024, True), (1, 1024, 1024, False), (1, 1001, 1024, True), (1, 128, 10, True)],
)
def test_left_to_the_other_rules_with_rows_contiguous_columns_or_too_small(
    batch, inputs, outputs, transposed
):
    """Several rows of x, a matrix read along j, a reduction of no whole number of vectors, or a
    matrix too small to share."""
    sch = default_schedule(dense(batch, inputs, outputs, transposed), machines.AVX512)
    assert not any(b.name == "Y_rf" for b in sch.func.allocs)
    check(sch.func, transposed)


def test_the_search_samples_the_rows_per_tile_and_every_sample_computes_the_product():
    func = dense(1, 768, 300)
    space = rule_space(RuleConfig.for_target(machines.target(cores=2)))
    rows = set()
    for seed in range(6):
        sch = Schedule(func, seed=seed)
        space(sch)
        instructions = sch.trace.instructions
        assert any(i.kind == "rfactor" for i in instructions)
        (split,) = [i.decision for i in instructions if i.kind == "sample_perfect_tile" and i.args["n"] == 2]
        rows.add(int(split[-1]))
        check(sch.func)
    assert len(rows) > 1 and max(rows) <= 8
