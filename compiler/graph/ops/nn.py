"""Convolution and pooling over NCHW tensors, with PyTorch's semantics: conv2d (the anchor that
fusion builds kernels around), max_pool2d and avg_pool2d (ceil_mode and count_include_pad as
PyTorch computes them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler import te, topi
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import OpDef, Pattern, attr_int, attr_ints, check, register
from compiler.graph.ops.checks import flag, float_args, integer, ints
from compiler.ir import Expr


def _conv2d_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = float_args(args, 2)
    check(
        len(x.shape) == 4 and len(w.shape) == 4, f"needs x NCHW and w KCRS (rank 4), got {x.shape}, {w.shape}"
    )
    (sh, sw), (top, left, bottom, right) = ints(attrs, "strides", 2, 1), ints(attrs, "padding", 4, 0)
    (dh, dw), groups = ints(attrs, "dilation", 2, 1), integer(attrs, "groups", 1)
    (N, C, H, W), (K, cg, R, S) = x.shape, w.shape
    check(C % groups == 0 and K % groups == 0, f"groups={groups} must divide the channels C={C} and K={K}")
    check(
        cg == C // groups,
        f"w takes {cg} input channels per group, x has {C // groups} ({C} in {groups} group(s))",
    )
    oh, ow = topi.conv_out_size(H, R, sh, top, bottom, dh), topi.conv_out_size(W, S, sw, left, right, dw)
    spans, padded = (_span(R, dh), _span(S, dw)), (H + top + bottom, W + left + right)
    check(oh >= 1 and ow >= 1, f"the kernel spans {spans}, more than the padded input {padded}")
    return TensorType((N, K, oh, ow), x.dtype)


def _span(kernel: int, dilation: int) -> int:
    return dilation * (kernel - 1) + 1


def _conv_attrs(attrs: Attrs) -> tuple[tuple[int, int], topi.Padding, tuple[int, int], int]:
    (sh, sw), (t, left, b, r), (dh, dw) = (attr_ints(attrs, k) for k in ("strides", "padding", "dilation"))
    return (sh, sw), (t, left, b, r), (dh, dw), attr_int(attrs, "groups")


def _conv2d_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    x, w = inputs
    return topi.conv2d_nchw(x, w, *_conv_attrs(attrs), name, f"{name}_pad")


def _conv2d_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = inputs
    return topi.conv2d_nchw_numpy(x, w, *_conv_attrs(attrs))


def _conv2d_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return 2 * out.size * math.prod(args[1].shape[1:])  # one multiply-add per tap per output


register(OpDef("conv2d", Pattern.ANCHOR, _conv2d_type, _conv2d_compute, _conv2d_reference, _conv2d_flops))


@dataclass(frozen=True)
class _Window:
    """A pooling window along one axis of `size` elements, padded by `before` and `after`. Every
    output position o reads taps o*stride + j*dilation (j < kernel) of the padded axis."""

    size: int
    kernel: int
    stride: int
    before: int
    after: int
    dilation: int
    ceil_mode: bool

    @property
    def span(self) -> int:
        return _span(self.kernel, self.dilation)

    @property
    def out(self) -> int:
        """PyTorch's pooling_output_shape: in ceil mode, a last partial window counts only if it
        starts inside the input or its left padding."""
        room = self.size + self.before + self.after - self.span
        out = (-(-room // self.stride) if self.ceil_mode else room // self.stride) + 1
        return out - 1 if self.ceil_mode and (out - 1) * self.stride >= self.size + self.before else out

    @property
    def overflow(self) -> int:
        """How far past the input the windows read: at most `after`, except that ceil mode's last
        window may reach past the padding (PyTorch clips it; here it reads the pad value)."""
        return max(0, (self.out - 1) * self.stride + self.span - self.size - self.before)

    def taps_inside(self, o: int, lo: int, hi: int) -> int:
        """How many taps of window o land in [lo, hi) of the unpadded axis."""
        start = o * self.stride - self.before
        return sum(lo <= start + j * self.dilation < hi for j in range(self.kernel))


def _windows(attrs: Attrs, shape: Sequence[int], dilation: tuple[int, ...]) -> tuple[_Window, _Window]:
    """The H and W windows of a pool over an NCHW tensor (attributes checked by the type rule)."""
    kernel, strides, (top, left, bottom, right) = (
        attr_ints(attrs, k) for k in ("kernel", "strides", "padding")
    )
    ceil_mode = bool(attrs["ceil_mode"])
    h = _Window(shape[2], kernel[0], strides[0], top, bottom, dilation[0], ceil_mode)
    return h, _Window(shape[3], kernel[1], strides[1], left, right, dilation[1], ceil_mode)


def _pool_type(args: Sequence[TensorType], attrs: Attrs, dilation: tuple[int, ...]) -> TensorType:
    (x,) = float_args(args, 1)
    check(len(x.shape) == 4, f"needs an NCHW tensor (rank 4), got shape {x.shape}")
    for key, length, minimum in (("kernel", 2, 1), ("strides", 2, 1), ("padding", 4, 0)):
        ints(attrs, key, length, minimum)
    flag(attrs, "ceil_mode")
    h, w = _windows(attrs, x.shape, dilation)
    for axis, win in (("H", h), ("W", w)):
        padded = win.size + win.before + win.after
        check(
            win.span <= padded, f"the window spans {win.span} on {axis}, more than the padded input {padded}"
        )
        empty = [o for o in range(win.out) if win.taps_inside(o, 0, win.size) == 0]
        check(not empty, f"the window of output {empty[:1]} on {axis} lies entirely in the padding")
    return TensorType((*x.shape[:2], h.out, w.out), x.dtype)


def _padded_windows(data: np.ndarray, h: _Window, w: _Window, value: float) -> np.ndarray:
    """[N, C, OH, OW, KH, KW]: the taps of every window of `data` padded with `value`."""
    pads = ((0, 0), (0, 0), (h.before, h.overflow), (w.before, w.overflow))
    padded = np.pad(data, pads, constant_values=value)
    view = sliding_window_view(padded, (h.span, w.span), axis=(2, 3))
    return view[:, :, :: h.stride, :: w.stride, :: h.dilation, :: w.dilation][:, :, : h.out, : w.out]


def _padded(data: te.Tensor, h: _Window, w: _Window, value: float, name: str) -> te.Tensor:
    """The padding the windows read (ceil mode's overflow included), as one block."""
    before, after = (0, 0, h.before, w.before), (0, 0, h.overflow, w.overflow)
    return topi.pad(data, before, after, value, name, topi.NCHW)


def _pool_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    kh, kw = attr_ints(attrs, "kernel")
    return out.size * kh * kw


def _max_pool_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _pool_type(args, attrs, ints(attrs, "dilation", 2, 1))


def _max_pool_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    """The windows' max over data padded with -inf (a block, as conv2d's padding)."""
    (data,) = inputs
    h, w = _windows(attrs, data.shape, attr_ints(attrs, "dilation"))
    padded = _padded(data, h, w, -math.inf, f"{name}_pad")
    ry, rx = te.reduce_axis((0, h.kernel), "ry"), te.reduce_axis((0, w.kernel), "rx")
    return te.compute(
        (*data.shape[:2], h.out, w.out),
        lambda n, c, y, x: te.max(
            padded[n, c, y * h.stride + ry * h.dilation, x * w.stride + rx * w.dilation], axis=[ry, rx]
        ),
        name=name,
    )


def _max_pool_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = inputs
    h, w = _windows(attrs, data.shape, attr_ints(attrs, "dilation"))
    return _padded_windows(data, h, w, -np.inf).max(axis=(-2, -1))


register(
    OpDef(
        "max_pool2d", Pattern.REDUCTION, _max_pool_type, _max_pool_compute, _max_pool_reference, _pool_flops
    )
)


def _avg_pool_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    flag(attrs, "count_include_pad")
    return _pool_type(args, attrs, (1, 1))


def _avg_pool_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    """A sum block over the zero-padded windows, then the division by each window's count."""
    (data,) = inputs
    h, w = _windows(attrs, data.shape, (1, 1))
    padded = _padded(data, h, w, 0.0, f"{name}_pad")
    ry, rx = te.reduce_axis((0, h.kernel), "ry"), te.reduce_axis((0, w.kernel), "rx")
    shape = (*data.shape[:2], h.out, w.out)
    total = te.compute(
        shape,
        lambda n, c, y, x: te.sum(padded[n, c, y * h.stride + ry, x * w.stride + rx], axis=[ry, rx]),
        name=f"{name}_sum",
    )
    include = bool(attrs["count_include_pad"])

    def average(n: Expr, c: Expr, y: Expr, x: Expr) -> Expr:
        return total[n, c, y, x] / te.cast(total.dtype, _count(h, y, include) * _count(w, x, include))

    return te.compute(shape, average, name=name)


def _count(win: _Window, o: Expr, include_pad: bool) -> Expr | int:
    """How many taps window `o` counts: those inside the padded axis (PyTorch leaves out only ceil
    mode's overflow) or only those inside the input; a constant when every window counts the same."""
    lo, hi = (-win.before, win.size + win.after) if include_pad else (0, win.size)
    counts = {win.taps_inside(k, lo, hi) for k in range(win.out)}
    if len(counts) == 1:
        return counts.pop()
    start = o * win.stride - win.before
    return te.min(start + win.kernel, hi) - te.max(start, lo)


def _avg_pool_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = inputs
    h, w = _windows(attrs, data.shape, (1, 1))
    include = bool(attrs["count_include_pad"])
    total = _padded_windows(data, h, w, 0.0).sum(axis=(-2, -1))
    return total / np.multiply.outer(_counts(h, include), _counts(w, include)).astype(data.dtype)


def _counts(win: _Window, include_pad: bool) -> np.ndarray:
    """Each window's count along one axis, by summing a mask of the positions that count (padded
    as the data is) over the windows."""
    if include_pad:
        inside = np.ones(win.before + win.size + win.after)
        mask = np.pad(inside, (0, max(0, win.overflow - win.after)))
    else:
        mask = np.pad(np.ones(win.size), (win.before, win.overflow))
    return sliding_window_view(mask, win.span)[:: win.stride][: win.out].sum(axis=1)


register(
    OpDef(
        "avg_pool2d", Pattern.REDUCTION, _avg_pool_type, _avg_pool_compute, _avg_pool_reference, _pool_flops
    )
)
