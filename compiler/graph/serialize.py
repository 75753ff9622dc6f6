"""The graph's JSON form: a model as plain data, what `POST /v1/models` takes besides ONNX (a model
written by hand, or by a frontend we do not ship, needs no ONNX round trip).

    {"format": 1,
     "inputs":    [{"name": "x", "shape": [1, 16], "dtype": "float32"}],
     "constants": [{"name": "w", "shape": [16, 8], "dtype": "float32", "data": "<base64>"}],
     "nodes":     [{"name": "y", "op": "matmul", "args": ["x", "w"], "attrs": {}},
                   {"name": "z", "extern": "env.scale", "args": ["y"], "shape": [1, 8], "dtype": "float32"}],
     "outputs":   ["z"]}

An input of shape [] is rank 0 (held as (1,) inside); "scalar_outputs" (optional) lists the
positions of outputs returned as rank 0. Constants hold their elements' bytes, little-endian, C
order. Nodes are graph operators (`compiler.graph.OPS`), or extern calls
(`GraphBuilder.call_dps_packed`: the function's name and the output's type), in an order where every
argument comes before its use. An extern function must be registered under its name where the form
is read, so a form calls only what the reading process chose to offer. Only a graph before fusion has
this form (a CallTIR's PrimFunc has a form of its own, `compiler.serialize`). Reading is checked as
the frontends build: each call's operator and types (a GraphError naming the node and the op, or the
extern function no one registered), unknown or repeated names, data of the wrong size."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import numpy as np

from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import DTYPES, Call, CallDPSPacked, Constant, GraphError, Input, Module, Node
from compiler.graph.op import call

FORMAT = 1


class GraphFormatError(ValueError):
    """A JSON form that is not a graph: a missing or mistyped field, named by its path."""


def module_to_json(module: Module) -> dict[str, Any]:
    """The JSON form of an unfused module."""
    nodes = module.nodes()
    fused = [n.name for n in nodes if not isinstance(n, (Input, Constant, Call, CallDPSPacked))]
    if fused:
        raise GraphError(fused[0], "module_to_json", "only a graph before fusion has a JSON form")
    return {
        "format": FORMAT,
        "inputs": [
            {
                "name": n.name,
                "shape": [] if k in module.scalar_inputs else list(n.type.shape),
                "dtype": n.type.dtype,
            }
            for k, n in enumerate(module.inputs)
        ],
        "constants": [
            {
                "name": n.name,
                "shape": list(n.type.shape),
                "dtype": n.type.dtype,
                "data": base64.b64encode(_little_endian(n.data).tobytes()).decode(),
            }
            for n in nodes
            if isinstance(n, Constant)
        ],
        "nodes": [_node_json(n) for n in nodes if isinstance(n, (Call, CallDPSPacked))],
        "outputs": [n.name for n in module.outputs],
        **({"scalar_outputs": sorted(module.scalar_outputs)} if module.scalar_outputs else {}),
    }


def module_from_json(data: object, *, max_nodes: int | None = None) -> Module:
    """The module a JSON form describes; GraphFormatError for a malformed form, GraphError for a
    call its operator refuses. `max_nodes` bounds inputs, constants and calls together."""
    root = _object(data, "graph")
    if root.get("format") != FORMAT:
        raise GraphFormatError(f"graph.format: must be {FORMAT}")
    parts = {key: _list(root.get(key), f"graph.{key}") for key in ("inputs", "constants", "nodes", "outputs")}
    count = sum(len(parts[k]) for k in ("inputs", "constants", "nodes"))
    if max_nodes is not None and count > max_nodes:
        raise GraphFormatError(f"graph: {count} inputs, constants and nodes, more than max_nodes={max_nodes}")
    unknown = set(root) - {"format", "scalar_outputs", *parts}
    if unknown:
        raise GraphFormatError(f"graph: unknown fields {sorted(unknown)}")
    builder = GraphBuilder()
    named: dict[str, Node] = {}

    def define(name: str, node: Node, where: str) -> None:
        if name in named:
            raise GraphFormatError(f"{where}.name: {name!r} is defined twice")
        named[name] = node

    for k, item in enumerate(parts["inputs"]):
        where = f"graph.inputs[{k}]"
        spec = _object(item, where)
        name = _text(spec.get("name"), f"{where}.name")
        define(
            name, builder.input(name, _shape(spec.get("shape"), f"{where}.shape"), _dtype(spec, where)), where
        )
    for k, item in enumerate(parts["constants"]):
        where = f"graph.constants[{k}]"
        spec = _object(item, where)
        name = _text(spec.get("name"), f"{where}.name")
        define(name, builder.constant(name, _array(spec, where)), where)
    for k, item in enumerate(parts["nodes"]):
        where = f"graph.nodes[{k}]"
        spec = _object(item, where)
        name = _text(spec.get("name"), f"{where}.name")
        args = [
            _argument(a, named, f"{where}.args[{i}]")
            for i, a in enumerate(_list(spec.get("args"), f"{where}.args"))
        ]
        define(name, _node(builder, spec, name, args, where), where)
    outputs = [_argument(o, named, f"graph.outputs[{i}]") for i, o in enumerate(parts["outputs"])]
    if not outputs:
        raise GraphFormatError("graph.outputs: a model returns at least one tensor")
    return builder.module(outputs, _scalar_outputs(root.get("scalar_outputs", []), len(outputs)))


def _node_json(node: Call | CallDPSPacked) -> dict[str, Any]:
    args = [a.name for a in node.args]
    if isinstance(node, Call):
        return {"name": node.name, "op": node.op, "args": args, "attrs": _attrs_json(node.attrs)}
    shape, dtype = list(node.type.shape), node.type.dtype
    return {"name": node.name, "extern": node.func, "args": args, "shape": shape, "dtype": dtype}


def _node(builder: GraphBuilder, spec: dict[str, Any], name: str, args: list[Node], where: str) -> Node:
    """An operator's call, or (with "extern") an extern function's, checked as the builder checks."""
    if "extern" in spec:
        func = _text(spec["extern"], f"{where}.extern")
        out = (_shape(spec.get("shape"), f"{where}.shape"), _dtype(spec, where))
        return builder.call_dps_packed(func, args, out, name=name)
    op = _text(spec.get("op"), f"{where}.op")
    attrs = _object(spec.get("attrs", {}), f"{where}.attrs")
    try:
        return call(builder.name(name), op, args, attrs)
    except TypeError as e:  # an attribute that is not a number, a string or a list of them
        raise GraphError(name, op, str(e)) from None


def _scalar_outputs(value: object, count: int) -> list[int]:
    items = _list(value, "graph.scalar_outputs")
    if not all(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < count for k in items):
        raise GraphFormatError(f"graph.scalar_outputs: must list output positions below {count}")
    return list(items)


def _little_endian(data: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))


def _attrs_json(attrs: Mapping[str, object]) -> dict[str, object]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GraphFormatError(f"{where}: must be an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise GraphFormatError(f"{where}: must be a list")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise GraphFormatError(f"{where}: must be a non-empty string")
    return value


def _shape(value: object, where: str) -> tuple[int, ...]:
    items = _list(value, where)
    if not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2**31 for d in items):
        raise GraphFormatError(f"{where}: must be a list of positive integers")
    return tuple(items)


def _dtype(spec: dict[str, Any], where: str) -> str:
    dtype = spec.get("dtype")
    if dtype not in DTYPES:
        raise GraphFormatError(f"{where}.dtype: must be one of {', '.join(DTYPES)}")
    return str(dtype)


def _array(spec: dict[str, Any], where: str) -> np.ndarray:
    shape, dtype = (
        _shape(spec.get("shape"), f"{where}.shape"),
        np.dtype(_dtype(spec, where)).newbyteorder("<"),
    )
    try:
        data = base64.b64decode(_text(spec.get("data"), f"{where}.data"), validate=True)
    except (binascii.Error, ValueError):
        raise GraphFormatError(f"{where}.data: not base64") from None
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise GraphFormatError(f"{where}.data: {len(data)} bytes, a {dtype.name}{list(shape)} has {expected}")
    if dtype == np.bool_ and data.translate(None, b"\x00\x01"):
        raise GraphFormatError(f"{where}.data: a bool is the byte 0 or 1")
    return np.frombuffer(data, dtype).astype(dtype.newbyteorder("=")).reshape(shape)


def _argument(value: object, named: dict[str, Node], where: str) -> Node:
    name = _text(value, where)
    if name not in named:
        raise GraphFormatError(f"{where}: {name!r} is not an input, a constant or an earlier node")
    return named[name]
