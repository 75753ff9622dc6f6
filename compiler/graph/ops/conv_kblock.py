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
from compiler.graph.op import Pattern, check
from compiler.graph.ops.checks import WINDOW_SCHEMA, conv_output_hw, float_args, register_op, window_attrs


def _type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = float_args(args, 2)
    check(
        len(x.shape) == 4 and len(w.shape) == 5,
        f"needs x NCHW (rank 4) and w [K/kb, C, R, S, kb] (rank 5), got {x.shape}, {w.shape}",
    )
    (N, C, H, W), (KB, wc, R, S, kb) = x.shape, w.shape
    check(wc == C, f"w takes {wc} input channels, x has {C}")
    oh, ow = conv_output_hw(H, W, R, S, window_attrs(attrs))
    return TensorType((N, KB * kb, oh, ow), x.dtype)


def _compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    blocked = topi.conv2d_nchw_kblock(x, w, *window_attrs(attrs), f"{name}_kblock", f"{name}_pad")
    N, _, OH, OW, kb = blocked.shape
    return te.compute(
        (N, blocked.shape[1] * kb, OH, OW), lambda n, f, y, x: blocked[n, f // kb, y, x, f % kb], name=name
    )


def _reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    return topi.conv2d_nchw_numpy(x, topi.unpack_kblock(w), *window_attrs(attrs), 1)


def _flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    _, C, R, S, _ = args[1].shape
    return 2 * out.size * C * R * S


register_op("conv2d_kblock", Pattern.ANCHOR, WINDOW_SCHEMA, _type, _compute, _reference, _flops)
