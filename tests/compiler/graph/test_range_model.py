"""A module for a range runs the sizes whose graph differs from the range's on their own static
models (`compiler.graph.range_model`): a 3x3 conv of 32 channels on a 7x7 image has 16 output tiles
per image, too few for Winograd at batch 1 and enough from batch 2."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
import torch

from compiler import graph
from compiler.build import ShapeError
from compiler.graph import GraphBuilder, InputSignature, Module, RangeModel, ShapeFamily
from compiler.graph.shape_family import DimRange
from compiler.graph.symbolic import range_modules

WEIGHT = (np.random.default_rng(0).standard_normal((32, 32, 3, 3)) * 0.1).astype("float32")


def conv_at(values: Mapping[str, int]) -> Module:
    b = GraphBuilder()
    x = b.input("x", (values["batch"], 32, 7, 7), "float32")
    out = b.call(
        "conv2d",
        [x, b.constant("w", WEIGHT)],
        strides=(1, 1),
        padding=(1, 1, 1, 1),
        dilation=(1, 1),
        groups=1,
    )
    return b.module([b.call("relu", [out])])


FAMILY = ShapeFamily(
    (InputSignature("x", ("batch", 32, 7, 7), "float32"),), (DimRange("batch", 1, 8),), conv_at
)


def ops(module: Module) -> list[str]:
    return [op for n in module.nodes() if isinstance(n, graph.CallTIR) for op in n.ops]


def reference(x: np.ndarray) -> np.ndarray:
    out = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(WEIGHT), padding=1)
    return torch.relu(out).numpy()


def test_a_size_whose_graph_differs_is_a_static_module_of_its_own() -> None:
    ranged = range_modules(FAMILY)
    assert ops(ranged.module) == ["conv2d_winograd", "relu"]
    assert list(ranged.apart) == [(("batch", 1),)]
    assert ops(ranged.apart[(("batch", 1),)]) == ["conv2d_kblock", "relu"]


def test_sizes_asked_for_are_compared_too() -> None:
    # 2 to 8: every size is Winograd, and none is apart, the sizes asked for included.
    narrowed = FAMILY.narrowed({"batch": (2, 8)})
    assert isinstance(narrowed, ShapeFamily)
    assert range_modules(narrowed, [{"batch": 4}]).apart == {}
    assert list(range_modules(FAMILY, [{"batch": 4}]).apart) == [(("batch", 1),)]


def test_the_model_runs_its_static_size_there_and_the_range_elsewhere() -> None:
    model = graph.build(FAMILY)
    assert isinstance(model, RangeModel)
    alone = model.model_at(batch=1)
    assert alone is not model and ops(alone.module) == ["conv2d_kblock", "relu"]
    assert model.model_at(batch=3) is model
    for batch in (1, 3, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 32, 7, 7)).astype("float32")
        np.testing.assert_allclose(model(x)[0], reference(x), rtol=1e-4, atol=1e-4)
        assert len(model.profile(x, repeat=1, min_secs=0.0)) == 1
    with pytest.raises(ShapeError, match=r"dimension 0 \(batch\) is 9, outside the declared range"):
        model(np.zeros((9, 32, 7, 7), "float32"))


def test_the_range_module_alone_computes_the_static_size_right() -> None:
    """The size run apart is the range's too (the exported library runs it so)."""
    model = graph.build(range_modules(FAMILY).module)
    x = np.random.default_rng(0).standard_normal((1, 32, 7, 7)).astype("float32")
    np.testing.assert_allclose(model(x)[0], reference(x), rtol=1e-4, atol=1e-4)
