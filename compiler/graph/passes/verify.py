"""The graph verifier, run between passes in tests: a module is well formed when names are unique,
every input is declared, every Call's type is what its operator infers, every CallTIR calls a
PrimFunc of the module whose parameters match its arguments and output, and every extern call a
registered function with a static output."""

from __future__ import annotations

from compiler.graph.extern import check_call
from compiler.graph.ir import (
    Call,
    CallDPSPacked,
    CallTIR,
    Constant,
    GraphError,
    Input,
    Module,
    Node,
    TensorType,
)
from compiler.graph.op import OPS, OpError
from compiler.ir import Buffer, static_shape


def verify(module: Module) -> None:
    names: set[str] = set()
    for node in module.nodes():
        if node.name in names:
            raise GraphError(node.name, _kind(node), "name used by two nodes")
        names.add(node.name)
        if isinstance(node, Input) and node not in module.inputs:
            raise GraphError(node.name, "input", "not among the module's inputs")
        if isinstance(node, Call):
            _verify_call(node)
        if isinstance(node, CallTIR):
            _verify_call_tir(node, module)
        if isinstance(node, CallDPSPacked):
            check_call(node)
    for inp in module.inputs:
        if not isinstance(inp, Input):
            raise GraphError(inp.name, _kind(inp), "a module input must be an Input")


def _kind(node: Node) -> str:
    return node.op if isinstance(node, Call) else type(node).__name__


def _verify_call(node: Call) -> None:
    if node.op not in OPS:
        raise GraphError(node.name, node.op, "unknown operator")
    try:
        inferred = OPS[node.op].infer_type([a.type for a in node.args], node.attrs)
    except OpError as e:
        raise GraphError(node.name, node.op, str(e)) from None
    if inferred != node.type:
        raise GraphError(node.name, node.op, f"type {node.type} but the operator infers {inferred}")


def _verify_call_tir(node: CallTIR, module: Module) -> None:
    func = module.funcs.get(node.func)
    if func is None:
        raise GraphError(node.name, "call_tir", f"calls {node.func}, which the module does not hold")
    expected = [a.type for a in node.args] + [node.type]
    if len(func.params) != len(expected):
        raise GraphError(
            node.name, "call_tir", f"{node.func} takes {len(func.params)} buffers, given {len(expected)}"
        )
    for buf, want in zip(func.params, expected):
        if _buffer_type(buf) != want:
            raise GraphError(
                node.name, "call_tir", f"{node.func}'s {buf.name} is {_buffer_type(buf)}, given {want}"
            )
    if any(isinstance(a, Constant) and a.data.flags.writeable for a in node.args):
        raise GraphError(node.name, "call_tir", "a constant argument is writable")


def _buffer_type(buf: Buffer) -> TensorType:
    return TensorType(static_shape(buf.shape, buf.name), buf.dtype)
