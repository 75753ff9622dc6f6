"""The graph level: a model as a dataflow of operator calls over tensors, the passes that optimize it,
and the executor that runs it compiled."""

from compiler.graph.bind_params import bind_params
from compiler.graph.build import build, build_range
from compiler.graph.builder import GraphBuilder
from compiler.graph.dynamic_model import DynamicModel, ValueKeyedModel
from compiler.graph.executor import CompiledModel
from compiler.graph.export import LibraryError, NativeModel, load_library, rename_header
from compiler.graph.extern import ExternFuncError, register_func, register_native_func, remove_func
from compiler.graph.ir import (
    Attrs,
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
from compiler.graph.native_call import ExternCallError
from compiler.graph.op import OPS, OpDef, Pattern
from compiler.graph.passes import ExtractedTask, extract_tasks, optimize, verify
from compiler.graph.range_model import RangeModel
from compiler.graph.reference import run_reference
from compiler.graph.shape_family import DimRange, InputSignature, ShapeFamily
from compiler.graph.value_family import InputValuesNeeded, ValueFamily

__all__ = [
    "OPS",
    "Attrs",
    "Call",
    "CallDPSPacked",
    "CallTIR",
    "CompiledModel",
    "Constant",
    "DimRange",
    "DynamicModel",
    "ExternCallError",
    "ExternFuncError",
    "ExtractedTask",
    "GraphBuilder",
    "GraphError",
    "Input",
    "InputSignature",
    "InputValuesNeeded",
    "LibraryError",
    "Module",
    "NativeModel",
    "Node",
    "OpDef",
    "Pattern",
    "RangeModel",
    "ShapeFamily",
    "TensorType",
    "ValueFamily",
    "ValueKeyedModel",
    "bind_params",
    "build",
    "build_range",
    "extract_tasks",
    "load_library",
    "optimize",
    "register_func",
    "register_native_func",
    "remove_func",
    "rename_header",
    "run_reference",
    "verify",
]

import compiler.graph.ops  # noqa: F401  (registers the operators in OPS)
