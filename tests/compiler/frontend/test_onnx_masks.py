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
from compiler.dtypes import DTYPES
from compiler.frontend import from_onnx
from compiler.graph import Call, CallTIR, GraphError

rng = np.random.default_rng(3)
ONNX_TYPES = {d: helper.np_dtype_to_tensor_dtype(np.dtype(d)) for d in DTYPES}


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


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_integer_division_and_comparison_of_every_integer_type(dtype: str) -> None:
    """ONNX's integer Div rounds toward zero; an unsigned type divides and compares as unsigned."""
    inputs = {"a": ((4, 9), dtype), "b": ((9,), dtype)}
    nodes = [node("Div", ["a", "b"], "q"), node("Less", ["a", "b"], "lt"), node("Mod", ["a", "b"], "r")]
    data = model(nodes, inputs, {"q": dtype, "lt": "bool", "r": dtype})
    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    feeds = {"a": rng.integers(low, high, (4, 9), dtype=dtype, endpoint=True)}
    feeds["b"] = rng.integers(max(low, -9), 10, 9).astype(dtype)
    feeds["b"][feeds["b"] == 0] = 3
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = graph.build(from_onnx(data))(feeds["a"], feeds["b"])
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize(("dtype", "axis"), [("uint8", None), ("int8", 1), ("int8", 0), ("uint16", None)])
def test_quantize_dequantize_at_run_time_matches_onnx_runtime(dtype: str, axis: int | None) -> None:
    """A QDQ pair on activations (per tensor or per channel), and a quantized weight dequantized at
    import feeding a MatMul, as a QDQ model has them."""
    channels = 6
    scale = np.float32(0.05) if axis is None else rng.uniform(0.01, 0.1, channels).astype("float32")
    zero = np.zeros_like(scale, dtype) + (7 if dtype.startswith("u") else -3)
    weight = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (channels, channels)).astype(dtype)
    initializers = {"scale": np.asarray(scale), "zero": np.asarray(zero), "w": weight}
    attrs = {} if axis is None else {"axis": axis}
    nodes = [
        node("QuantizeLinear", ["x", "scale", "zero"], "q", **attrs),
        node("DequantizeLinear", ["q", "scale", "zero"], "dq", **attrs),
        node("DequantizeLinear", ["w", "scale", "zero"], "wf", **({"axis": 0} if axis is not None else {})),
        node("MatMul", ["dq", "wf"], "y"),
    ]
    inputs = {"x": ((channels, channels), "float32")}
    data = model(nodes, inputs, {"q": dtype, "y": "float32"}, initializers)
    x = (rng.standard_normal((channels, channels)) * 10).astype("float32")
    x.flat[:3] = [np.nan, 1e9, -1e9]  # saturated, and NaN as 0 (ORT's cast of NaN is its own)
    x[0, 0] = 0.0
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    module = from_onnx(data)
    got = graph.build(module)(x)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-4)


def test_a_float16_model_rounds_each_result_as_numpy_and_matches_onnx_runtime() -> None:
    """float16 inputs and weights: every operator computes in float32 and rounds its result to float16
    (the casts are graph nodes: nothing else takes a float16), as numpy computes float16 one operation
    at a time. ONNX Runtime rounds differently inside its kernels: within a few units in the last place."""
    weight = rng.standard_normal((7, 7)).astype("float16")
    nodes = [
        node("Add", ["a", "b"], "s"),
        node("Exp", ["s"], "e"),
        node("MatMul", ["e", "w"], "m"),
        node("Less", ["a", "b"], "lt"),
        node("Cast", ["m"], "m32", to=TensorProto.FLOAT),
    ]
    inputs = {"a": ((3, 7), "float16"), "b": ((3, 7), "float16")}
    data = model(
        nodes, inputs, {"e": "float16", "m": "float16", "lt": "bool", "m32": "float32"}, {"w": weight}
    )
    a, b = (rng.standard_normal(s).astype(d) for s, d in inputs.values())
    module = from_onnx(data)
    for n in module.nodes():
        if isinstance(n, Call) and n.op != "cast":
            assert "float16" not in {x.type.dtype for x in n.args}, n.op
    got = graph.build(module)(a, b)
    e = np.exp((a + b).astype(np.float32)).astype(np.float16)
    m = (e.astype(np.float32) @ weight.astype(np.float32)).astype(np.float16)
    for g, want in zip(got, [e, m, a < b, m.astype(np.float32)], strict=True):
        assert g.dtype == want.dtype
        np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=1e-3)
    theirs = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})
    for g, t in zip(got, theirs, strict=True):
        np.testing.assert_allclose(g.astype(np.float64), t.astype(np.float64), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_a_cumsum_axis_given_at_run_time_selects_the_sum_along_it(axis: int) -> None:
    inputs = {"x": ((3, 5), "float32"), "axis": ((), "int64")}
    data = model([node("CumSum", ["x", "axis"], "y", exclusive=1)], inputs, {"y": "float32"})
    feeds = {"x": rng.standard_normal((3, 5)).astype("float32"), "axis": np.array(axis)}
    (expected,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    module = from_onnx(data)
    (got,) = graph.build(module)(*(feeds[i.name] for i in module.inputs))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
