"""numpy's way to compute each operator of bench/peer_suite.py, as a numpy user would write it: a
matmul is one BLAS call, a conv2d im2col + one matmul (the usual way to run a convolution on a BLAS),
a channel-blocked conv2d im2col + one batched matmul over the blocks, a depthwise conv2d (no matmul
in it) a sum of shifted products. Imports numpy only: it runs in the
timing process of `make bench-peers` (.venv-tvm) as well as in the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def im2col_conv2d(data: np.ndarray, weight: np.ndarray, stride: int, padding: int, out: np.ndarray) -> None:
    """Every output pixel's window as a column, times the filters: one matmul per image. A 1x1
    stride-1 convolution's columns are the image itself (no copy)."""
    k, c, r, s = weight.shape
    filters = weight.reshape(k, c * r * s)
    for n, cols in enumerate(_columns(data, r, s, stride, padding)):
        np.matmul(filters, cols, out=out[n].reshape(k, cols.shape[1]))


def im2col_conv2d_kblock(
    data: np.ndarray, weight: np.ndarray, stride: int, padding: int, out: np.ndarray
) -> None:
    """Weights [K/kb, C, R, S, kb], output [N, K/kb, OH, OW, kb]: the columns transposed times each
    block of filters, one batched matmul per image, all views but the columns."""
    kblocks, c, r, s, kb = weight.shape
    filters = weight.reshape(kblocks, c * r * s, kb)
    for n, cols in enumerate(_columns(data, r, s, stride, padding)):
        np.matmul(cols.T[None], filters, out=out[n].reshape(kblocks, cols.shape[1], kb))


def _columns(data: np.ndarray, r: int, s: int, stride: int, padding: int) -> list[np.ndarray]:
    """Per image, its windows as columns [C*R*S, OH*OW]."""
    c = data.shape[1]
    if r == s == 1 and stride == 1 and padding == 0:
        return [image.reshape(c, -1) for image in data]
    padded = np.pad(data, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (r, s), axis=(2, 3))[:, :, ::stride, ::stride]
    oh, ow = windows.shape[2], windows.shape[3]
    return [w.transpose(0, 3, 4, 1, 2).reshape(c * r * s, oh * ow) for w in windows]


def depthwise_conv2d(
    data: np.ndarray, weight: np.ndarray, stride: int, padding: int, out: np.ndarray
) -> None:
    """One multiply-add of a shifted, strided view of the padded image per filter tap."""
    _, _, r, s = weight.shape
    oh, ow = out.shape[2], out.shape[3]
    padded = np.pad(data, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out[...] = 0
    for y in range(r):
        for x in range(s):
            view = padded[:, :, y : y + stride * oh : stride, x : x + stride * ow : stride]
            out += view * weight[:, 0, y, x][None, :, None, None]


Kernel = Callable[..., None]  # inputs..., output: writes the output


def _product(params: dict[str, Any]) -> Kernel:
    return lambda a, b, c: np.matmul(a, b, out=c)


def _window(params: dict[str, Any]) -> tuple[int, int]:
    if params.get("dilation", 1) != 1:
        raise ValueError("the numpy baselines of convolutions have no dilation")
    return params["stride"], params["padding"]


def _conv2d(params: dict[str, Any]) -> Kernel:
    stride, padding = _window(params)
    return lambda data, weight, out: im2col_conv2d(data, weight, stride, padding, out)


def _conv2d_kblock(params: dict[str, Any]) -> Kernel:
    stride, padding = _window(params)
    return lambda data, weight, out: im2col_conv2d_kblock(data, weight, stride, padding, out)


def _depthwise(params: dict[str, Any]) -> Kernel:
    stride, padding = _window(params)
    return lambda data, weight, out: depthwise_conv2d(data, weight, stride, padding, out)


BASELINES: dict[str, Callable[[dict[str, Any]], Kernel]] = {
    "matmul": _product,
    "batch_matmul": _product,
    "conv2d_nchw": _conv2d,
    "conv2d_nchw_kblock": _conv2d_kblock,
    "depthwise_conv2d_nchw": _depthwise,
}


def numpy_kernel(op: str, params: dict[str, Any]) -> Kernel:
    """numpy's way to compute `op` with these (canonical spec) parameters."""
    if op not in BASELINES:
        raise ValueError(f"no numpy baseline for {op!r}; add one to BASELINES")
    return BASELINES[op](params)
