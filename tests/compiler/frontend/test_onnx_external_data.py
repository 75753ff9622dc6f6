"""from_onnx never reads a file a model names: a tensor with external data is refused wherever it hides
(issue 42's leak: a ConstantOfShape's value read 8 bytes of the importer's working directory, and a
Reshape to it printed them back), with one message whether the file exists or not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import FrontendError, from_onnx
from tests.service.onnx_models import external_value, file_reader

SECRET = b"SECRETTOKEN12345"
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
OPSET = [helper.make_opsetid("", 17)]


def model_of(nodes: list[onnx.NodeProto], **graph: list) -> onnx.ModelProto:
    return helper.make_model(helper.make_graph(nodes, "g", [X], [Y], **graph), opset_imports=OPSET)


def initializer(location: str) -> onnx.ModelProto:
    return model_of([helper.make_node("Add", ["x", "v"], ["y"])], initializer=[external_value("v", location)])


def sparse_initializer(location: str) -> onnx.ModelProto:
    indices = numpy_helper.from_array(np.array([0], np.int64), "i")
    sparse = helper.make_sparse_tensor(external_value("v", location), indices, [4])
    return model_of([helper.make_node("Add", ["x", "v"], ["y"])], sparse_initializer=[sparse])


def sparse_constant(location: str) -> onnx.ModelProto:
    indices = numpy_helper.from_array(np.array([0], np.int64), "i")
    sparse = helper.make_sparse_tensor(external_value("v", location), indices, [4])
    constant = helper.make_node("Constant", [], ["c"], sparse_value=sparse)
    return model_of([constant, helper.make_node("Add", ["x", "c"], ["y"])])


def subgraph(location: str) -> onnx.ModelProto:
    """Three levels down: a Constant in the else branch of an If inside a Loop's body."""
    constant = helper.make_node("Constant", [], ["c"], value=external_value("v", location))
    inner = helper.make_graph(
        [constant], "else", [], [helper.make_tensor_value_info("c", TensorProto.INT64, [1])]
    )
    then = helper.make_graph(
        [helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(np.array([1], np.int64)))],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.INT64, [1])],
    )
    branch = helper.make_node("If", ["cond"], ["c"], then_branch=then, else_branch=inner)
    body = helper.make_graph([branch], "body", [], [])
    return model_of(
        [helper.make_node("Loop", ["", "cond"], [], body=body), helper.make_node("Relu", ["x"], ["y"])]
    )


def function(location: str) -> onnx.ModelProto:
    constant = helper.make_node("Constant", [], ["c"], value=external_value("v", location))
    local = helper.make_function("local", "f", [], ["c"], [constant], OPSET)
    model = model_of([helper.make_node("Relu", ["x"], ["y"])])
    model.functions.append(local)
    return model


PLACES: dict[str, Callable[[str], onnx.ModelProto | bytes]] = {
    "ConstantOfShape-value": file_reader,
    "initializer": initializer,
    "sparse-initializer": sparse_initializer,
    "sparse-constant": sparse_constant,
    "nested-subgraph": subgraph,
    "model-function": function,
}


@pytest.mark.parametrize("place", list(PLACES))
def test_external_data_anywhere_is_refused_without_an_oracle(
    place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "admin.token").write_bytes(SECRET)
    monkeypatch.chdir(tmp_path)
    messages = []
    for location in ("admin.token", "missing.token", "/etc/hostname"):
        with pytest.raises(FrontendError, match="tensor 'v' keeps its data in an external file") as e:
            from_onnx(PLACES[place](location))
        messages.append(str(e.value))
    # One message whatever the file: it names the tensor, never the location or what lies there.
    assert len(set(messages)) == 1
    assert "token" not in messages[0] and "hostname" not in messages[0]
    assert str(int.from_bytes(SECRET[:8], "little")) not in messages[0]


def test_external_data_is_refused_before_any_other_check() -> None:
    """Even a model refused for another reason (an operator, its size) never reaches the onnx library's
    readers with an external tensor: that check comes first."""
    model = onnx.load_model_from_string(file_reader("admin.token"))
    model.graph.node.append(helper.make_node("Shrink", ["y"], ["z"]))
    with pytest.raises(FrontendError, match="external file"):
        from_onnx(model, max_nodes=1)
