"""The graph's JSON form: a module written and read back computes the same, and a malformed form is
refused naming its field, or the node and its operator."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from compiler import frontend, graph
from compiler.graph.serialize import GraphFormatError, module_from_json, module_to_json
from tests.service.onnx_models import mlp, reference


def test_a_module_round_trips_through_json_and_computes_the_same():
    module = frontend.from_onnx(mlp())
    form = json.loads(json.dumps(module_to_json(module)))  # plain JSON all the way
    again = module_from_json(form)
    assert again.script() == module.script()
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    (y,) = graph.run_reference(again, [x])
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
    assert len(graph.extract_tasks(graph.optimize(again))) == 2


def test_a_fused_module_has_no_json_form():
    with pytest.raises(graph.GraphError, match="only a graph before fusion"):
        module_to_json(graph.optimize(frontend.from_onnx(mlp())))


def edited(path: str, value: object) -> dict:
    form = copy.deepcopy(module_to_json(frontend.from_onnx(mlp())))
    target = form
    *parents, last = path.split("/")
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is None:
        del target[last]
    else:
        target[int(last) if isinstance(target, list) else last] = value
    return form


@pytest.mark.parametrize(
    ("form", "error", "message"),
    [
        (edited("format", 2), GraphFormatError, "graph.format: must be 1"),
        (edited("nodes", None), GraphFormatError, "graph.nodes: must be a list"),
        (edited("nodes/0/op", "celu"), graph.GraphError, "(celu): unsupported operator"),
        (edited("nodes/0/args/0", "nowhere"), GraphFormatError, "'nowhere' is not an input"),
        (edited("constants/0/data", "AAAA"), GraphFormatError, "graph.constants[0].data: 3 bytes"),
        (edited("inputs/0/shape", [4, -1]), GraphFormatError, "positive integers"),
        (edited("inputs/0/dtype", "complex64"), GraphFormatError, "graph.inputs[0].dtype"),
        (edited("nodes/0/attrs", {"alpha": {"a": 1}}), graph.GraphError, "attribute values"),
        (edited("outputs", []), GraphFormatError, "at least one tensor"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_a_malformed_form_is_refused_naming_the_culprit(form: dict, error: type, message: str):
    with pytest.raises(error) as caught:
        module_from_json(form)
    assert message in str(caught.value)


def test_the_node_limit_counts_every_input_constant_and_call():
    form = module_to_json(frontend.from_onnx(mlp()))
    count = len(form["inputs"]) + len(form["constants"]) + len(form["nodes"])
    module_from_json(form, max_nodes=count)
    with pytest.raises(GraphFormatError, match=f"more than max_nodes={count - 1}"):
        module_from_json(form, max_nodes=count - 1)
