"""2-D convolutions in the shape of TVM's topi: a separate zero-padding block, then the conv block.

Layouts: conv2d_nchw takes data [N, C, H, W] and weights [K, C, R, S] (OIHW) -> [N, K, OH, OW];
conv2d_nhwc takes data [N, H, W, C] and weights [R, S, C, K] (HWIO) -> [N, OH, OW, K];
depthwise_conv2d_nchw takes data [N, C, H, W] and weights [C, 1, R, S] (multiplier 1) -> [N, C, OH, OW].
Padding is symmetric on H and W; with padding=0 there is no padding block.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from compiler import te
from compiler.ir import Expr
from compiler.workloads.registry import REQUIRED, OpGraph, Param, register
from compiler.workloads.workload import WorkloadError

CONV_PARAMS = {
    "N": REQUIRED, "C": REQUIRED, "H": REQUIRED, "W": REQUIRED, "R": REQUIRED, "S": REQUIRED,
    "stride": Param(1), "padding": Param(0, minimum=0), "dilation": Param(1),
}  # fmt: skip


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int, field: str) -> int:
    span = dilation * (kernel - 1) + 1
    if size + 2 * padding < span:
        raise WorkloadError(field, f"kernel spans {span} but the padded input is only {size + 2 * padding}")
    return (size + 2 * padding - span) // stride + 1


def _inside(y: Expr, x: Expr, pad: int, height: int, width: int) -> Expr:
    return te.all(y >= pad, y < height + pad, x >= pad, x < width + pad)


def _pad_nchw(data: te.Tensor, pad: int) -> te.Tensor:
    if pad == 0:
        return data
    N, C, H, W = data.shape
    return te.compute(
        (N, C, H + 2 * pad, W + 2 * pad),
        lambda n, c, y, x: te.select(_inside(y, x, pad, H, W), data[n, c, y - pad, x - pad], 0.0),
        name="pad_temp",
    )


def _pad_nhwc(data: te.Tensor, pad: int) -> te.Tensor:
    if pad == 0:
        return data
    N, H, W, C = data.shape
    return te.compute(
        (N, H + 2 * pad, W + 2 * pad, C),
        lambda n, y, x, c: te.select(_inside(y, x, pad, H, W), data[n, y - pad, x - pad, c], 0.0),
        name="pad_temp",
    )


@register("conv2d_nchw", **CONV_PARAMS, K=REQUIRED)
def conv2d_nchw(
    N: int,
    C: int,
    H: int,
    W: int,
    K: int,
    R: int,
    S: int,
    stride: int,
    padding: int,
    dilation: int,
    dtype: str,
) -> OpGraph:
    oh = _out_size(H, R, stride, padding, dilation, "params.R")
    ow = _out_size(W, S, stride, padding, dilation, "params.S")
    data, weight = te.placeholder((N, C, H, W), dtype, "data"), te.placeholder((K, C, R, S), dtype, "weight")
    pad = _pad_nchw(data, padding)
    rc, ry, rx = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")
    out = te.compute(
        (N, K, oh, ow),
        lambda n, f, y, x: te.sum(
            pad[n, rc, y * stride + ry * dilation, x * stride + rx * dilation] * weight[f, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv2d_nchw",
    )
    ref = partial(conv2d_nchw_ref, stride=stride, padding=padding, dilation=dilation)
    return OpGraph([data, weight], [out], ref, 2 * N * K * oh * ow * C * R * S)


@register("conv2d_nhwc", **CONV_PARAMS, K=REQUIRED)
def conv2d_nhwc(
    N: int,
    C: int,
    H: int,
    W: int,
    K: int,
    R: int,
    S: int,
    stride: int,
    padding: int,
    dilation: int,
    dtype: str,
) -> OpGraph:
    oh = _out_size(H, R, stride, padding, dilation, "params.R")
    ow = _out_size(W, S, stride, padding, dilation, "params.S")
    data, weight = te.placeholder((N, H, W, C), dtype, "data"), te.placeholder((R, S, C, K), dtype, "weight")
    pad = _pad_nhwc(data, padding)
    ry, rx, rc = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx"), te.reduce_axis((0, C), "rc")
    out = te.compute(
        (N, oh, ow, K),
        lambda n, y, x, f: te.sum(
            pad[n, y * stride + ry * dilation, x * stride + rx * dilation, rc] * weight[ry, rx, rc, f],
            axis=[ry, rx, rc],
        ),
        name="conv2d_nhwc",
    )
    ref = partial(conv2d_nhwc_ref, stride=stride, padding=padding, dilation=dilation)
    return OpGraph([data, weight], [out], ref, 2 * N * K * oh * ow * C * R * S)


@register("depthwise_conv2d_nchw", **CONV_PARAMS)
def depthwise_conv2d_nchw(
    N: int, C: int, H: int, W: int, R: int, S: int, stride: int, padding: int, dilation: int, dtype: str
) -> OpGraph:
    oh = _out_size(H, R, stride, padding, dilation, "params.R")
    ow = _out_size(W, S, stride, padding, dilation, "params.S")
    data, weight = te.placeholder((N, C, H, W), dtype, "data"), te.placeholder((C, 1, R, S), dtype, "weight")
    pad = _pad_nchw(data, padding)
    ry, rx = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")
    out = te.compute(
        (N, C, oh, ow),
        lambda n, c, y, x: te.sum(
            pad[n, c, y * stride + ry * dilation, x * stride + rx * dilation] * weight[c, 0, ry, rx],
            axis=[ry, rx],
        ),
        name="depthwise_conv2d_nchw",
    )
    ref = partial(depthwise_conv2d_nchw_ref, stride=stride, padding=padding, dilation=dilation)
    return OpGraph([data, weight], [out], ref, 2 * N * C * oh * ow * R * S)


def conv2d_nchw_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, C, H, W], weight [K, C, R, S] -> [N, K, OH, OW]."""
    return [_sum_of_taps(data, weight, stride, padding, dilation, "nchw,kc->nkhw")]


def conv2d_nhwc_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, H, W, C], weight [R, S, C, K] -> [N, OH, OW, K], via the NCHW reference."""
    (out,) = conv2d_nchw_ref(
        data.transpose(0, 3, 1, 2), weight.transpose(3, 2, 0, 1), stride, padding, dilation
    )
    return [np.ascontiguousarray(out.transpose(0, 2, 3, 1))]


def depthwise_conv2d_nchw_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, C, H, W], weight [C, 1, R, S] -> [N, C, OH, OW]."""
    return [_sum_of_taps(data, weight[:, 0], stride, padding, dilation, "nchw,c->nchw")]


def _sum_of_taps(
    data: np.ndarray, weight: np.ndarray, stride: int, padding: int, dilation: int, subscripts: str
) -> np.ndarray:
    """Sum over kernel taps (r, s) of `einsum(subscripts, strided window of data, weight[..., r, s])`:
    one vectorized product per tap keeps memory at one output's worth."""
    p = padding
    padded = np.pad(data, ((0, 0), (0, 0), (p, p), (p, p)))
    R, S = weight.shape[-2:]
    oh = (padded.shape[2] - dilation * (R - 1) - 1) // stride + 1
    ow = (padded.shape[3] - dilation * (S - 1) - 1) // stride + 1
    out: np.ndarray | None = None
    for r in range(R):
        for s in range(S):
            y0, x0 = r * dilation, s * dilation
            window = padded[
                :, :, y0 : y0 + stride * (oh - 1) + 1 : stride, x0 : x0 + stride * (ow - 1) + 1 : stride
            ]
            tap = np.einsum(subscripts, window, weight[..., r, s])
            out = tap if out is None else out + tap
    assert out is not None  # a kernel has at least one tap
    return out
