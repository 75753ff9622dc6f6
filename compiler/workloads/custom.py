"""Custom workloads: one checked expression program gives the te graph, the numpy reference and the
flop count, so the three cannot disagree about what the expression means."""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler import te
from compiler.ir import Buffer, Expr, apply, const
from compiler.ops import Op
from compiler.workloads.expr_check import FUNCTIONS, Compute, Program, check, evaluate, op_count
from compiler.workloads.expr_syntax import parse, program_text
from compiler.workloads.workload import Workload, WorkloadError, check_bytes, check_shape, show

# Bytes per full-size temporary of the numpy interpreter; an expression holds a few at once,
# so a statement stays within about 64 MB however large its iteration domain.
TEMP_BYTES = 16 << 20

_NP_REDUCE: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "max": np.max, "min": np.min}
_TE_REDUCE: dict[str, Callable[..., Expr]] = {"sum": te.sum, "max": te.max, "min": te.min}


def custom_workload(expr: object, inputs: object, dtype: str) -> Workload:
    """The workload of expression program `expr` over `inputs` (name -> shape); all buffers are `dtype`."""
    shapes = _check_inputs(inputs)
    check_bytes([Buffer(n, s, dtype) for n, s in shapes.items()], "inputs")
    if not isinstance(expr, str):
        raise WorkloadError("expr", f"must be a string, got {show(expr)}")
    stmts = parse(expr)
    program = check(stmts, shapes)
    tensors = {name: te.placeholder(shape, dtype, name) for name, shape in program.inputs}
    for c in program.computes:
        tensors[c.name] = _te_compute(c, tensors, dtype)
    params = [tensors[name] for name, _ in program.inputs] + [tensors[program.computes[-1].name]]
    func = te.create_prim_func(params, name="custom")
    check_bytes(func.params + func.allocs, "expr")
    spec = {"expr": program_text(stmts), "inputs": {n: list(s) for n, s in program.inputs}, "dtype": dtype}
    return Workload("custom", spec, func, len(program.inputs), Interpreter(program, dtype), flops(program))


def _check_inputs(inputs: object) -> dict[str, tuple[int, ...]]:
    if not isinstance(inputs, dict) or not inputs:
        raise WorkloadError("inputs", f"must be a non-empty object of name -> shape, got {show(inputs)}")
    out = {}
    for name, shape in inputs.items():
        field = f"inputs.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise WorkloadError(field, "input names must be identifiers ([A-Za-z_][A-Za-z0-9_]*)")
        if keyword.iskeyword(name) or name in FUNCTIONS:
            raise WorkloadError(field, f"{name!r} is a reserved word")
        out[name] = check_shape(shape, field)
    return out


def flops(program: Program) -> int:
    """Arithmetic operations (plus one combine per reduced element) times each iteration domain."""
    return sum(
        math.prod(c.shape + c.reduce_extents) * (op_count(c.value) + (c.combiner is not None))
        for c in program.computes
    )


@dataclass
class _TeBackend:
    tensors: dict[str, te.Tensor]
    env: dict[str, Expr]
    dtype: str

    def number(self, value: int | float) -> Expr:
        return const(value, self.dtype)

    def var(self, name: str) -> Expr:
        return self.env[name]

    def load(self, tensor: str, indices: list[Any]) -> Expr:
        return self.tensors[tensor][tuple(indices)]

    def apply(self, op: Op, args: list[Any]) -> Expr:
        return apply(op, *args)


def _te_compute(c: Compute, tensors: dict[str, te.Tensor], dtype: str) -> te.Tensor:
    reduce_axes = [te.reduce_axis((0, e), n) for n, e in zip(c.reduce_axes, c.reduce_extents)]

    def body(*axes: Expr) -> Expr:
        env = dict(zip(c.axes, axes)) | dict(zip(c.reduce_axes, reduce_axes))
        value = evaluate(c.value, _TeBackend(tensors, env, dtype))
        return _TE_REDUCE[c.combiner](value, axis=reduce_axes) if c.combiner else value

    return te.compute(c.shape, body, c.name, axis_names=c.axes)


@dataclass
class _NumpyBackend:
    arrays: dict[str, np.ndarray]
    env: dict[str, np.ndarray]
    dtype: str

    def number(self, value: int | float) -> Any:
        return np.dtype(self.dtype).type(value)

    def var(self, name: str) -> np.ndarray:
        return self.env[name]

    def load(self, tensor: str, indices: list[Any]) -> Any:
        return self.arrays[tensor][tuple(indices)]

    def apply(self, op: Op, args: list[Any]) -> Any:
        return op.spec.numpy(*args)


@dataclass(frozen=True)
class Interpreter:
    """The numpy reference of a custom workload: each statement is evaluated over broadcast index
    arrays with fancy indexing, a block of rows of its first axis at a time to bound memory."""

    program: Program
    dtype: str

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays = {name: np.asarray(a) for (name, _), a in zip(self.program.inputs, inputs, strict=True)}
        with np.errstate(all="ignore"):  # log(-1) is NaN in the kernel too; warnings would only be noise
            for c in self.program.computes:
                arrays[c.name] = self._compute(c, arrays)
        return [arrays[self.program.computes[-1].name]]

    def _compute(self, c: Compute, arrays: dict[str, np.ndarray]) -> np.ndarray:
        domain = c.shape + c.reduce_extents
        names = c.axes + c.reduce_axes
        rows = max(1, TEMP_BYTES // (math.prod(domain[1:]) * np.dtype(self.dtype).itemsize))
        reduced = tuple(range(len(c.shape), len(domain)))
        out = np.empty(c.shape, self.dtype)
        for lo in range(0, c.shape[0], rows):
            hi = min(lo + rows, c.shape[0])
            chunk = (hi - lo,) + domain[1:]
            env = {}
            for d, name in enumerate(names):
                values = np.arange(lo, hi) if d == 0 else np.arange(domain[d])
                env[name] = values.reshape([-1 if k == d else 1 for k in range(len(domain))])
            value = np.broadcast_to(evaluate(c.value, _NumpyBackend(arrays, env, self.dtype)), chunk)
            out[lo:hi] = _NP_REDUCE[c.combiner](value, axis=reduced) if c.combiner else value
        return out
