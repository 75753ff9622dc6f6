"""2-D convolutions in the shape of TVM's topi (built by compiler.topi): a separate zero-padding block,
then the conv block.

Layouts: conv2d_nchw takes data [N, C, H, W] and weights [K, C, R, S] (OIHW) -> [N, K, OH, OW];
conv2d_nhwc takes data [N, H, W, C] and weights [R, S, C, K] (HWIO) -> [N, OH, OW, K];
depthwise_conv2d_nchw takes data [N, C, H, W] and weights [C, 1, R, S] (multiplier 1) -> [N, C, OH, OW];
conv2d_nchw_kblock takes data [N, C, H, W] and weights packed in blocks of kb output channels
[K/kb, C, R, S, kb] -> [N, K/kb, OH, OW, kb] (what the model graph runs for convs on small images).
Padding is symmetric on H and W; with padding=0 there is no padding block.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from compiler import te, topi
from compiler.workloads.registry import REQUIRED, OpGraph, Param, register
from compiler.workloads.workload import WorkloadError

CONV_PARAMS = {
    "N": REQUIRED, "C": REQUIRED, "H": REQUIRED, "W": REQUIRED, "R": REQUIRED, "S": REQUIRED,
    "stride": Param(1), "padding": Param(0, minimum=0), "dilation": Param(1),
}  # fmt: skip


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int, field: str) -> int:
    out = topi.conv_out_size(size, kernel, stride, padding, padding, dilation)
    if out < 1:
        span = dilation * (kernel - 1) + 1
        raise WorkloadError(field, f"kernel spans {span} but the padded input is only {size + 2 * padding}")
    return out


def _conv2d_nchw(
    data: te.Tensor, weight: te.Tensor, stride: int, padding: int, dilation: int, groups: int, name: str
) -> te.Tensor:
    p = padding
    return topi.conv2d_nchw(
        data, weight, (stride, stride), (p, p, p, p), (dilation, dilation), groups, name, "pad_temp"
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
    out = _conv2d_nchw(data, weight, stride, padding, dilation, 1, "conv2d_nchw")
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
    p = padding
    pad = topi.pad(data, (0, p, p, 0), (0, p, p, 0), 0.0, "pad_temp", ("n", "y", "x", "c"))
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


@register("conv2d_nchw_kblock", **CONV_PARAMS, K=REQUIRED, kb=Param(16))
def conv2d_nchw_kblock(
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
    kb: int,
    dtype: str,
) -> OpGraph:
    if K % kb:
        raise WorkloadError("params.kb", f"the block of output channels ({kb}) must divide K={K}")
    oh = _out_size(H, R, stride, padding, dilation, "params.R")
    ow = _out_size(W, S, stride, padding, dilation, "params.S")
    data = te.placeholder((N, C, H, W), dtype, "data")
    weight = te.placeholder((K // kb, C, R, S, kb), dtype, "weight")
    p = padding
    out = topi.conv2d_nchw_kblock(
        data, weight, (stride, stride), (p, p, p, p), (dilation, dilation), "conv2d_nchw_kblock", "pad_temp"
    )
    ref = partial(conv2d_nchw_kblock_ref, stride=stride, padding=padding, dilation=dilation)
    return OpGraph([data, weight], [out], ref, 2 * N * K * oh * ow * C * R * S)


@register("depthwise_conv2d_nchw", **CONV_PARAMS)
def depthwise_conv2d_nchw(
    N: int, C: int, H: int, W: int, R: int, S: int, stride: int, padding: int, dilation: int, dtype: str
) -> OpGraph:
    oh = _out_size(H, R, stride, padding, dilation, "params.R")
    ow = _out_size(W, S, stride, padding, dilation, "params.S")
    data, weight = te.placeholder((N, C, H, W), dtype, "data"), te.placeholder((C, 1, R, S), dtype, "weight")
    out = _conv2d_nchw(data, weight, stride, padding, dilation, C, "depthwise_conv2d_nchw")
    ref = partial(depthwise_conv2d_nchw_ref, stride=stride, padding=padding, dilation=dilation)
    return OpGraph([data, weight], [out], ref, 2 * N * C * oh * ow * R * S)


def conv2d_nchw_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, C, H, W], weight [K, C, R, S] -> [N, K, OH, OW]."""
    return [_conv_ref(data, weight, stride, padding, dilation, 1)]


def conv2d_nhwc_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, H, W, C], weight [R, S, C, K] -> [N, OH, OW, K], via the NCHW reference."""
    (out,) = conv2d_nchw_ref(
        data.transpose(0, 3, 1, 2), weight.transpose(3, 2, 0, 1), stride, padding, dilation
    )
    return [np.ascontiguousarray(out.transpose(0, 2, 3, 1))]


def conv2d_nchw_kblock_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, C, H, W], weight [K/kb, C, R, S, kb] -> [N, K/kb, OH, OW, kb], via the NCHW reference."""
    KB, *_, kb = weight.shape
    out = _conv_ref(data, topi.unpack_kblock(weight), stride, padding, dilation, 1)
    N, _, OH, OW = out.shape
    return [np.ascontiguousarray(out.reshape(N, KB, kb, OH, OW).transpose(0, 1, 3, 4, 2))]


def depthwise_conv2d_nchw_ref(
    data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0, dilation: int = 1
) -> list[np.ndarray]:
    """data [N, C, H, W], weight [C, 1, R, S] -> [N, C, OH, OW]."""
    return [_conv_ref(data, weight, stride, padding, dilation, data.shape[1])]


def _conv_ref(
    data: np.ndarray, weight: np.ndarray, stride: int, padding: int, dilation: int, groups: int
) -> np.ndarray:
    p = padding
    return topi.conv2d_nchw_numpy(data, weight, (stride, stride), (p, p, p, p), (dilation, dilation), groups)
