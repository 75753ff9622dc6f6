"""Small ONNX models for the service's tests, built with onnx.helper: a two-layer MLP and what it
computes in numpy, and a model that tries to read a file of whoever imports it."""

from __future__ import annotations

import base64

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)
W1, B1 = RNG.standard_normal((16, 32)).astype(np.float32), RNG.standard_normal(32).astype(np.float32)
W2, B2 = RNG.standard_normal((32, 8)).astype(np.float32), RNG.standard_normal(8).astype(np.float32)


def mlp(op: str = "Relu") -> bytes:
    """x[4, 16] -> Gemm -> `op` -> Gemm -> y[4, 8]: two layers, two tasks."""
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node(op, ["h"], ["a"], name="act"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(a, n) for a, n in ((W1, "w1"), (B1, "b1"), (W2, "w2"), (B2, "b2"))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def open_batch_mlp() -> bytes:
    """`mlp()` with its batch dimension left open, named "batch", as exporters write it."""
    model = onnx.load_model_from_string(mlp())
    for info in (model.graph.input[0], model.graph.output[0]):
        info.type.tensor_type.shape.dim[0].dim_param = "batch"
    return model.SerializeToString()


def reference(x: np.ndarray) -> np.ndarray:
    """What `mlp()` computes."""
    return np.maximum(x @ W1 + B1, 0) @ W2 + B2


def encoded(source: bytes) -> str:
    """A model's bytes as `POST /v1/models` takes them."""
    return base64.b64encode(source).decode()


def external_value(name: str, location: str) -> onnx.TensorProto:
    """An int64 tensor of 8 bytes whose data "lives" at `location`, a path the onnx library resolves
    against the working directory of whoever reads the model."""
    tensor = helper.make_tensor(name, TensorProto.INT64, [1], [0])
    tensor.ClearField("int64_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("length", "8")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def file_reader(location: str) -> bytes:
    """The probe's attack (issue 42): a ConstantOfShape whose value is 8 bytes of the file at `location`,
    and a Reshape to that value, whose error would print the bytes back as a number."""
    nodes = [
        helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("ConstantOfShape", ["s"], ["c"], value=external_value("v", location)),
        helper.make_node("Reshape", ["x", "c"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "reader",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
