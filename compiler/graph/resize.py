"""Resizing along axes (ONNX Resize, PyTorch's nearest and bilinear upsampling) as graph operators
that exist already: each axis in turn, its source coordinates computed at import (the sizes are
static), then `take` of the nearest source row, or two `take`s blended by constant weights (linear
interpolation is separable, so bilinear is linear along H, then along W). Fusion makes one kernel of
the chain."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import Node

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coordinates(in_len: int, out_len: int, scale: float, mode: str) -> np.ndarray:
    """Where each output index samples the input (ONNX's coordinate_transformation_mode), with
    `scale` = output / input length, in float64 as ONNX's reference computes them."""
    x = np.arange(out_len, dtype=np.float64)
    if mode == "asymmetric":
        return x / scale
    if mode == "align_corners":
        return x * ((in_len - 1) / (out_len - 1)) if out_len > 1 else np.zeros(out_len)
    if mode == "pytorch_half_pixel" and out_len == 1:
        return np.zeros(1)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        return (x + 0.5) / scale - 0.5
    raise ValueError(
        f"coordinate_transformation_mode {mode!r} is not supported ({', '.join(COORDINATE_MODES)})"
    )


def nearest_indices(coords: np.ndarray, in_len: int, rounding: str) -> np.ndarray:
    """The input row each coordinate takes (ONNX's nearest_mode), clamped into the input."""
    rounded = {
        "round_prefer_floor": np.ceil(coords - 0.5),
        "round_prefer_ceil": np.floor(coords + 0.5),
        "floor": np.floor(coords),
        "ceil": np.ceil(coords),
    }[rounding]
    return np.clip(rounded, 0, in_len - 1).astype(np.int64)


def resize_axis_nearest(b: GraphBuilder, name: str, x: Node, axis: int, indices: np.ndarray) -> Node:
    if np.array_equal(indices, np.arange(x.type.shape[axis])):
        return x
    return b.call("take", [x, b.constant(f"{name}_rows", indices)], name=name, axis=axis)


def resize_axis_linear(b: GraphBuilder, name: str, x: Node, axis: int, coords: np.ndarray) -> Node:
    """x[i0] (1 - w) + x[i1] w along `axis`, the coordinate clamped into the input (the edge row
    repeats outside it, as ONNX Runtime and PyTorch do)."""
    in_len = x.type.shape[axis]
    clamped = np.clip(coords.astype(np.float64), 0, in_len - 1)
    low = np.floor(clamped).astype(np.int64)
    high = np.minimum(low + 1, in_len - 1)
    weight = clamped - low
    if np.array_equal(low, np.arange(in_len)) and not weight.any():
        return x
    shape = (len(coords),) + (1,) * (len(x.type.shape) - axis - 1)
    dtype = x.type.dtype
    terms = []
    for rows, w in ((low, 1 - weight), (high, weight)):
        taken = b.call("take", [x, b.constant(f"{name}_rows", rows)], name=name, axis=axis)
        scale = b.constant(f"{name}_weights", w.astype(dtype).reshape(shape))
        terms.append(b.call("multiply", [taken, scale], name=name))
    return b.call("add", terms, name=name)


def resize(
    b: GraphBuilder,
    name: str,
    x: Node,
    sizes: Sequence[int],
    scales: Sequence[float],
    mode: str,
    coordinates: str,
    rounding: str = "floor",
) -> Node:
    """`x` resized to `sizes` along every axis; `scales[axis]` = output / input length, as the
    coordinate transformation reads it (the model's own scale, which may differ from the ratio of
    the sizes)."""
    for axis, (out_len, scale) in enumerate(zip(sizes, scales)):
        in_len = x.type.shape[axis]
        if out_len == in_len and scale == 1:
            continue
        coords = source_coordinates(in_len, out_len, scale, coordinates)
        if mode == "nearest":
            x = resize_axis_nearest(b, name, x, axis, nearest_indices(coords, in_len, rounding))
        else:
            x = resize_axis_linear(b, name, x, axis, coords)
    return x
