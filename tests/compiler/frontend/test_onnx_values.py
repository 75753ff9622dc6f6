"""Model inputs whose values set shapes (Resize's scales, a Reduce's axes, Reshape's shape given as
inputs): from_onnx gives a ValueFamily, and the compiled model imports and compiles at each value a
call brings, as ONNX Runtime computes at each call."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from compiler import graph
from compiler.build import ShapeError
from compiler.frontend import FrontendError, from_onnx, require_static
from compiler.graph import GraphError, ValueFamily, ValueKeyedModel
from tests.compiler.frontend.test_onnx import OnnxCase, make_model, node

RNG = np.random.default_rng(7)


def reduce_then_reshape() -> bytes:
    """ReduceSum over `axes` (an input), then a Reshape to `shape` (another input): the second is
    found only once the first is bound, so the compiled model learns it on its first call."""
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
        helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
    ]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", "columns"])
    nodes = [node("ReduceSum", ["x", "axes"], ["r"], keepdims=1), node("Reshape", ["r", "shape"])]
    g = helper.make_graph(nodes, "values", inputs, [y])
    return helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13)], ir_version=10
    ).SerializeToString()


def ort_run(model: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_values_that_set_shapes_make_a_family_compiled_per_value() -> None:
    model = reduce_then_reshape()
    family = from_onnx(model)
    assert isinstance(family, ValueFamily) and family.value_inputs == ("axes",)
    compiled = graph.build(family)
    assert isinstance(compiled, ValueKeyedModel)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    for axes, shape in [([1], [4, 2]), ([2], [3, 2]), ([-1], [2, 3]), ([1], [8, 1])]:
        feeds = {"x": x, "axes": np.array(axes, np.int64), "shape": np.array(shape, np.int64)}
        (got,) = compiled(*feeds.values())
        (want,) = ort_run(model, feeds)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert compiled.value_inputs == ("axes", "shape")  # found on the first call
    assert len(compiled._kept.models) == 4


def test_a_value_family_checks_each_input_before_anything_runs() -> None:
    compiled = graph.build(from_onnx(reduce_then_reshape()))
    x = np.zeros((2, 3, 4), np.float32)
    axes, shape = np.array([1], np.int64), np.array([4, 2], np.int64)
    with pytest.raises(ShapeError, match="takes 3 inputs, 2 given"):
        compiled(x, axes)
    with pytest.raises(ShapeError, match=r"input 'axes': got \(1,\) int32"):
        compiled(x, axes.astype(np.int32), shape)
    with pytest.raises(ShapeError, match=r"input 'x': got \(2, 4, 3\)"):
        compiled(x.reshape(2, 4, 3), axes, shape)
    with pytest.raises(GraphError, match="Reshape"):  # a shape that does not fit: the import refuses it
        compiled(x, axes, np.array([5, 5], np.int64))


def test_the_constants_are_the_values_given_not_the_callers_arrays() -> None:
    family = from_onnx(reduce_then_reshape())
    assert isinstance(family, ValueFamily)
    axes, shape = np.array([2], np.int64), np.array([6, 1], np.int64)
    module = family.specialize({"axes": axes, "shape": shape})
    axes[0], shape[:] = 1, (4, 2)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    (got,) = graph.build(module)(x)
    np.testing.assert_allclose(got, x.sum(axis=2).reshape(6, 1), rtol=1e-5)
    with pytest.raises(ShapeError, match="the inputs that set shapes are"):
        family.specialize({"shape": shape})


def test_users_of_static_models_refuse_a_value_family_by_its_inputs() -> None:
    family = from_onnx(reduce_then_reshape())
    with pytest.raises(FrontendError, match=r"the values of inputs 'axes' set shapes .*specialize"):
        require_static(family, "the service")


def test_a_data_tensor_that_would_set_a_shape_is_refused() -> None:
    """More than MAX_VALUE_ELEMENTS values: a shape computed from data, which no specialization fits."""
    case = OnnxCase(
        [node("Cast", ["x"], ["i"], to=TensorProto.INT64), node("ReduceMax", ["i"], ["m"], keepdims=0)]
        + [node("Unsqueeze", ["m", "zero"], ["n"]), node("ConstantOfShape", ["n"])],
        {"x": (9, 9)},
        {"zero": np.array([0], np.int64)},
        declared={"y": (1,)},
    )
    with pytest.raises(GraphError, match="must be a compile-time constant") as e:
        from_onnx(make_model(case))
    assert "whose values" not in str(e.value)


def test_value_inputs_with_ranged_dimensions_are_refused_at_the_binding() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])
    g = helper.make_graph([node("ReduceSum", ["x", "axes"], keepdims=1)], "g", [x, axes], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    family = from_onnx(model, dims={"n": (1, 8)})
    assert isinstance(family, graph.ShapeFamily)
    with pytest.raises(
        GraphError, match=r"values of inputs \['axes'\] set shapes.*give every dimension a size"
    ):
        family.specialize({"n": 3})
    static = from_onnx(model, dims={"n": 3})
    assert isinstance(static, ValueFamily)


def test_an_operator_whose_outputs_are_empty_computes_nothing() -> None:
    """Trilu of an empty input by a k given at run time: ONNX's shape inference makes its output
    empty, so nothing is computed and k is never read; the model returns the empty tensor."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 0, 5])
    k = helper.make_tensor_value_info("k", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 0, 5])
    g = helper.make_graph([node("Trilu", ["x", "k"])], "g", [x, k], [y])
    module = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=10))
    assert isinstance(module, graph.Module)
    (got,) = graph.build(module)(np.zeros((3, 0, 5), np.float32), np.array(2, np.int64))
    assert got.shape == (3, 0, 5) and got.dtype == np.float32


def test_an_empty_tensor_reshaped_by_an_input_folds_at_its_value() -> None:
    """Reshape of an empty input to a shape given at run time: its output's shape is the value's, so
    the node folds once that value is known."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3, 4])
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])
    g = helper.make_graph([node("Reshape", ["x", "shape"], allowzero=1)], "g", [x, shape], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=10)
    family = from_onnx(model)
    assert isinstance(family, ValueFamily) and family.value_inputs == ("shape",)
    (got,) = graph.build(family)(np.zeros((0, 3, 4), np.float32), np.array([3, 4, 0], np.int64))
    assert got.shape == (3, 4, 0)
