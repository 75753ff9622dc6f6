"""Transposed 2-D convolution (ConvTranspose, nn.ConvTranspose2d) as a direct conv2d: the input with
stride - 1 zero rows and columns between its own, padded by dilation * (kernel - 1) - padding on each
side (output_padding more at the end; negative amounts crop), convolved at stride 1 with the weight
flipped in space and its input and output channels swapped within each group. Every step is an
existing graph operator, so the conv is scheduled and tuned like any other (a constant weight's
transform folds at optimization); the zeros cost stride^2 times the multiply-adds of a scatter
formulation, which would need a schedule of its own."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import GraphError, Node


def conv_transpose2d(
    b: GraphBuilder,
    name: str,
    x: Node,
    weight: Node,
    strides: Sequence[int],
    padding: Sequence[int],
    output_padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Node:
    """`x` (N, C_in, H, W) transposed-convolved with `weight` (C_in, C_out / groups, kh, kw);
    `padding` is (top, left, bottom, right)."""
    c_in, _, *kernel = weight.type.shape
    if len(weight.type.shape) != 4 or x.type.shape[1] != c_in or c_in % groups:
        raise GraphError(
            name, "conv_transpose2d", f"weight {weight.type.shape} does not fit input {x.type.shape}"
        )
    for s, d, extra in zip(strides, dilation, output_padding):
        if s < 1 or d < 1 or not 0 <= extra < max(s, d):
            raise GraphError(
                name,
                "conv_transpose2d",
                f"output_padding {tuple(output_padding)} must be below the stride or dilation",
            )
    spread = _dilated(b, name, x, strides)
    crop, pads = [], []
    for axis in range(2):
        reach = dilation[axis] * (kernel[axis] - 1)
        before = reach - padding[axis]
        after = reach - padding[axis + 2] + output_padding[axis] - (strides[axis] - 1)
        crop.append((max(-before, 0), max(-after, 0)))
        pads.append((max(before, 0), max(after, 0)))
    spread = _cropped(b, name, spread, crop)
    return b.call(
        "conv2d",
        [spread, _flipped_weight(b, name, weight, groups)],
        name=name,
        strides=(1, 1),
        padding=(pads[0][0], pads[1][0], pads[0][1], pads[1][1]),
        dilation=tuple(dilation),
        groups=groups,
    )


def _dilated(b: GraphBuilder, name: str, x: Node, strides: Sequence[int]) -> Node:
    """x with stride - 1 zeros after each row and column: (N, C, H s, W s), whose last stride - 1
    rows and columns the padding takes off again."""
    n, c, h, w = x.type.shape
    sh, sw = strides
    if (sh, sw) == (1, 1):
        return x
    cells = b.call("reshape", [x], name=f"{name}_cells", shape=(n, c, h, 1, w, 1))
    padded = b.call(
        "pad", [cells], name=f"{name}_zeros", pads=(0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1), value=0.0
    )
    return b.call("reshape", [padded], name=f"{name}_spread", shape=(n, c, h * sh, w * sw))


def _cropped(b: GraphBuilder, name: str, x: Node, crop: Sequence[tuple[int, int]]) -> Node:
    """x without `crop[axis]` = (first, last) rows and columns."""
    if all(c == (0, 0) for c in crop):
        return x
    n, c, h, w = x.type.shape
    (top, bottom), (left, right) = crop
    if top + bottom >= h or left + right >= w:
        raise GraphError(name, "conv_transpose2d", "the padding leaves no output")
    return b.call(
        "slice",
        [x],
        name=f"{name}_crop",
        begin=(0, 0, top, left),
        end=(n, c, h - bottom, w - right),
        strides=(1, 1, 1, 1),
    )


def _flipped_weight(b: GraphBuilder, name: str, weight: Node, groups: int) -> Node:
    """(C_in, C_out / g, kh, kw) -> (C_out, C_in / g, kh, kw), reversed along both spatial axes."""
    c_in, c_out_g, kh, kw = weight.type.shape
    grouped = b.call("reshape", [weight], name=f"{name}_w", shape=(groups, c_in // groups, c_out_g, kh, kw))
    swapped = b.call("transpose", [grouped], name=f"{name}_w", axes=(0, 2, 1, 3, 4))
    w = b.call("reshape", [swapped], name=f"{name}_w", shape=(groups * c_out_g, c_in // groups, kh, kw))
    for axis, size in ((2, kh), (3, kw)):
        if size > 1:
            backwards = b.constant(f"{name}_reversed", np.arange(size - 1, -1, -1, dtype=np.int64))
            w = b.call("take", [w, backwards], name=f"{name}_w", axis=axis)
    return w
