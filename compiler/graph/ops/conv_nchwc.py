"""Convolutions in the NCHWc layout (`compiler.nchwc`), which the `nchwc_layout` pass puts a CNN's
depthwise convs and their neighbours in:

- conv2d_nchwc (x, w): groups 1, weights packed [K/kb, C, R, S, kb] (`topi.pack_kblock`);
- depthwise_conv2d_nchwc (x, w): one filter per channel, weights packed [C/cb, R, S, cb]
  (`nchwc.pack_depthwise`);
- from_nchwc (x, channels): the copy of the first `channels` back to NCHW (the others pad the last
  block), which fusion places in the producing conv's kernel.

Both convs read x in NCHW (rank 4) or NCHWc (rank 5, any block) and write NCHWc.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import nchwc, te, topi
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import Pattern, attr_int, check
from compiler.graph.ops.checks import (
    WINDOW_SCHEMA,
    at_least,
    conv_output_hw,
    float_args,
    register_op,
    window_attrs,
)


def _image(x: TensorType) -> None:
    check(len(x.shape) in (4, 5), f"needs x NCHW (rank 4) or NCHWc (rank 5), got {x.shape}")


def _out_size(x: TensorType, R: int, S: int, attrs: Attrs) -> tuple[int, int]:
    return conv_output_hw(x.shape[2], x.shape[3], R, S, window_attrs(attrs))


def _nchw(x: np.ndarray) -> np.ndarray:
    return nchwc.from_nchwc_numpy(x) if x.ndim == 5 else x


def _conv_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = float_args(args, 2)
    _image(x)
    check(len(w.shape) == 5, f"needs w [K/kb, C, R, S, kb] (rank 5), got {w.shape}")
    KB, C, R, S, kb = w.shape
    given = nchwc.channels(x.shape)
    check(given == C, f"w takes {C} input channels, x has {given}")
    oh, ow = _out_size(x, R, S, attrs)
    return TensorType((x.shape[0], KB, oh, ow, kb), x.dtype)


def _conv_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    return nchwc.conv2d_nchwc(x, w, window_attrs(attrs), name, f"{name}_pad")


def _conv_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    out = topi.conv2d_nchw_numpy(_nchw(x), topi.unpack_kblock(w), *window_attrs(attrs), 1)
    return nchwc.to_nchwc_numpy(out, w.shape[4])


def _conv_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    _, C, R, S, _ = args[1].shape
    return 2 * out.size * C * R * S


def _depthwise_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = float_args(args, 2)
    _image(x)
    check(len(w.shape) == 4, f"needs w [C/cb, R, S, cb] (rank 4), got {w.shape}")
    CB, R, S, cb = w.shape
    C = nchwc.channels(x.shape)
    check(CB * cb == C, f"w has filters for {CB * cb} channels, x has {C}")
    check(len(x.shape) == 4 or x.shape[4] == cb, f"x's channel block {x.shape[-1]} differs from w's {cb}")
    oh, ow = _out_size(x, R, S, attrs)
    return TensorType((x.shape[0], CB, oh, ow, cb), x.dtype)


def _depthwise_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    return nchwc.depthwise_conv2d_nchwc(x, w, window_attrs(attrs), name, f"{name}_pad")


def _depthwise_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    data = _nchw(x)
    out = topi.conv2d_nchw_numpy(data, nchwc.unpack_depthwise(w), *window_attrs(attrs), data.shape[1])
    return nchwc.to_nchwc_numpy(out, w.shape[3])


def _depthwise_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    _, R, S, _ = args[1].shape
    return 2 * out.size * R * S


def _from_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = float_args(args, 1)
    check(len(x.shape) == 5, f"needs x NCHWc (rank 5), got {x.shape}")
    N, CB, H, W, cb = x.shape
    channels = attr_int(attrs, "channels")
    check((CB - 1) * cb < channels <= CB * cb, f"channels={channels} do not end in x's last block of {cb}")
    return TensorType((N, channels, H, W), x.dtype)


register_op(
    "conv2d_nchwc", Pattern.ANCHOR, WINDOW_SCHEMA, _conv_type, _conv_compute, _conv_reference, _conv_flops
)
register_op(
    "depthwise_conv2d_nchwc",
    Pattern.ANCHOR,
    WINDOW_SCHEMA,
    _depthwise_type,
    _depthwise_compute,
    _depthwise_reference,
    _depthwise_flops,
)
register_op(
    "from_nchwc",
    Pattern.INJECTIVE,
    {"channels": at_least(1)},
    _from_type,
    lambda inputs, attrs, name: nchwc.from_nchwc(inputs[0], attr_int(attrs, "channels"), name),
    lambda arrays, attrs: nchwc.from_nchwc_numpy(arrays[0], attr_int(attrs, "channels")),
    lambda args, out, attrs: 0,
)
