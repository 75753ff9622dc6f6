"""matmul with numpy's semantics for operands of rank >= 2 (batch dims broadcast): the anchor of
dense layers and attention; and matmul_integer, its 8-bit form with exact int32 sums (ONNX's
MatMulInteger without zero points, which the frontend subtracts around it: a quantized model's GEMM,
which AVX-512 VNNI computes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import te, topi
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import OpError, Pattern, check
from compiler.graph.ops.checks import float_args, register_op

EIGHT_BIT = ("uint8", "int8")


def _matmul_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = float_args(args, 2)
    check(
        len(a.shape) >= 2 and len(b.shape) >= 2, f"needs operands of rank >= 2, got {a.shape} and {b.shape}"
    )
    check(a.shape[-1] == b.shape[-2], f"inner dimensions differ: {a.shape} @ {b.shape}")
    batch = topi.broadcast_batch(a.shape[:-2], b.shape[:-2])
    if batch is None:
        raise OpError(f"batch dimensions do not broadcast: {a.shape[:-2]} and {b.shape[:-2]}")
    return TensorType((*batch, a.shape[-2], b.shape[-1]), a.dtype)


def _matmul_integer_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check(len(args) == 2, f"takes 2 arguments, got {len(args)}")
    for k, t in enumerate(args):
        check(t.dtype in EIGHT_BIT, f"argument {k} has dtype {t.dtype}; expected {' or '.join(EIGHT_BIT)}")
    a, b = args
    out = _matmul_type([TensorType(a.shape, "float32"), TensorType(b.shape, "float32")], attrs)
    return TensorType(out.shape, "int32")


def _matmul_integer_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    a, b = (
        te.compute(t.shape, lambda *i, t=t: te.cast("int32", t(*i)), name=f"{t.name}_i32") for t in inputs
    )
    return topi.matmul(a, b, name)


def _matmul_integer_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = inputs
    return np.matmul(a.astype(np.int32), b.astype(np.int32))


def _matmul_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    a, b = inputs
    return topi.matmul(a, b, name)


def _matmul_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = inputs
    return np.matmul(a, b)


def matmul_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    """Two per multiply-add over the reduction (x's last dim): matmul's and matmul_nblock's count."""
    return 2 * out.size * args[0].shape[-1]


register_op("matmul", Pattern.ANCHOR, {}, _matmul_type, _matmul_compute, _matmul_reference, matmul_flops)
register_op(
    "matmul_integer",
    Pattern.ANCHOR,
    {},
    _matmul_integer_type,
    _matmul_integer_compute,
    _matmul_integer_reference,
    matmul_flops,
)
