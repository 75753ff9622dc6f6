"""matmul_nblock: a matmul whose constant weights were packed in blocks of nb output columns,
[N/nb, K, nb] (`topi.pack_nblock`), by the `block_matmul_columns` pass.

It computes the same [..., M, N] output as matmul, through topi.matmul_nblock: the reduction writes
the columns as [..., M, N/nb, nb], the same bytes as [..., M, N], and a copy block gives them the
graph's shape. The copy is inlined into the fused epilogue (a dense layer's bias, its activation, a
residual add), or is the kernel's last block.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import te, topi
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import Pattern, check
from compiler.graph.ops.checks import float_args, register_op
from compiler.graph.ops.linalg import matmul_flops
from compiler.ir import Expr


def _type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = float_args(args, 2)
    check(
        len(x.shape) >= 2 and len(w.shape) == 3,
        f"needs x [..., M, K] (rank >= 2) and w [N/nb, K, nb] (rank 3), got {x.shape}, {w.shape}",
    )
    nblocks, k, nb = w.shape
    check(k == x.shape[-1], f"w takes {k} inputs per column, x has {x.shape[-1]}")
    return TensorType((*x.shape[:-1], nblocks * nb), x.dtype)


def _compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    blocked = topi.matmul_nblock(x, w, f"{name}_nblock")
    *batch, m, nblocks, nb = blocked.shape

    def copy(*idx: Expr) -> Expr:
        *bi, i, j = idx
        return blocked[(*bi, i, j // nb, j % nb)]

    return te.compute((*batch, m, nblocks * nb), copy, name=name)


def _reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    return np.matmul(x, topi.unpack_nblock(w))


register_op("matmul_nblock", Pattern.ANCHOR, {}, _type, _compute, _reference, matmul_flops)
