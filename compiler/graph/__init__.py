"""The graph level: a model as a dataflow of operator calls over tensors, the passes that optimize it,
and the executor that runs it compiled."""

from compiler.graph import ops  # noqa: F401  (registers the operators in OPS)
from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import (
    Attrs,
    Call,
    CallTIR,
    Constant,
    GraphError,
    Input,
    Module,
    Node,
    TensorType,
)
from compiler.graph.op import OPS, OpDef, Pattern
from compiler.graph.reference import run_reference

__all__ = [
    "OPS",
    "Attrs",
    "Call",
    "CallTIR",
    "Constant",
    "GraphBuilder",
    "GraphError",
    "Input",
    "Module",
    "Node",
    "OpDef",
    "Pattern",
    "TensorType",
    "run_reference",
]
