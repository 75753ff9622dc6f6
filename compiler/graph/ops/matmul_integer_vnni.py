"""matmul_integer_vnni: a uint8 x int8 matmul whose constant weights were packed once, at compile
time, in the layout AVX-512 VNNI's dot product reads (`pack_vnni`: [N/16, K/4, 16, 4], four
consecutive reduction steps of sixteen output columns side by side), by the `pack_vnni_weights`
pass, as ONNX Runtime's MLAS packs a quantized GEMM's constant operand when the session starts.

It computes matmul_integer's [..., M, N] int32 output; the TensorizeVNNI rule then runs it with no
panel to pack per call (which cost a tensorized kernel as much as its dot products at 128 rows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import te
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import Pattern, check
from compiler.graph.ops.checks import register_op
from compiler.graph.ops.linalg import matmul_flops
from compiler.ir import Expr

LANES, STEPS = 16, 4  # the intrinsic's output columns and reduction steps


def pack_vnni(weights: np.ndarray) -> np.ndarray:
    """[K, N] weights as [N/16, K/4, 16, 4] (K a multiple of 4, N of 16)."""
    k, n = weights.shape
    return np.ascontiguousarray(weights.reshape(k // STEPS, STEPS, n // LANES, LANES).transpose(2, 0, 3, 1))


def unpack_vnni(packed: np.ndarray) -> np.ndarray:
    tiles, steps, lanes, four = packed.shape
    return packed.transpose(1, 3, 0, 2).reshape(steps * four, tiles * lanes)


def _type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check(len(args) == 2, f"takes 2 arguments, got {len(args)}")
    x, w = args
    check(x.dtype == "uint8" and w.dtype == "int8", f"takes uint8 x and int8 w, got {x.dtype} and {w.dtype}")
    check(
        len(x.shape) >= 2 and len(w.shape) == 4 and w.shape[2:] == (LANES, STEPS),
        f"needs x [..., M, K] and w [N/16, K/4, 16, 4], got {x.shape}, {w.shape}",
    )
    check(
        w.shape[1] * STEPS == x.shape[-1],
        f"w takes {w.shape[1] * STEPS} inputs per column, x has {x.shape[-1]}",
    )
    return TensorType((*x.shape[:-1], w.shape[0] * LANES), "int32")


def _compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    *batch, m, kk = x.shape
    k = te.reduce_axis((0, kk), "k")

    def body(*idx: Expr) -> Expr:
        *bi, i, j = idx
        weight = w[j // LANES, k // STEPS, j % LANES, k % STEPS]
        return te.sum(te.cast("int32", x[(*bi, i, k)]) * te.cast("int32", weight), axis=k)

    names = [f"n{d}" for d in range(len(batch))]
    return te.compute((*batch, m, w.shape[0] * LANES), body, name=name, axis_names=[*names, "i", "j"])


def _reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    return np.matmul(x.astype(np.int32), unpack_vnni(w).astype(np.int32))


register_op("matmul_integer_vnni", Pattern.ANCHOR, {}, _type, _compute, _reference, matmul_flops)
