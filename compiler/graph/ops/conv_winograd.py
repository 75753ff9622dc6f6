"""conv2d_winograd: a stride-1 3x3 conv2d (groups 1) whose constant weights were transformed for
Winograd F(m x m, 3 x 3), [alpha, alpha, C, K] (`winograd.pack_winograd`), by the `winograd_convs`
pass.

It computes the same NCHW output as conv2d, through winograd.conv2d_winograd_nchw (input
transform, one matmul per transform point, output transform into blocks of output channels) and a
copy block back to NCHW, which fusion inlines into the epilogue as it does for conv2d_kblock. Its
FLOP count is the direct conv's, so that its GFLOPS compare with the conv it replaces (effective
GFLOPS: the kernel does fewer multiply-adds than that).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import te, winograd
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import Pattern, attr_ints, check
from compiler.graph.ops.checks import float_args, ints, register_op

CHANNEL_BLOCKS = (16, 8, 4, 2, 1)


def _type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, u = float_args(args, 2)
    check(
        len(x.shape) == 4 and len(u.shape) == 4,
        f"needs x NCHW (rank 4) and w [alpha, alpha, C, K] (rank 4), got {x.shape}, {u.shape}",
    )
    (N, C, H, W), (alpha, beta, uc, K) = x.shape, u.shape
    m = alpha - winograd.KERNEL + 1
    check(alpha == beta and m in winograd.TILES, f"w is not Winograd weights of a tile in {winograd.TILES}")
    check(uc == C, f"w takes {uc} input channels, x has {C}")
    t = winograd.tiling(H, W, _padding(attrs), m)
    check(t.oh >= 1 and t.ow >= 1, "the 3x3 kernel does not fit the padded input")
    return TensorType((N, K, t.oh, t.ow), x.dtype)


def _padding(attrs: Attrs) -> tuple[int, int, int, int]:
    top, left, bottom, right = attr_ints(attrs, "padding")
    return top, left, bottom, right


def _compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, u = inputs
    K = u.shape[3]
    kb = next(b for b in CHANNEL_BLOCKS if K % b == 0)
    blocked = winograd.conv2d_winograd_nchw(x, u, _padding(attrs), kb, f"{name}_wino")
    N, _, OH, OW, _ = blocked.shape
    return te.compute((N, K, OH, OW), lambda n, f, y, x: blocked[n, f // kb, y, x, f % kb], name=name)


def _reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, u = inputs
    return winograd.conv2d_winograd_numpy(x, u, _padding(attrs))


def _flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return 2 * out.size * args[1].shape[2] * winograd.KERNEL**2


SCHEMA = {"padding": ints(4, 0)}
register_op("conv2d_winograd", Pattern.ANCHOR, SCHEMA, _type, _compute, _reference, _flops)
