"""Resizing along axes (ONNX Resize, PyTorch's nearest, bilinear and bicubic upsampling) as graph
operators that exist already: each axis in turn, its source coordinates computed at import (the sizes
are static), then `take` of the nearest source row, or a few `take`s blended by constant weights
(linear and cubic interpolation are separable: along H, then along W; antialiased downsampling
widens the filter to more taps). Fusion makes one kernel of the chain."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import Node

COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
MODES = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coordinates(
    in_len: int, out_len: int, scale: float, mode: str, roi: tuple[float, float] = (0.0, 1.0)
) -> np.ndarray:
    """Where each output index samples the input (ONNX's coordinate_transformation_mode), with
    `scale` = output / input length, in float64 as ONNX's reference computes them. tf_crop_and_resize
    samples the crop from roi[0] to roi[1] (fractions of the input's extent) corner to corner."""
    x = np.arange(out_len, dtype=np.float64)
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_len == 1:
            return np.full(1, 0.5 * (start + end) * (in_len - 1))
        return start * (in_len - 1) + x * ((end - start) * (in_len - 1) / (out_len - 1))
    if mode == "half_pixel_symmetric":
        # The centre of the input maps to the centre of the output even when the output length
        # was rounded down from in_len * scale.
        adjustment = out_len / (scale * in_len)
        return in_len / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5
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
    return resize_axis_taps(b, name, x, axis, np.stack([low, high]), np.stack([1 - weight, weight]))


@dataclass(frozen=True)
class Filter:
    """How an axis interpolates between source rows: the mode, antialiasing (a filter widened by
    1 / scale when downsampling, as PIL and torchvision do), cubic's coefficient `a` (-0.75 as
    ONNX and PyTorch default, -0.5 as PIL's), and whether taps outside the input are dropped
    (their weights renormalized) rather than repeating the edge row."""

    mode: str = "linear"
    antialias: bool = False
    cubic_a: float = -0.75
    exclude_outside: bool = False

    @property
    def plain_linear(self) -> bool:
        return self.mode == "linear" and not self.antialias and not self.exclude_outside


def _cubic_kernel(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter `a` (zero beyond |t| = 2)."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _offsets(f: Filter, scale: float) -> np.ndarray:
    """The source rows an output reads, relative to the row at or left of its coordinate."""
    if not f.antialias:
        return np.arange(-1, 3) if f.mode == "cubic" else np.arange(0, 2)
    support = 2 if f.mode == "cubic" else 1
    start = math.floor(-support / min(scale, 1.0)) + 1
    return np.arange(start, 2 - start)


def interpolation_taps(
    coords: np.ndarray, in_len: int, scale: float, f: Filter
) -> tuple[np.ndarray, np.ndarray]:
    """The source rows (taps x outputs, clamped into the input) and their weights for linear or
    cubic interpolation at `coords`, in float64 as ONNX's reference computes them."""
    coords = coords.astype(np.float64)
    whole = coords == np.floor(coords)
    # A coordinate on a row is read as ratio 1 from the row before, as ONNX's reference does.
    base = np.where(whole, coords - 1, np.floor(coords))
    ratio = coords - base
    offsets = _offsets(f, scale)[:, None]
    rows = base[None, :].astype(np.int64) + offsets
    distance = offsets - ratio[None, :]
    if f.antialias:
        distance = distance * min(scale, 1.0)
    if f.mode == "cubic":
        weights = _cubic_kernel(distance, f.cubic_a)
    else:
        weights = np.clip(1 - np.abs(distance), 0, 1)
    if f.antialias:
        weights = weights / weights.sum(axis=0, keepdims=True)
    if f.exclude_outside:
        weights = np.where((rows < 0) | (rows >= in_len), 0.0, weights)
        weights = weights / weights.sum(axis=0, keepdims=True)
    return np.clip(rows, 0, in_len - 1), weights


def resize_axis_taps(
    b: GraphBuilder, name: str, x: Node, axis: int, rows: np.ndarray, weights: np.ndarray
) -> Node:
    """Sum over taps of x[rows[k]] * weights[k] along `axis` (taps of zero weight everywhere are
    left out)."""
    shape = (rows.shape[1],) + (1,) * (len(x.type.shape) - axis - 1)
    dtype = x.type.dtype
    terms = []
    for tap_rows, w in zip(rows, weights):
        if not w.any():
            continue
        taken = b.call("take", [x, b.constant(f"{name}_rows", tap_rows)], name=name, axis=axis)
        scale = b.constant(f"{name}_weights", w.astype(dtype).reshape(shape))
        terms.append(b.call("multiply", [taken, scale], name=name))
    total = terms[0]
    for term in terms[1:]:
        total = b.call("add", [total, term], name=name)
    return total


def resize(
    b: GraphBuilder,
    name: str,
    x: Node,
    sizes: Sequence[int],
    scales: Sequence[float],
    f: Filter,
    coordinates: str,
    rounding: str = "floor",
    crop: Crop | None = None,
) -> Node:
    """`x` resized to `sizes` along every axis; `scales[axis]` = output / input length, as the
    coordinate transformation reads it (the model's own scale, which may differ from the ratio of
    the sizes). tf_crop_and_resize takes its crop (`Crop`)."""
    crop = crop or Crop(((0.0, 1.0),) * len(sizes))
    for axis, (out_len, scale) in enumerate(zip(sizes, scales)):
        in_len = x.type.shape[axis]
        roi = crop.roi[axis]
        if out_len == in_len and scale == 1 and roi == (0.0, 1.0):
            continue
        coords = source_coordinates(in_len, out_len, scale, coordinates, roi)
        if f.mode == "nearest":
            x = resize_axis_nearest(b, name, x, axis, nearest_indices(coords, in_len, rounding))
        elif f.plain_linear:
            x = resize_axis_linear(b, name, x, axis, coords)
        else:
            rows, weights = interpolation_taps(coords, in_len, scale, f)
            x = resize_axis_taps(b, name, x, axis, rows, weights)
        if coordinates == "tf_crop_and_resize":
            x = _extrapolated(b, name, x, axis, (coords < 0) | (coords > in_len - 1), crop.extrapolation)
    return x


@dataclass(frozen=True)
class Crop:
    """tf_crop_and_resize's region of each axis, (start, end) as fractions of its extent, and the
    value of the outputs that sample outside the input (TensorFlow's CropAndResize)."""

    roi: tuple[tuple[float, float], ...]
    extrapolation: float = 0.0


def _extrapolated(b: GraphBuilder, name: str, x: Node, axis: int, outside: np.ndarray, value: float) -> Node:
    """`x` with the rows along `axis` that sampled outside the input replaced by `value`. Per axis
    in turn, as the rest of the resize: a row outside along one axis is `value` whatever the other
    axes do, and interpolating rows of `value` along a later axis gives `value` again."""
    if not outside.any():
        return x
    shape = (len(outside),) + (1,) * (len(x.type.shape) - axis - 1)
    mask = b.constant(f"{name}_outside", outside.reshape(shape))
    fill = b.constant(f"{name}_extrapolation", np.full(1, value, x.type.dtype))
    return b.call("where", [mask, fill, x], name=name)
