"""The table of named operators: each op is one small function that returns its te graph, numpy
reference and flop count; `@register` declares its parameters as data, so validation and canonical
specs are the same for every op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from compiler import te
from compiler.workloads.workload import Workload, WorkloadError, check_bytes, check_int, check_shape, show


@dataclass(frozen=True)
class Param:
    """One shape parameter of an op: required when `default` is None; `shape` params are extent lists."""

    default: int | None = None
    minimum: int = 1
    shape: bool = False


REQUIRED = Param()
SHAPE = Param(shape=True)


@dataclass(frozen=True)
class OpGraph:
    """What an op function returns: its te graph, a numpy reference over the inputs, and its flops."""

    inputs: list[te.Tensor]
    outputs: list[te.Tensor]
    reference: Callable[..., list[np.ndarray]]
    flops: int


@dataclass(frozen=True)
class WorkloadDef:
    """A registered operator: its declared parameters and the function that builds it."""

    name: str
    params: dict[str, Param]
    build: Callable[..., OpGraph]  # called with the validated params as keywords, plus dtype


WORKLOADS: dict[str, WorkloadDef] = {}

F = TypeVar("F", bound=Callable[..., OpGraph])


def register(name: str, **params: Param) -> Callable[[F], F]:
    """Add the decorated op function to WORKLOADS under `name`, with its declared parameters."""

    def add(fn: F) -> F:
        WORKLOADS[name] = WorkloadDef(name, params, fn)
        return fn

    return add


def op_workload(op: str, params: object, dtype: str) -> Workload:
    """The workload of registered op `op` with raw (unvalidated) `params`."""
    if op not in WORKLOADS:
        raise WorkloadError("op", f"unknown operator {show(op)}; known: {', '.join(sorted(WORKLOADS))}")
    workload_def = WORKLOADS[op]
    values = _check_params(workload_def, params)
    graph = workload_def.build(dtype=dtype, **values)
    func = te.create_prim_func([*graph.inputs, *graph.outputs], name=op)
    check_bytes(func.params + func.allocs, "params")
    canonical = {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(values.items())}
    spec = {"op": op, "params": canonical, "dtype": dtype}
    return Workload(op, spec, func, len(graph.inputs), graph.reference, graph.flops)


def _check_params(workload_def: WorkloadDef, params: object) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise WorkloadError("params", f"must be an object of shape parameters, got {show(params)}")
    for key in params:
        if key not in workload_def.params:
            known = ", ".join(workload_def.params)
            raise WorkloadError(f"params.{key}", f"unknown parameter of {workload_def.name}; known: {known}")
    values: dict[str, Any] = {}
    for key, p in workload_def.params.items():
        field = f"params.{key}"
        if key not in params and p.default is None:
            raise WorkloadError(field, f"missing required parameter of {workload_def.name}")
        raw = params.get(key, p.default)
        values[key] = check_shape(raw, field) if p.shape else check_int(raw, field, p.minimum)
    return values
