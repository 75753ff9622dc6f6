"""Tensor-expression builders of standard operators (TVM's topi in miniature) with their numpy
references, shared by the workload registry and the graph operators so that a conv2d or a matmul
has one shape, the one the schedule space tiles, wherever it comes from."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler import te
from compiler.ir import Expr, ExprLike

Padding = tuple[int, int, int, int]  # (top, left, bottom, right)
Window = tuple[tuple[int, int], Padding, tuple[int, int]]  # strides, padding, dilation
NCHW = ("n", "c", "y", "x")
Combine = Callable[[ExprLike, te.ReduceAxes], Expr]  # te.sum, te.max or te.min


def pad(
    data: te.Tensor,
    before: Sequence[int],
    after: Sequence[int],
    value: float,
    name: str,
    axis_names: Sequence[str] | None = None,
) -> te.Tensor:
    """`data` with `before[d]` and `after[d]` elements of `value` around each axis d, as one block
    that selects on the bounds (only the padded sides are tested); `data` itself when nothing is
    padded."""
    if not any(before) and not any(after):
        return data
    shape = tuple(s + b + a for s, b, a in zip(data.shape, before, after))

    def body(*idx: Expr) -> Expr:
        conds: list[ExprLike] = []
        for i, size, b, a in zip(idx, data.shape, before, after):
            conds += [i >= b] if b else []
            conds += [i < size + b] if a else []
        return te.select(te.all(*conds), data[tuple(i - b for i, b in zip(idx, before))], value)

    names = axis_names or [f"i{d}" for d in range(len(shape))]
    return te.compute(shape, body, name=name, axis_names=names)


def conv_out_size(size: int, kernel: int, stride: int, before: int, after: int, dilation: int) -> int:
    """Output extent of a convolution along one axis; < 1 when the kernel does not fit the padded
    input."""
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def conv_out_hw(height: int, width: int, kernel: tuple[int, int], window: Window) -> tuple[int, int]:
    """Output height and width of a convolution of a `kernel`-sized filter over `window`."""
    (R, S), ((sh, sw), (top, left, bottom, right), (dh, dw)) = kernel, window
    return conv_out_size(height, R, sh, top, bottom, dh), conv_out_size(width, S, sw, left, right, dw)


def conv2d_nchw(
    data: te.Tensor,
    weight: te.Tensor,
    strides: tuple[int, int],
    padding: Padding,
    dilation: tuple[int, int],
    groups: int,
    name: str,
    pad_name: str,
) -> te.Tensor:
    """data [N, C, H, W] * weight [K, C/groups, R, S] -> [N, K, OH, OW]: a zero-padding block (when
    some padding is non-zero) and one reduction block over (c, r, s). Output channel f reads input
    channels of its group; with one channel per group (depthwise) the c axis is dropped."""
    (N, _, H, W), (K, cg, R, S) = data.shape, weight.shape
    (sh, sw), (top, left, bottom, right), (dh, dw) = strides, padding, dilation
    oh = conv_out_size(H, R, sh, top, bottom, dh)
    ow = conv_out_size(W, S, sw, left, right, dw)
    padded = pad(data, (0, 0, top, left), (0, 0, bottom, right), 0.0, pad_name, NCHW)
    ry, rx = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")
    rc = te.reduce_axis((0, cg), "rc") if groups == 1 or cg > 1 else None
    axes = [ry, rx] if rc is None else [rc, ry, rx]
    kg = K // groups

    def channel(f: Expr) -> Expr | int:
        """The input channel that output channel f reads at reduction step rc."""
        if groups == 1:
            assert rc is not None
            return rc
        group = f if kg == 1 else f // kg
        return group if rc is None else group * cg + rc

    return te.compute(
        (N, K, oh, ow),
        lambda n, f, y, x: te.sum(
            padded[n, channel(f), y * sh + ry * dh, x * sw + rx * dw]
            * weight[f, 0 if rc is None else rc, ry, rx],
            axis=axes,
        ),
        name=name,
    )


def conv2d_nchw_kblock(
    data: te.Tensor,
    weight: te.Tensor,
    strides: tuple[int, int],
    padding: Padding,
    dilation: tuple[int, int],
    name: str,
    pad_name: str,
) -> te.Tensor:
    """data [N, C, H, W] * weight [K/kb, C, R, S, kb] (`pack_kblock`) -> [N, K/kb, OH, OW, kb]: the
    output channels in blocks of kb, innermost. The innermost spatial loop is then a block of output
    channels, contiguous in the packed weights and in the output, while the data is the same for every
    lane: vector registers fill along channels, however small the image (a 7x7 layer wastes 9 of 16
    lanes when vectorized along its width). A zero-padding block when some padding is non-zero."""
    (N, _, H, W), (KB, C, R, S, kb) = data.shape, weight.shape
    (sh, sw), (top, left, bottom, right), (dh, dw) = strides, padding, dilation
    oh = conv_out_size(H, R, sh, top, bottom, dh)
    ow = conv_out_size(W, S, sw, left, right, dw)
    padded = pad(data, (0, 0, top, left), (0, 0, bottom, right), 0.0, pad_name, NCHW)
    rc, ry, rx = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")
    return te.compute(
        (N, KB, oh, ow, kb),
        lambda n, fo, y, x, fi: te.sum(
            padded[n, rc, y * sh + ry * dh, x * sw + rx * dw] * weight[fo, rc, ry, rx, fi], axis=[rc, ry, rx]
        ),
        name=name,
    )


def pack_kblock(weight: np.ndarray, kb: int) -> np.ndarray:
    """Weights [K, C, R, S] as [K/kb, C, R, S, kb], the layout conv2d_nchw_kblock reads."""
    K, C, R, S = weight.shape
    return np.ascontiguousarray(weight.reshape(K // kb, kb, C, R, S).transpose(0, 2, 3, 4, 1))


def unpack_kblock(packed: np.ndarray) -> np.ndarray:
    """Weights [K/kb, C, R, S, kb] back as [K, C, R, S]: what `pack_kblock` inverts."""
    KB, C, R, S, kb = packed.shape
    return packed.transpose(0, 4, 1, 2, 3).reshape(KB * kb, C, R, S)


def conv2d_nchw_numpy(
    data: np.ndarray,
    weight: np.ndarray,
    strides: tuple[int, int],
    padding: Padding,
    dilation: tuple[int, int],
    groups: int,
) -> np.ndarray:
    """What conv2d_nchw computes (PyTorch's conv2d, with (top, left, bottom, right) zero padding): the
    sum over kernel taps (r, s) of one grouped einsum of a strided window of the padded data with
    weight[..., r, s], which keeps memory at one output's worth."""
    N, (K, cg, R, S) = data.shape[0], weight.shape
    (sh, sw), (top, left, bottom, right), (dh, dw) = strides, padding, dilation
    padded = np.pad(data, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = conv_out_size(padded.shape[2], R, sh, 0, 0, dh)
    ow = conv_out_size(padded.shape[3], S, sw, 0, 0, dw)
    grouped = padded.reshape(N, groups, cg, *padded.shape[2:])
    w = weight.reshape(groups, K // groups, cg, R, S)
    out: np.ndarray | None = None
    for r in range(R):
        for s in range(S):
            y0, x0 = r * dh, s * dw
            window = grouped[..., y0 : y0 + sh * (oh - 1) + 1 : sh, x0 : x0 + sw * (ow - 1) + 1 : sw]
            tap = np.einsum("ngchw,gkc->ngkhw", window, w[..., r, s])
            out = tap if out is None else out + tap
    assert out is not None  # a kernel has at least one tap
    return out.reshape(N, K, oh, ow)


def broadcast_batch(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """numpy's broadcast of two batch shapes, or None when they do not broadcast."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    if any(x != y and 1 not in (x, y) for x, y in zip(pa, pb)):
        return None
    return tuple(max(x, y) for x, y in zip(pa, pb))


def matmul(a: te.Tensor, b: te.Tensor, name: str, accumulate: str | None = None) -> te.Tensor:
    """numpy's matmul of a [..., M, K] and b [..., K, N] (rank >= 2 each): one reduction block over
    k. Batch dims broadcast; an operand's size-1 batch dim that broadcasts is indexed with 0. With
    `accumulate`, both operands are cast to that dtype in the product (8-bit ints summed in int32)."""
    *ba, m, kk = a.shape
    *bb, _, n = b.shape
    batch = broadcast_batch(ba, bb)
    assert batch is not None, f"batch dims {ba} and {bb} do not broadcast"
    k = te.reduce_axis((0, kk), "k")

    def own(idx: Sequence[Expr], dims: Sequence[int]) -> list[Expr | int]:
        """The operand's batch indices: the trailing output batch indices, 0 where it broadcasts."""
        tail = idx[len(idx) - len(dims) :]
        return [
            0 if d == 1 and out != 1 else i for i, d, out in zip(tail, dims, batch[len(batch) - len(dims) :])
        ]

    def operand(x: Expr) -> Expr:
        return te.cast(accumulate, x) if accumulate is not None else x

    def body(*idx: Expr) -> Expr:
        *bi, i, j = idx
        return te.sum(operand(a[(*own(bi, ba), i, k)]) * operand(b[(*own(bi, bb), k, j)]), axis=k)

    names = ["n"] if len(batch) == 1 else [f"n{d}" for d in range(len(batch))]
    return te.compute((*batch, m, n), body, name=name, axis_names=[*names, "i", "j"])


def matmul_nblock(a: te.Tensor, packed: te.Tensor, name: str) -> te.Tensor:
    """a [..., M, K] @ packed [N/nb, K, nb] (`pack_nblock`) -> [..., M, N/nb, nb]: the output columns
    in blocks of nb, innermost, which in memory is the [..., M, N] result itself. Each block of
    columns reads its weights as one contiguous run of K x nb: a tile sweeping the reduction streams
    them in order, where plain [K, N] weights give one short run per step of k, a row (and a page)
    apart, which hardware prefetchers do not follow once the weights are out of cache."""
    *batch, m, kk = a.shape
    nblocks, _, nb = packed.shape
    k = te.reduce_axis((0, kk), "k")

    def body(*idx: Expr) -> Expr:
        *bi, i, jo, ji = idx
        return te.sum(a[(*bi, i, k)] * packed[jo, k, ji], axis=k)

    names = [f"n{d}" for d in range(len(batch))]
    return te.compute((*batch, m, nblocks, nb), body, name=name, axis_names=[*names, "i", "jo", "ji"])


def pack_nblock(weight: np.ndarray, nb: int) -> np.ndarray:
    """Weights [K, N] as [N/nb, K, nb], the layout matmul_nblock reads."""
    K, N = weight.shape
    return np.ascontiguousarray(weight.reshape(K, N // nb, nb).transpose(1, 0, 2))


def unpack_nblock(packed: np.ndarray) -> np.ndarray:
    """Weights [N/nb, K, nb] back as [K, N]: what `pack_nblock` inverts."""
    NB, K, nb = packed.shape
    return packed.transpose(1, 0, 2).reshape(K, NB * nb)


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    """The shape after reducing `axes`; (1,) when every axis goes without keepdims (there are no
    rank-0 tensors)."""
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes) or (1,)


def reduced_index(idx: Sequence[Expr], axes: Sequence[int]) -> tuple[Expr | int, ...]:
    """Where the full-rank index `idx` lands in the tensor reduced over `axes` without keepdims."""
    return tuple(i for d, i in enumerate(idx) if d not in axes) or (0,)


def reduce(x: te.Tensor, axes: Sequence[int], keepdims: bool, combine: Combine, name: str) -> te.Tensor:
    """`combine` (te.sum, te.max, te.min) of x over `axes`, as one reduction block."""
    return reduce_of(x, lambda idx: x[tuple(idx)], axes, keepdims, combine, name)


def reduce_of(
    x: te.Tensor,
    fn: Callable[[list[Expr]], Expr],
    axes: Sequence[int],
    keepdims: bool,
    combine: Combine,
    name: str,
) -> te.Tensor:
    """`combine` over `axes` of x of `fn(full-rank index)` (e.g. exp(x - max)), as one reduction
    block."""
    rs = {d: te.reduce_axis((0, x.shape[d]), "k" if len(axes) == 1 else f"k{d}") for d in axes}
    kept = [d for d in range(len(x.shape)) if d not in axes]

    def body(*out: Expr) -> Expr:
        idx = [rs[d] if d in rs else out[d if keepdims else kept.index(d)] for d in range(len(x.shape))]
        return combine(fn(idx), list(rs.values()))

    shape = reduced_shape(x.shape, axes, keepdims)
    return te.compute(shape, body, name=name, axis_names=[f"i{d}" for d in range(len(shape))])


def softmax(x: te.Tensor, axis: int, name: str, prefix: str) -> te.Tensor:
    """Softmax over `axis` with max subtraction, as four blocks like topi's softmax: the max, the
    exponentials, their sum, and the normalized output `name` (intermediates named `prefix_*`)."""
    shape, axes = x.shape, (axis,)
    maxelem = reduce(x, axes, False, te.max, f"{prefix}_maxelem")
    exp = te.compute(shape, lambda *i: te.exp(x[i] - maxelem[reduced_index(i, axes)]), name=f"{prefix}_exp")
    expsum = reduce(exp, axes, False, te.sum, f"{prefix}_expsum")
    return te.compute(shape, lambda *i: exp[i] / expsum[reduced_index(i, axes)], name=name)


def softmax_numpy(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
