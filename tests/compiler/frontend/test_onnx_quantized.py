"""Quantized ONNX models: MatMulInteger with and without zero points (scalars, per row, per column;
weights constant or given at run time) gives the exact int32 result, and a model that
onnxruntime.quantization.quantize_dynamic made (DynamicQuantizeLinear, MatMulInteger, the float
rescale) imports, computes what the ONNX reference and ONNX Runtime compute, and runs its GEMMs on
AVX-512 VNNI where the CPU has it.

ONNX Runtime's uint8 x int8 GEMM on an x86 CPU without VNNI adds pairs of products in int16 with
saturation (`vpmaddubsw`, the "saturation issue" OpenVINO's documentation describes for SSE, AVX2 and
AVX-512 without VNNI): on an AVX2 Zen 3 137 of 336 of its int32 outputs were off. There the ONNX
reference evaluator (numpy, exact) is the reference alone; with VNNI ONNX Runtime is checked too."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper, version_converter
from onnx.reference import ReferenceEvaluator

from compiler import graph
from compiler.frontend import from_onnx
from compiler.target import Target

OPSET = 13


def matmul_integer_model(
    m: int, k: int, n: int, a_zero: object, b_zero: object, weights_known: bool
) -> tuple[onnx.ModelProto, np.ndarray]:
    weights = np.random.default_rng(0).integers(-128, 128, (k, n)).astype("int8")
    inputs = [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])]
    initializers = [numpy_helper.from_array(weights, "B")] if weights_known else []
    if not weights_known:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.INT8, [k, n]))
    names = ["A", "B", "", ""]
    for slot, (name, zero, dtype) in enumerate([("a_zero", a_zero, "uint8"), ("b_zero", b_zero, "int8")], 2):
        if zero is not None:
            initializers.append(numpy_helper.from_array(np.array(zero, dtype), name))
            names[slot] = name
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MatMulInteger", names, ["Y"])
    out = helper.make_tensor_value_info("Y", TensorProto.INT32, [m, n])
    model = helper.make_model(
        helper.make_graph([node], "matmul_integer", inputs, [out], initializers),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    return model, weights


ORT_EXACT = bool({"avx512vnni", "avxvnni"} & set(Target.host().feature_set))  # module docstring


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def references(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ONNX reference evaluator's outputs (on the model converted to opset 21: it implements
    DequantizeLinear from 19 on), and ONNX Runtime's where its sums are exact."""
    (exact,) = ReferenceEvaluator(version_converter.convert_version(model, 21)).run(None, feeds)
    return [exact, *(onnxruntime_outputs(model, feeds) if ORT_EXACT else [])]


@pytest.mark.parametrize(
    ("m", "k", "n", "a_zero", "b_zero", "weights_known"),
    [
        (7, 20, 48, None, None, True),
        (5, 36, 32, 128, None, True),
        (3, 12, 17, 3, np.arange(17) % 5 - 2, False),
        (4, 8, 16, 7, -3, True),
        (6, 9, 5, 0, 0, True),
    ],
)
def test_matmul_integer_gives_onnxruntimes_int32_result_exactly(m, k, n, a_zero, b_zero, weights_known):
    model, weights = matmul_integer_model(m, k, n, a_zero, b_zero, weights_known)
    a = np.random.default_rng(1).integers(0, 256, (m, k)).astype("uint8")
    feeds = {"A": a} if weights_known else {"A": a, "B": weights}
    (got,) = graph.build(from_onnx(model))(*feeds.values())
    assert got.dtype == np.int32
    for want in references(model, feeds):
        np.testing.assert_array_equal(got, want)


def test_per_row_zero_points_of_a_are_subtracted_row_by_row():
    """ONNX allows them (ONNX Runtime's kernel does not): checked against numpy."""
    rows = np.arange(4, dtype=np.int64) * 7
    columns = np.arange(16, dtype=np.int64) % 5 - 2
    model, weights = matmul_integer_model(4, 8, 16, rows, columns, True)
    a = np.random.default_rng(4).integers(0, 256, (4, 8)).astype("uint8")
    (got,) = graph.build(from_onnx(model))(a)
    want = (a.astype(np.int64) - rows[:, None]) @ (weights.astype(np.int64) - columns)
    np.testing.assert_array_equal(got, want)


def test_a_zero_point_of_another_shape_is_refused_by_node():
    model, _ = matmul_integer_model(4, 8, 16, np.ones((3, 3)), None, True)
    with pytest.raises(graph.GraphError, match=r"MatMulInteger.*zero point 2 has shape \(3, 3\)"):
        from_onnx(model)


def dense_model(width: int, hidden: int, tokens: int) -> onnx.ModelProto:
    """Two dense layers with a ReLU between, float32, as an exporter writes them (MatMul + Add)."""
    rng = np.random.default_rng(2)
    w1 = (rng.standard_normal((width, hidden)) / np.sqrt(width)).astype("float32")
    w2 = (rng.standard_normal((hidden, width)) / np.sqrt(hidden)).astype("float32")
    b1 = rng.standard_normal(hidden).astype("float32")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, width])
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (b1, "b1"))]
    graph_proto = helper.make_graph(nodes, "dense", [x], [y], inits)
    return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", OPSET)])


def test_a_dynamically_quantized_model_computes_what_onnxruntime_computes(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(dense_model(64, 128, 24), tmp_path / "float.onnx")
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "int8.onnx"), weight_type=QuantType.QInt8)
    quantized = onnx.load(tmp_path / "int8.onnx")
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in quantized.graph.node}
    x = np.random.default_rng(3).standard_normal((1, 24, 64)).astype("float32")
    model = graph.build(from_onnx(quantized))
    (got,) = model(x)
    # The int32 sums are exact; a float scale computed in another order may round one activation to
    # the next integer level, which moves an output by about one step of the weights' scale.
    for want in references(quantized, {"x": x}):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-2)
    kernels = [step.kernel.func.script() for step in model.steps]
    assert sum(step.func.startswith("fused_matmul_integer_vnni") for step in model.steps) == 2  # packed once
    if "avx512vnni" in Target.host().feature_set:
        assert sum("dot_16x4_vnni" in k for k in kernels) == 2


class _Calibration:
    """quantize_static's data reader: a few random inputs."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        rng = np.random.default_rng(7)
        self.batches = iter([{"x": rng.standard_normal(shape).astype("float32")} for _ in range(4)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


@pytest.mark.parametrize("per_channel", [False, True])
def test_a_statically_quantized_qdq_model_multiplies_in_integers(tmp_path, per_channel):
    """quantize_static's QDQ form (DequantizeLinear before each MatMul): the MatMul of two dequantized
    8-bit tensors is their integer product scaled, as ONNX Runtime fuses it."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    onnx.save(dense_model(64, 128, 24), tmp_path / "float.onnx")
    quantize_static(
        str(tmp_path / "float.onnx"),
        str(tmp_path / "qdq.onnx"),
        _Calibration((1, 24, 64)),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=per_channel,
    )
    qdq = onnx.load(tmp_path / "qdq.onnx")
    assert "DequantizeLinear" in {n.op_type for n in qdq.graph.node}
    x = np.random.default_rng(8).standard_normal((1, 24, 64)).astype("float32")
    model = graph.build(from_onnx(qdq))
    (got,) = model(x)
    for want in references(qdq, {"x": x}):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=3e-2)
    assert sum("matmul_integer" in step.func for step in model.steps) == 2
