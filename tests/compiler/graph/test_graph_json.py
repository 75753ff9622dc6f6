"""The graph's JSON form: a module written and read back computes the same, and a malformed form is
refused naming its field, or the node and its operator."""

from __future__ import annotations

import base64
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


def masked_count() -> graph.Module:
    """int64 and bool inputs, a bool constant, a rank-0 input and a rank-0 output."""
    b = graph.GraphBuilder()
    ids, keep, scale = (
        b.input("ids", (2, 5), "int64"),
        b.input("keep", (2, 5), "bool"),
        b.input("s", (), "int64"),
    )
    hit = b.call("logical_and", [keep, b.constant("allowed", ALLOWED)])
    kept = b.call("where", [hit, ids, b.constant("zero", np.array([0]))])
    total = b.call("sum", [kept], axes=(0, 1), keepdims=False)
    return b.module([b.call("multiply", [total, scale]), hit], scalar_outputs=[0])


ALLOWED = np.array([True, False, True, True, False])


def test_ints_bools_and_rank_0_tensors_round_trip():
    module = masked_count()
    form = json.loads(json.dumps(module_to_json(module)))
    assert form["inputs"][2]["shape"] == [] and form["scalar_outputs"] == [0]
    again = module_from_json(form)
    assert again.script() == module.script()
    assert (again.scalar_inputs, again.scalar_outputs) == ({2}, {0})
    rng = np.random.default_rng(0)
    ids, keep = rng.integers(0, 9, (2, 5)), rng.random((2, 5)) < 0.5
    total, hit = graph.build(again)(ids, keep, np.array(3))
    assert total.shape == () and int(total) == 3 * int(ids[keep & ALLOWED].sum())
    np.testing.assert_array_equal(hit, keep & ALLOWED)


def test_a_bool_is_the_byte_0_or_1():
    form = module_to_json(masked_count())
    form["constants"][0]["data"] = base64.b64encode(bytes([1, 0, 2, 1, 0])).decode()
    with pytest.raises(GraphFormatError, match=r"graph.constants\[0\].data: a bool is the byte 0 or 1"):
        module_from_json(form)


@pytest.mark.parametrize("positions", [[2], [-1], ["0"], [True]])
def test_scalar_outputs_must_be_output_positions(positions):
    form = module_to_json(masked_count())
    form["scalar_outputs"] = positions
    with pytest.raises(GraphFormatError, match=r"graph\.scalar_outputs: must list output positions below 2"):
        module_from_json(form)
