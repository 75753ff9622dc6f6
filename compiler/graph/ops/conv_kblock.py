"""conv2d_kblock: a conv2d (groups 1) whose constant weights were packed in blocks of kb output
channels, [K/kb, C, R, S, kb] (`topi.pack_kblock`), by the `block_conv_channels` pass.

It computes the same NCHW output as conv2d, through topi.conv2d_nchw_kblock: the reduction writes
the channels in blocks of kb, innermost, and a copy block puts them back in NCHW order. So the
tuner vectorizes the reduction along output channels, contiguous in the packed weights, whatever
the image size, and the graph around it (the epilogue fused into it, the next layer) still sees
NCHW: the copy is inlined into the fused epilogue, or is the kernel's last block.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import te, topi
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import Pattern, attr_ints, check
from compiler.graph.ops.checks import float_args, ints, register_op


def _type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = float_args(args, 2)
    check(
        len(x.shape) == 4 and len(w.shape) == 5,
        f"needs x NCHW (rank 4) and w [K/kb, C, R, S, kb] (rank 5), got {x.shape}, {w.shape}",
    )
    (N, C, H, W), (KB, wc, R, S, kb) = x.shape, w.shape
    check(wc == C, f"w takes {wc} input channels, x has {C}")
    (sh, sw), (top, left, bottom, right), (dh, dw) = _attrs(attrs)
    oh, ow = topi.conv_out_size(H, R, sh, top, bottom, dh), topi.conv_out_size(W, S, sw, left, right, dw)
    check(oh >= 1 and ow >= 1, f"the kernel ({R}x{S}) does not fit the padded input")
    return TensorType((N, KB * kb, oh, ow), x.dtype)


def _attrs(attrs: Attrs) -> tuple[tuple[int, int], topi.Padding, tuple[int, int]]:
    (sh, sw), (t, left, b, r), (dh, dw) = (attr_ints(attrs, k) for k in ("strides", "padding", "dilation"))
    return (sh, sw), (t, left, b, r), (dh, dw)


def _compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    blocked = topi.conv2d_nchw_kblock(x, w, *_attrs(attrs), f"{name}_kblock", f"{name}_pad")
    N, _, OH, OW, kb = blocked.shape
    return te.compute(
        (N, blocked.shape[1] * kb, OH, OW), lambda n, f, y, x: blocked[n, f // kb, y, x, f % kb], name=name
    )


def _reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    return topi.conv2d_nchw_numpy(x, topi.unpack_kblock(w), *_attrs(attrs), 1)


def _flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    _, C, R, S, _ = args[1].shape
    return 2 * out.size * C * R * S


SCHEMA = {"strides": ints(2, 1), "padding": ints(4, 0), "dilation": ints(2, 1)}
register_op("conv2d_kblock", Pattern.ANCHOR, SCHEMA, _type, _compute, _reference, _flops)
