"""AddRFactor: a reduction with fewer spatial iterations than cores is split among them by the default
schedule and in some of the search space's samples; every program computes what numpy computes;
reductions with enough spatial parallelism, or too short, are left alone."""

import numpy as np
import pytest

from compiler import Schedule, build, te
from compiler.schedule_rules import RuleConfig, default_schedule
from compiler.schedule_rules.add_rfactor import MIN_REDUCTION
from tests import machines
from tuner.search.space import rule_space


def row_sum(rows: int, length: int):
    A = te.placeholder((rows, length), name="A")
    k = te.reduce_axis((0, length), name="k")
    Y = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="Y")
    return te.create_prim_func([A, Y], name="row_sum")


def dot(length: int):
    a = te.placeholder((length,), name="a")
    b = te.placeholder((length,), name="b")
    k = te.reduce_axis((0, length), name="k")
    y = te.compute((1,), lambda _: te.max(a[k] * b[k], axis=k), name="y")
    return te.create_prim_func([a, b, y], name="dot_max")


def check(func, want) -> None:
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(b.shape).astype("float32") for b in func.params[:-1]]
    out = np.empty(func.params[-1].shape, "float32")
    build(func, listings=False)(*inputs, out)
    np.testing.assert_allclose(out, want(*inputs), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("cores", [2, 3])
def test_the_default_schedule_splits_a_batch_one_sum_among_the_cores(cores):
    func = row_sum(1, 3 * MIN_REDUCTION)
    sch = default_schedule(func, machines.target(cores=cores))
    (rf,) = [b for b in sch.func.allocs if b.name == "Y_rf"]
    assert rf.shape == (cores, 1)  # 3 * 2^15 splits in two or three
    assert f"T.parallel({cores})" in sch.func.script()
    check(sch.func, lambda a: a.sum(1))


def test_a_max_of_products_with_one_output_is_factored_too():
    sch = default_schedule(dot(MIN_REDUCTION), machines.target(cores=2))
    assert "y_rf" in {b.name for b in sch.func.allocs}
    check(sch.func, lambda a, b: np.max(a * b, keepdims=True))


@pytest.mark.parametrize(
    ("rows", "length", "cores"),
    [(2, 4 * MIN_REDUCTION, 2), (1, MIN_REDUCTION // 2, 2), (1, 4 * MIN_REDUCTION, 1), (1, 65521, 2)],
)
def test_left_alone_with_enough_rows_a_short_or_prime_reduction_or_one_core(rows, length, cores):
    sch = default_schedule(row_sum(rows, length), machines.target(cores=cores))
    assert not any(b.name.endswith("_rf") for b in sch.func.allocs)


def test_the_search_space_samples_both_ways_and_each_computes_the_sum():
    func = row_sum(1, MIN_REDUCTION)
    space = rule_space(RuleConfig.for_target(machines.target(cores=2)))
    factored = []
    for seed in range(8):
        sch = Schedule(func, seed=seed)
        space(sch)
        factored.append(any(i.kind == "rfactor" for i in sch.trace.instructions))
        check(sch.func, lambda a: a.sum(1))
    assert any(factored) and not all(factored)
