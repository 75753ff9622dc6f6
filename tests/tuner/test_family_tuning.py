"""A shape family tuned at a few sizes under one budget: the tasks of all of them scheduled together;
one model for the range runs each kernel's tuned traces as the schedules of the buckets of sizes
ending at the tuned sizes (a family one module cannot describe: the tuned sizes run their records,
every other size the default schedules); outputs checked against numpy at tuned, untuned and extreme
sizes."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from compiler.graph import (
    CompiledModel,
    DimRange,
    DynamicModel,
    GraphBuilder,
    InputSignature,
    Module,
    RangeModel,
    ShapeFamily,
)
from tuner import build_model, tune_model
from tuner.model_tuning import tasks_of

RNG = np.random.default_rng(0)
WEIGHT = RNG.standard_normal((32, 48)).astype("float32")
BIAS = RNG.standard_normal(48).astype("float32")


def dense_relu(values: Mapping[str, int]) -> Module:
    b = GraphBuilder()
    x = b.input("x", [values["rows"], 32], "float32")
    y = b.call("matmul", [x, b.constant("weight", WEIGHT)])
    return b.module([b.call("relu", [b.call("add", [y, b.constant("bias", BIAS)])])])


FAMILY = ShapeFamily((InputSignature("x", ("rows", 32), "float32"),), (DimRange("rows", 1, 96),), dense_relu)


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ WEIGHT + BIAS, 0)


def test_tasks_of_a_family_are_its_sizes_tasks_merged() -> None:
    one = tasks_of(FAMILY, [{"rows": 16}])
    both = tasks_of(FAMILY, [{"rows": 16}, {"rows": 16}, {"rows": 64}])
    assert len(both) == 2 * len(one)
    assert sum(t.weight for t in both) == 3 * sum(t.weight for t in one)


def test_a_family_tuned_at_two_sizes_runs_them_tuned_and_every_other_size(tmp_path) -> None:
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    result = tune_model(FAMILY, trials=8, database=database, sizes=[{"rows": 16}, {"rows": 64}], batch_size=4)
    assert result.sizes == [{"rows": 16}, {"rows": 64}]
    assert all(t.best_secs is not None for t in result.tasks)
    model = result.model
    assert isinstance(model, CompiledModel)
    assert {s.origin for s in model.sources} == {"given"}  # each kernel's tuned buckets
    for rows in (16, 40, 1, 96, 64):
        x = RNG.standard_normal((rows, 32)).astype("float32")
        np.testing.assert_allclose(model(x)[0], expected(x), rtol=1e-4, atol=1e-4)


def batched_dense_relu(values: Mapping[str, int]) -> Module:
    """The dense layer over a batch of sequences, flattened to batch * seq rows and back."""
    b = GraphBuilder()
    batch, seq = values["batch"], values["seq"]
    x = b.input("x", [batch, seq, 32], "float32")
    rows = b.call("reshape", [x], shape=[batch * seq, 32])
    y = b.call(
        "relu",
        [b.call("add", [b.call("matmul", [rows, b.constant("weight", WEIGHT)]), b.constant("bias", BIAS)])],
    )
    return b.module([b.call("reshape", [y], shape=[batch, seq, 48])])


def test_a_family_with_two_ranges_tuned_runs_its_tuned_traces_by_each_kernels_first_size(tmp_path) -> None:
    """Batch and sequence both ranged: the kernels bucket by their first size (the flattened rows'
    by the batch), and the traces tuned at the tuned bindings replay in the buckets of that size."""
    family = ShapeFamily(
        (InputSignature("x", ("batch", "seq", 32), "float32"),),
        (DimRange("batch", 1, 8), DimRange("seq", 1, 24)),
        batched_dense_relu,
    )
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    sizes = [{"batch": 2, "seq": 8}, {"batch": 8, "seq": 24}]
    result = tune_model(family, trials=8, database=database, sizes=sizes, batch_size=4)
    model = result.model
    assert isinstance(model, CompiledModel)
    assert "given" in {s.origin for s in model.sources}
    for batch, seq in [(2, 8), (8, 24), (1, 1), (5, 13), (8, 1), (1, 24)]:
        x = RNG.standard_normal((batch, seq, 32)).astype("float32")
        want = expected(x.reshape(-1, 32)).reshape(batch, seq, 48)
        np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-4)


def test_a_family_one_module_cannot_describe_runs_its_tuned_sizes_records(tmp_path) -> None:
    family = ShapeFamily(
        (InputSignature("x", ("rows", 32), "float32"),), (DimRange("rows", 0, 96),), dense_relu
    )  # 0 rows: no module for the range
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    result = tune_model(family, trials=8, database=database, sizes=[{"rows": 16}, {"rows": 64}], batch_size=4)
    model = result.model
    assert isinstance(model, DynamicModel)
    for rows in (16, 40, 1, 64):
        x = RNG.standard_normal((rows, 32)).astype("float32")
        np.testing.assert_allclose(model(x)[0], expected(x), rtol=1e-4, atol=1e-4)
        origins = {s.origin for s in model.compile(rows=rows).sources}
        assert origins == ({"given"} if rows in (16, 64) else {"default"})


def scaled(values: Mapping[str, int]) -> Module:
    """y = x * s, x (rows, 4), s a rank-0 input."""
    b = GraphBuilder()
    x = b.input("x", [values["rows"], 4], "float32")
    s = b.input("s", [], "float32")
    return b.module([b.call("multiply", [x, s])])


def test_a_family_with_a_rank_0_input_builds_from_a_database(tmp_path) -> None:
    family = ShapeFamily(
        (InputSignature("x", ("rows", 4), "float32"), InputSignature("s", (), "float32")),
        (DimRange("rows", 1, 8),),
        scaled,
    )
    model = build_model(family, database=f"sqlite:///{tmp_path / 'empty.db'}")
    x = RNG.standard_normal((3, 4)).astype("float32")
    np.testing.assert_allclose(model(x, np.float32(2.5))[0], x * 2.5, rtol=1e-6)


def test_a_tuned_size_whose_convs_differ_runs_its_own_tuned_model(tmp_path) -> None:
    """The conv family of tests/compiler/graph/test_range_model.py: batch 1 runs its conv direct,
    every larger batch by Winograd. Tuned at batches 1 and 8, batch 1 runs its own static model with
    its tuned record; built for tuned sizes without batch 1, every batch runs the range's module."""
    from tests.compiler.graph.test_range_model import FAMILY as CONVS
    from tests.compiler.graph.test_range_model import reference

    database = f"sqlite:///{tmp_path / 'tune.db'}"
    result = tune_model(CONVS, trials=4, database=database, sizes=[{"batch": 1}, {"batch": 8}], batch_size=4)
    model = result.model
    assert isinstance(model, RangeModel)
    alone = model.model_at(batch=1)
    assert alone is not model and {s.origin for s in alone.sources} == {"given"}
    for batch in (1, 2, 8):
        x = RNG.standard_normal((batch, 32, 7, 7)).astype("float32")
        np.testing.assert_allclose(model(x)[0], reference(x), rtol=1e-4, atol=1e-4)
    untuned_one = build_model(CONVS, database=database, sizes=[{"batch": 3}, {"batch": 8}])
    assert type(untuned_one) is CompiledModel
