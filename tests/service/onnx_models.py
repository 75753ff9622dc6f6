"""A small ONNX model for the service's tests: a two-layer MLP built with onnx.helper, and what it
computes in numpy."""

from __future__ import annotations

import base64

import numpy as np
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


def reference(x: np.ndarray) -> np.ndarray:
    """What `mlp()` computes."""
    return np.maximum(x @ W1 + B1, 0) @ W2 + B2


def encoded(source: bytes) -> str:
    """A model's bytes as `POST /v1/models` takes them."""
    return base64.b64encode(source).decode()
