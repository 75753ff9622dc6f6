"""ShapeFamily and DynamicModel: sizes read off a call's arrays and checked against the declared
shapes and ranges (every refusal names the input, the dimension and the range), bindings spread over
a range, narrowing, and one compiled model per binding, kept up to a capacity."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pytest

from compiler.build import ShapeError
from compiler.graph import (
    CompiledModel,
    DimRange,
    DynamicModel,
    GraphBuilder,
    InputSignature,
    Module,
    ShapeFamily,
    build,
)


def scaled_rows(values: Mapping[str, int]) -> Module:
    """y = relu(x) * 2 + mask, x (batch, seq, 4) float32, mask (batch, seq, 1) float32."""
    b = GraphBuilder()
    x = b.input("x", [values["batch"], values["seq"], 4], "float32")
    mask = b.input("mask", [values["batch"], values["seq"], 1], "float32")
    two = b.constant("two", np.array(2.0, "float32"))
    y = b.call("add", [b.call("multiply", [b.call("relu", [x]), two]), mask])
    return b.module([y])


FAMILY = ShapeFamily(
    (
        InputSignature("x", ("batch", "seq", 4), "float32"),
        InputSignature("mask", ("batch", "seq", 1), "float32"),
    ),
    (DimRange("batch", 1, 4), DimRange("seq", 1, 300)),
    scaled_rows,
)


def test_bind_reads_each_dimension_once_and_checks_the_rest() -> None:
    assert FAMILY.bind([(2, 17, 4), (2, 17, 1)]) == {"batch": 2, "seq": 17}
    refusals = {
        "outside the declared range seq in [1, 300]": [(2, 301, 4), (2, 301, 1)],
        "input 'mask': dimension 1 (seq) is 16, but 17 in input 'x'": [(2, 17, 4), (2, 16, 1)],
        "input 'x': dimension 2 is 5, the model takes 4": [(2, 17, 5), (2, 17, 1)],
        "the model takes 2 inputs, 1 given": [(2, 17, 4)],
        "input 'x': got shape (2, 17)": [(2, 17), (2, 17, 1)],
        "dimension 0 (batch) is 0, outside": [(0, 17, 4), (0, 17, 1)],
    }
    for message, shapes in refusals.items():
        with pytest.raises(ShapeError, match=re.escape(message)):
            FAMILY.bind(shapes)


def test_specialize_refuses_missing_unknown_and_out_of_range_sizes() -> None:
    assert FAMILY.specialize({"batch": 1, "seq": 300}).inputs[0].type.shape == (1, 300, 4)
    with pytest.raises(ShapeError, match="ranged dimensions are"):
        FAMILY.specialize({"batch": 1})
    with pytest.raises(ShapeError, match="unknown"):
        FAMILY.specialize({"batch": 1, "seq": 2, "heads": 3})
    with pytest.raises(ShapeError, match=r"seq in \[1, 300\]"):
        FAMILY.specialize({"batch": 1, "seq": 301})
    with pytest.raises(ValueError, match="not a range of sizes"):
        DimRange("n", 5, 4)


def test_spread_covers_both_ends_without_repeats() -> None:
    assert FAMILY.spread(3) == [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 17}, {"batch": 4, "seq": 300}]
    assert FAMILY.spread(1) == [{"batch": 4, "seq": 300}]
    narrow = ShapeFamily(FAMILY.inputs[:1], (DimRange("batch", 1, 2), DimRange("seq", 3, 3)), scaled_rows)
    assert len(narrow.spread(10)) == 2


def test_narrowed_fixes_or_narrows_inside_the_declared_ranges() -> None:
    narrowed = FAMILY.narrowed({"batch": 2, "seq": (8, 64)})
    assert isinstance(narrowed, ShapeFamily)
    assert narrowed.dims == (DimRange("seq", 8, 64),)
    assert narrowed.inputs[0].shape == (2, "seq", 4)
    assert narrowed.specialize({"seq": 9}).inputs[1].type.shape == (2, 9, 1)
    fixed = FAMILY.narrowed({"batch": 3, "seq": 5})
    assert isinstance(fixed, Module) and fixed.inputs[0].type.shape == (3, 5, 4)
    with pytest.raises(ShapeError, match="not inside the declared range"):
        FAMILY.narrowed({"seq": (1, 301)})
    with pytest.raises(ShapeError, match="no ranged dimension is named"):
        FAMILY.narrowed({"length": 3})
    for bad in ((1, 2, 3), True, "5"):
        with pytest.raises(ShapeError, match="neither a size"):
            FAMILY.narrowed({"seq": bad})  # type: ignore[dict-item]


def test_a_dynamic_model_runs_every_size_and_keeps_the_recent_ones() -> None:
    built: list[tuple[int, ...]] = []

    def counting_build(module: Module):
        built.append(module.inputs[0].type.shape)
        return build(module)

    model = DynamicModel(FAMILY, counting_build, capacity=2)
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 1), (3, 299), (1, 1), (4, 300), (3, 299)]:
        x = rng.standard_normal((batch, seq, 4)).astype("float32")
        mask = rng.standard_normal((batch, seq, 1)).astype("float32")
        (y,) = model(x, mask)
        np.testing.assert_allclose(y, np.maximum(x, 0) * 2 + mask, rtol=1e-6)
    # (1, 1) was kept across one other binding; (3, 299) was evicted by (1, 1) and (4, 300).
    assert built == [(1, 1, 4), (3, 299, 4), (4, 300, 4), (3, 299, 4)]
    assert model.compiled == [{"batch": 4, "seq": 300}, {"batch": 3, "seq": 299}]
    with pytest.raises(ShapeError, match="outside the declared range"):
        model(np.zeros((5, 2, 4), "float32"), np.zeros((5, 2, 1), "float32"))
    holding_zero = ShapeFamily(FAMILY.inputs, (DimRange("batch", 0, 4), FAMILY.range("seq")), scaled_rows)
    with pytest.warns(UserWarning, match=r"batch in \[0, 4\] holds 0"):
        assert isinstance(build(holding_zero), DynamicModel)
    with pytest.raises(ValueError, match="capacity"):
        DynamicModel(FAMILY, build, capacity=0)


def test_a_batch_range_with_two_primes_is_one_module_for_every_size() -> None:
    """Batch 1..4 holds two primes below its end: its sizes compared are 2, 3 and 4, and every
    batch runs the one module for the ranges."""
    model = build(FAMILY)
    assert isinstance(model, CompiledModel) and not isinstance(model, DynamicModel)
    assert str(model.module.inputs[0].type) == "Tensor((batch, seq, 4), 'float32')"
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 1), (2, 5), (3, 299), (4, 300), (1, 300)]:
        x = rng.standard_normal((batch, seq, 4)).astype("float32")
        mask = rng.standard_normal((batch, seq, 1)).astype("float32")
        np.testing.assert_allclose(model(x, mask)[0], np.maximum(x, 0) * 2 + mask, rtol=1e-6)
