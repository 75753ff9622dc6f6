"""Tensor workloads to tune: named operators with shape parameters, and custom ones written in a small
expression language, both made from JSON specs by `workload_from_spec`."""

from compiler.workloads.registry import OPS, OpDef, OpGraph, Param, register
from compiler.workloads.spec import workload_from_spec
from compiler.workloads.workload import (
    DTYPES,
    MAX_EXPR_CHARS,
    MAX_EXTENT,
    MAX_RANK,
    MAX_STATEMENTS,
    MAX_TOTAL_BYTES,
    Workload,
    WorkloadError,
)

__all__ = [
    "DTYPES",
    "MAX_EXPR_CHARS",
    "MAX_EXTENT",
    "MAX_RANK",
    "MAX_STATEMENTS",
    "MAX_TOTAL_BYTES",
    "OPS",
    "OpDef",
    "OpGraph",
    "Param",
    "Workload",
    "WorkloadError",
    "register",
    "workload_from_spec",
]
