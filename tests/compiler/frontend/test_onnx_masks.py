"""ONNX models that compute with integer and boolean tensors at run time (token ids, attention masks,
comparisons, Where, Cast), built and run against ONNX Runtime; and the same operators folded at
import when their inputs are known, by ONNX's own reference implementation."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import graph
from compiler.frontend import from_onnx
from compiler.graph import Call, CallTIR, GraphError

rng = np.random.default_rng(3)
ONNX_TYPES = {
    "float32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "bool": TensorProto.BOOL,
}


def model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[tuple[int, ...], str]],
    outputs: dict[str, str],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 21,
) -> bytes:
    graph_proto = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, ONNX_TYPES[d], s) for n, (s, d) in inputs.items()],
        [helper.make_tensor_value_info(o, ONNX_TYPES[d], None) for o, d in outputs.items()],
        initializer=[numpy_helper.from_array(v, n) for n, v in (initializers or {}).items()],
    )
    proto = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(proto).SerializeToString()  # the outputs' shapes


def random_feed(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-3, 4, shape).astype(dtype)
    return rng.integers(-3, 4, shape).astype(dtype) + np.where(rng.random(shape) < 0.5, 0.5, 0).astype(dtype)


def check_compiled_against_ort(data: bytes, inputs: dict[str, tuple[tuple[int, ...], str]]) -> graph.Module:
    feeds = {n: random_feed(s, d) for n, (s, d) in inputs.items()}
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    module = from_onnx(data)
    got = graph.build(module)(*(feeds[i.name] for i in module.inputs))
    for g, e in zip(got, expected, strict=True):
        assert (g.dtype, g.shape) == (e.dtype, e.shape)
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, e)
    return module


def node(op: str, inputs: list[str], output: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, inputs, [output], **attrs)


@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
def test_comparisons_at_run_time(op: str, dtype: str) -> None:
    inputs = {"a": ((3, 1, 7), dtype), "b": ((5, 1), dtype)}
    check_compiled_against_ort(model([node(op, ["a", "b"], "y")], inputs, {"y": "bool"}), inputs)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic_at_run_time(op: str) -> None:
    inputs = {"a": ((2, 1, 9), "bool"), "b": ((4, 1), "bool")}
    nodes = [node(op, ["a", "b"], "c"), node("Not", ["c"], "y")]
    check_compiled_against_ort(model(nodes, inputs, {"y": "bool", "c": "bool"}), inputs)


def test_where_and_casts_build_an_additive_attention_mask() -> None:
    """The pattern of Hugging Face's exports: an int64 mask cast to bool, inverted, and a large
    negative number where it is false, added to the scores."""
    inputs = {"mask": ((2, 13), "int64"), "scores": ((2, 3, 13, 13), "float32")}
    nodes = [
        node("Cast", ["mask"], "m", to=TensorProto.BOOL),
        node("Not", ["m"], "off"),
        node("Unsqueeze", ["off", "axes"], "off4"),
        node("Where", ["off4", "neg", "zero"], "additive"),
        node("Add", ["scores", "additive"], "y"),
        node("Cast", ["mask"], "mf", to=TensorProto.FLOAT),
        node("ReduceSum", ["mf", "axis1"], "count", keepdims=0),
    ]
    consts = {
        "axes": np.array([1, 2], np.int64),
        "neg": np.array(-3.4e38, np.float32),
        "zero": np.array(0.0, np.float32),
        "axis1": np.array([1], np.int64),
    }
    check_compiled_against_ort(model(nodes, inputs, {"y": "float32", "count": "float32"}, consts), inputs)


def test_token_ids_reshaped_and_offset_before_the_lookup() -> None:
    """A reshape and arithmetic on input_ids before the embedding Gather (refused before)."""
    inputs = {"ids": ((2, 5), "int64")}
    nodes = [
        node("Reshape", ["ids", "flat"], "f"),
        node("Add", ["f", "three"], "shifted"),
        node("Gather", ["table", "shifted"], "y"),
        node("Mul", ["ids", "ids"], "squared"),
    ]
    consts = {
        "flat": np.array([-1], np.int64),
        "three": np.array(3, np.int64),
        "table": rng.standard_normal((8, 4)).astype("float32"),
    }
    check_compiled_against_ort(model(nodes, inputs, {"y": "float32", "squared": "int64"}, consts), inputs)


@pytest.mark.parametrize(
    ("src", "dst"),
    [("float32", "int64"), ("int64", "float32"), ("int32", "bool"), ("bool", "int32"), ("float32", "bool")],
)
def test_run_time_casts(src: str, dst: str) -> None:
    inputs = {"x": ((3, 7), src)}
    nodes = [node("Cast", ["x"], "y", to=ONNX_TYPES[dst]), node("CastLike", ["x", "like"], "z")]
    consts = {"like": np.zeros(1, dst)}
    check_compiled_against_ort(model(nodes, inputs, {"y": dst, "z": dst}, consts), inputs)


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_cumsum_at_run_time(dtype: str, exclusive: int, reverse: int) -> None:
    inputs = {"x": ((2, 9, 3), dtype)}
    nodes = [node("CumSum", ["x", "axis"], "y", exclusive=exclusive, reverse=reverse)]
    consts = {"axis": np.array(-2, np.int64)}
    check_compiled_against_ort(model(nodes, inputs, {"y": dtype}, consts), inputs)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_at_run_time(axis: int) -> None:
    """Negative indices count from the end; the indices' shape is the data's, 2 along the axis."""
    shape = [4, 5, 3]
    inputs = {"x": (tuple(shape), "float32")}
    shape[axis] = 2
    indices = rng.integers(-3, 3, shape)
    nodes = [node("GatherElements", ["x", "i"], "y", axis=axis)]
    check_compiled_against_ort(model(nodes, inputs, {"y": "float32"}, {"i": indices}), inputs)


def test_gather_elements_with_run_time_indices() -> None:
    """RoBERTa's position ids: indices computed from the token ids."""
    inputs = {"ids": ((2, 6), "int64")}
    nodes = [
        node("Abs", ["ids"], "a"),
        node("GatherElements", ["table", "a"], "y", axis=1),
    ]
    table = rng.standard_normal((2, 9)).astype("float32")
    check_compiled_against_ort(model(nodes, inputs, {"y": "float32"}, {"table": table}), inputs)


@pytest.mark.parametrize(("indices", "data"), [((4, 2), (3, 5, 2)), ((2, 3, 1), (3, 5)), ((2,), (3, 5, 7))])
def test_gather_nd_at_run_time(indices: tuple[int, ...], data: tuple[int, ...]) -> None:
    """Index tuples in range (ONNX Runtime refuses others) and negative ones, counted from the end."""
    proto = model(
        [node("GatherND", ["x", "i"], "y")],
        {"x": (data, "float32"), "i": (indices, "int64")},
        {"y": "float32"},
    )
    x = rng.standard_normal(data).astype("float32")
    i = rng.integers(-3, 3, indices).astype("int64")
    want = ort.InferenceSession(proto, providers=["CPUExecutionProvider"]).run(None, {"x": x, "i": i})
    (got,) = graph.build(from_onnx(proto))(x, i)
    np.testing.assert_array_equal(got, want[0])


@pytest.mark.parametrize(("upper", "k"), [(1, 0), (0, 0), (1, 2), (0, -1)])
def test_trilu_at_run_time(upper: int, k: int) -> None:
    inputs = {"x": ((2, 5, 7), "float32")}
    nodes = [node("Trilu", ["x", "k"], "y", upper=upper)]
    check_compiled_against_ort(model(nodes, inputs, {"y": "float32"}, {"k": np.array(k, np.int64)}), inputs)


def test_isnan_and_reductions_of_bools_at_run_time() -> None:
    """A fully masked row's NaN check, as transformers' attention exports it: IsNaN, and any/all
    over bools as ReduceMax/ReduceMin (opset 20)."""
    nodes = [
        node("Log", ["x"], "logs"),
        node("IsNaN", ["logs"], "nan"),
        node("ReduceMax", ["nan", "axis"], "any", keepdims=0),
        node("ReduceMin", ["nan", "axis"], "all", keepdims=1),
    ]
    data = model(
        nodes,
        {"x": ((3, 7), "float32")},
        {"nan": "bool", "any": "bool", "all": "bool"},
        {"axis": np.array([1], np.int64)},
    )
    x = rng.standard_normal((3, 7)).astype("float32")
    x[2] = -1.0
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = graph.build(from_onnx(data))(x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_shape_arithmetic_folds_at_import_with_the_reference_implementation() -> None:
    """A causal mask from a static length: Trilu, Ceil, Equal and Where on constants this small fold
    at import (with ONNX's reference implementation where no numpy twin exists), so the model adds
    a constant to the scores, nothing else."""
    inputs = {"scores": ((1, 2, 6, 6), "float32")}
    nodes = [
        node("Shape", ["scores"], "shape"),
        node("Gather", ["shape", "last"], "n"),
        node("ConstantOfShape", ["square"], "ones", value=numpy_helper.from_array(np.ones(1, np.float32))),
        node("Trilu", ["ones"], "lower", upper=0),
        node("Equal", ["lower", "zero"], "above"),
        node("Ceil", ["half"], "ceiled"),
        node("Where", ["above", "neg", "ceiled"], "mask"),
        node("Add", ["scores", "mask"], "y"),
    ]
    consts = {
        "last": np.array(3, np.int64),
        "square": np.array([6, 6], np.int64),
        "zero": np.array(0.0, np.float32),
        "half": np.array(0.5, np.float32),
        "neg": np.array(-1e9, np.float32),
    }
    module = check_compiled_against_ort(model(nodes, inputs, {"y": "float32"}, consts), inputs)
    assert [n.op for n in module.calls() if isinstance(n, Call)] == ["add"]
    assert [n.ops for n in graph.optimize(module).calls() if isinstance(n, CallTIR)] == [("add",)]


def test_an_operator_without_converter_on_run_time_values_is_refused_by_name() -> None:
    inputs = {"x": ((3, 4), "float32")}
    data = model([node("Hardmax", ["x"], "y")], inputs, {"y": "float32"})
    with pytest.raises(GraphError, match="unsupported operator on values computed at run time") as e:
        from_onnx(data)
    assert (e.value.node, e.value.op) == ("y", "Hardmax")


def test_integer_division_at_run_time_is_refused_not_guessed() -> None:
    inputs = {"a": ((3,), "int64"), "b": ((3,), "int64")}
    with pytest.raises(GraphError, match="argument 0 has dtype int64; expected float32 or float64"):
        from_onnx(model([node("Div", ["a", "b"], "y")], inputs, {"y": "int64"}))
