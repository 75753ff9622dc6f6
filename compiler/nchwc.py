"""The NCHWc layout: an image's channels in blocks of cb, innermost, [N, C/cb, H, W, cb], as ONNX
Runtime's MLAS and TVM's x86 schedules keep the activations between the layers of a CNN.

Why: in NCHW the innermost loop of a convolution is the image's width, which a 7- or 14-wide layer
fills to part of a 16-lane vector and a stride-2 layer reads with strided loads. In NCHWc it is a
block of channels: a depthwise conv's taps become contiguous vector loads and multiplies by one
vector of per-channel weights, and a dense conv broadcasts each input value against a block of
output channels, whatever the image size and the stride. Blocked layers that feed each other
skip the copies back to NCHW between them.

The te computes read their input either in NCHW (rank 4) or in NCHWc (rank 5) and write NCHWc;
`from_nchwc` is the copy back. A layer whose channels do not fill whole blocks (MobileNetV2's 24)
is padded with zero channels, as ONNX Runtime does, and the copy back drops them. A dense conv's
weights are packed as for `topi.conv2d_nchw_kblock` ([K/kb, C, R, S, kb]), a depthwise conv's as
[C/cb, R, S, cb].
"""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.ir import Expr


def to_nchwc_numpy(x: np.ndarray, cb: int) -> np.ndarray:
    """[N, C, H, W] as [N, C/cb, H, W, cb]."""
    N, C, H, W = x.shape
    return np.ascontiguousarray(x.reshape(N, C // cb, cb, H, W).transpose(0, 1, 3, 4, 2))


def from_nchwc_numpy(x: np.ndarray, channels: int | None = None) -> np.ndarray:
    """[N, C/cb, H, W, cb] back as [N, C, H, W], only its first `channels` (all by default)."""
    N, CB, H, W, cb = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(N, CB * cb, H, W)[:, :channels])


def whole_blocks(channels: int, cb: int) -> int:
    """`channels` rounded up to whole blocks of cb."""
    return -(-channels // cb) * cb


def zero_padded(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    """`a` with zeros appended along `axis` up to `size`: a layer's channels padded to whole blocks
    (zero filters compute zeros; zero weights ignore whatever a padded input channel holds)."""
    pads = [(0, 0)] * a.ndim
    pads[axis] = (0, size - a.shape[axis])
    return np.pad(a, pads)


def channels(shape: tuple[int, ...]) -> int:
    """The channel count of an NCHW (rank 4) or NCHWc (rank 5) shape."""
    return shape[1] * shape[4] if len(shape) == 5 else shape[1]


def pack_depthwise(weight: np.ndarray, cb: int) -> np.ndarray:
    """Depthwise weights [C, 1, R, S] as [C/cb, R, S, cb]."""
    C, _, R, S = weight.shape
    return np.ascontiguousarray(weight.reshape(C // cb, cb, R, S).transpose(0, 2, 3, 1))


def unpack_depthwise(packed: np.ndarray) -> np.ndarray:
    """Depthwise weights [C/cb, R, S, cb] back as [C, 1, R, S]."""
    CB, R, S, cb = packed.shape
    return packed.transpose(0, 3, 1, 2).reshape(CB * cb, 1, R, S)


def from_nchwc(data: te.Tensor, channels: int, name: str) -> te.Tensor:
    """The copy of an NCHWc tensor's first `channels` back to NCHW (the rest pad the last block)."""
    N, _, H, W, cb = data.shape
    return te.compute((N, channels, H, W), lambda n, c, y, x: data[n, c // cb, y, x, c % cb], name=name)


def _padded(data: te.Tensor, padding: topi.Padding, name: str) -> te.Tensor:
    top, left, bottom, right = padding
    if len(data.shape) == 4:
        return topi.pad(data, (0, 0, top, left), (0, 0, bottom, right), 0.0, name, topi.NCHW)
    return topi.pad(data, (0, 0, top, left, 0), (0, 0, bottom, right, 0), 0.0, name, (*topi.NCHW, "c_in"))


def conv2d_nchwc(
    data: te.Tensor, weight: te.Tensor, window: topi.Window, name: str, pad_name: str
) -> te.Tensor:
    """data [N, C, H, W] or [N, C/cb, H, W, cb] * weight [K/kb, C, R, S, kb] -> [N, K/kb, OH, OW, kb]
    (groups 1). On NCHW data this is `topi.conv2d_nchw_kblock`; on NCHWc data the reduction over
    channels runs as two loops, over blocks and within them."""
    if len(data.shape) == 4:
        return topi.conv2d_nchw_kblock(data, weight, *window, name, pad_name)
    (N, CB, _, _, cb), (KB, _, R, S, kb) = data.shape, weight.shape
    (sh, sw), padding, (dh, dw) = window
    oh, ow = topi.conv_out_hw(data.shape[2], data.shape[3], (R, S), window)
    padded = _padded(data, padding, pad_name)
    rco, rci = te.reduce_axis((0, CB), "rco"), te.reduce_axis((0, cb), "rci")
    ry, rx = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")
    return te.compute(
        (N, KB, oh, ow, kb),
        lambda n, fo, y, x, fi: te.sum(
            padded[n, rco, y * sh + ry * dh, x * sw + rx * dw, rci] * weight[fo, rco * cb + rci, ry, rx, fi],
            axis=[rco, rci, ry, rx],
        ),
        name=name,
    )


def depthwise_conv2d_nchwc(
    data: te.Tensor, weight: te.Tensor, window: topi.Window, name: str, pad_name: str
) -> te.Tensor:
    """data [N, C, H, W] or [N, C/cb, H, W, cb] * weight [C/cb, R, S, cb] -> [N, C/cb, OH, OW, cb]:
    one filter per channel (groups = channels, one output channel each)."""
    CB, R, S, cb = weight.shape
    (sh, sw), padding, (dh, dw) = window
    oh, ow = topi.conv_out_hw(data.shape[2], data.shape[3], (R, S), window)
    padded = _padded(data, padding, pad_name)
    ry, rx = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")

    def tap(n: Expr, co: Expr, y: Expr, x: Expr, ci: Expr) -> Expr:
        iy, ix = y * sh + ry * dh, x * sw + rx * dw
        return padded[n, co * cb + ci, iy, ix] if len(data.shape) == 4 else padded[n, co, iy, ix, ci]

    return te.compute(
        (data.shape[0], CB, oh, ow, cb),
        lambda n, co, y, x, ci: te.sum(tap(n, co, y, x, ci) * weight[co, ry, rx, ci], axis=[ry, rx]),
        name=name,
    )
