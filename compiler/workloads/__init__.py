"""Tensor workloads to tune: named operators with shape parameters, custom ones written in a small
expression language, and serialized PrimFuncs (fused graph kernels), all made from JSON specs by
`workload_from_spec`."""

from compiler.workloads.registry import WORKLOADS, OpGraph, Param, WorkloadDef, register
from compiler.workloads.spec import workload_from_spec
from compiler.workloads.workload import (
    DTYPES,
    MAX_BLOCKS,
    MAX_EXPR_CHARS,
    MAX_EXTENT,
    MAX_PRIMFUNC_BYTES,
    MAX_RANK,
    MAX_STATEMENTS,
    MAX_TOTAL_BYTES,
    Workload,
    WorkloadError,
)

__all__ = [
    "DTYPES",
    "MAX_BLOCKS",
    "MAX_EXPR_CHARS",
    "MAX_EXTENT",
    "MAX_PRIMFUNC_BYTES",
    "MAX_RANK",
    "MAX_STATEMENTS",
    "MAX_TOTAL_BYTES",
    "WORKLOADS",
    "OpGraph",
    "Param",
    "Workload",
    "WorkloadDef",
    "WorkloadError",
    "register",
    "workload_from_spec",
]
