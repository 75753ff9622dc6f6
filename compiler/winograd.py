"""Winograd convolution F(m x m, 3 x 3): a stride-1 3x3 conv as a batch of alpha x alpha = (m+2)^2
independent matmuls over the channels, in the spirit of Lavin & Gray (2015) and TVM's
conv2d_winograd.

Why: a direct 3x3 conv spends 9 multiply-adds per input channel, output channel and output pixel.
Winograd splits the output into m x m tiles; each tile's input window (alpha x alpha) is transformed
once (V = B^T d B), each filter once (U = G g G^T, at compile time, since the weights are
constants), and then one matmul per transform point multiplies them over the channels (M = V U),
alpha^2 multiply-adds per channel pair per tile instead of 9 m^2: 2.25x fewer for m = 2, 4x for
m = 4. An output transform (Y = A^T M A) folds each tile back. The transforms are small reductions
over constant matrices, cheap next to the matmuls once the conv has enough channels.

Layouts, chosen so that every block of the program has a contiguous vector axis:
- weights U [alpha, alpha, C, K] (`pack_winograd`): the matmul vectorizes along K;
- transformed input V [alpha, alpha, N, C, TH, TW]: its reduction reads the padded input along TW
  with stride m;
- product M [alpha, alpha, N, TH, TW, K];
- the output transform writes output channels in blocks of kb (as conv2d_nchw_kblock does) and a
  copy block puts them back in NCHW, which fusion inlines into the epilogue.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from compiler import te
from compiler.ir import Expr
from compiler.topi import NCHW, Padding, conv_out_size, pad

KERNEL = 3

# (A^T [m, alpha], G [alpha, 3], B^T [alpha, alpha]) for each output tile m, with interpolation
# points 0, 1, -1 (m = 2) and 0, 1, -1, 2, -2 (m = 4), plus the point at infinity.
_MATRICES: dict[int, tuple[list[list[float]], list[list[float]], list[list[float]]]] = {
    2: (
        [[1, 1, 1, 0], [0, 1, -1, -1]],
        [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]],
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
    ),
    4: (
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
    ),
}
TILES = tuple(_MATRICES)


def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m x m, 3 x 3) in float64."""
    if m not in _MATRICES:
        raise ValueError(f"Winograd output tile {m} is not one of {TILES}")
    return tuple(np.array(t, dtype=np.float64) for t in _MATRICES[m])  # type: ignore[return-value]


def pack_winograd(weight: np.ndarray, m: int) -> np.ndarray:
    """Weights [K, C, 3, 3] transformed as U = G g G^T into [alpha, alpha, C, K], the layout
    conv2d_winograd_nchw reads, computed in float64 and stored in the weights' dtype."""
    _, _, R, S = weight.shape
    if (R, S) != (KERNEL, KERNEL):
        raise ValueError(f"Winograd F(m, 3) takes 3x3 weights, got {R}x{S}")
    _, g, _ = matrices(m)
    u = np.einsum("ar,kcrs,bs->abck", g, weight.astype(np.float64), g)
    return np.ascontiguousarray(u.astype(weight.dtype))


def tiles(out_size: int, m: int) -> int:
    """Tiles of m outputs covering an output extent (the last one may hang over the edge)."""
    return -(-out_size // m)


class Tiling(NamedTuple):
    """How F(m, 3) covers a padded image: the conv's output extents, the tiles along each axis,
    and the zero rows and columns after the image (at least the conv's own bottom and right
    padding) that put the last tiles' windows inside."""

    oh: int
    ow: int
    th: int
    tw: int
    after_h: int
    after_w: int


def tiling(height: int, width: int, padding: Padding, m: int) -> Tiling:
    top, left, bottom, right = padding
    oh, ow = conv_out_size(height, KERNEL, 1, top, bottom, 1), conv_out_size(width, KERNEL, 1, left, right, 1)
    th, tw = tiles(oh, m), tiles(ow, m)
    return Tiling(oh, ow, th, tw, th * m + KERNEL - 1 - height - top, tw * m + KERNEL - 1 - width - left)


def _constant(values: np.ndarray, name: str) -> te.Tensor:
    """A small constant matrix as a block of selects on its nonzero entries (computed once per call,
    a few dozen elements): the transforms read it like any buffer."""
    rows, cols = values.shape

    def body(i: Expr, j: Expr) -> Expr:
        out: Expr | float = 0.0
        for (r, c), v in reversed(list(np.ndenumerate(values))):
            if v != 0:
                out = te.select(te.all(i == r, j == c), float(v), out)
        assert isinstance(out, Expr)
        return out

    return te.compute((rows, cols), body, name=name, axis_names=["i", "j"])


def conv2d_winograd_nchw(
    data: te.Tensor, packed: te.Tensor, padding: Padding, kb: int, name: str
) -> te.Tensor:
    """data [N, C, H, W], packed weights [alpha, alpha, C, K] (`pack_winograd`) -> the stride-1 3x3
    conv [N, K/kb, OH, OW, kb], output channels in blocks of kb. Blocks (prefix `name`): the zero
    padding (extended so that the last tiles' windows are inside), the constant matrices, the input
    transform, the batched matmul and the output transform."""
    (N, C, H, W), (alpha, _, _, K) = data.shape, packed.shape
    m = alpha - KERNEL + 1
    at_np, _, bt_np = matrices(m)
    top, left, _, _ = padding
    oh, ow, th, tw, after_h, after_w = tiling(H, W, padding, m)
    padded = pad(data, (0, 0, top, left), (0, 0, after_h, after_w), 0.0, f"{name}_pad", NCHW)
    bt = _constant(bt_np, f"{name}_bt")
    at = _constant(at_np, f"{name}_at")
    ra, rb = te.reduce_axis((0, alpha), "ra"), te.reduce_axis((0, alpha), "rb")
    transformed = te.compute(
        (alpha, alpha, N, C, th, tw),
        lambda e, u, n, c, y, x: te.sum(
            padded[n, c, y * m + ra, x * m + rb] * bt[e, ra] * bt[u, rb], axis=[ra, rb]
        ),
        name=f"{name}_v",
    )
    rc = te.reduce_axis((0, C), "rc")
    product = te.compute(
        (alpha, alpha, N, th, tw, K),
        lambda e, u, n, y, x, k: te.sum(transformed[e, u, n, rc, y, x] * packed[e, u, rc, k], axis=rc),
        name=f"{name}_m",
    )
    sa, sb = te.reduce_axis((0, alpha), "sa"), te.reduce_axis((0, alpha), "sb")
    return te.compute(
        (N, K // kb, oh, ow, kb),
        lambda n, fo, y, x, fi: te.sum(
            product[sa, sb, n, y // m, x // m, fo * kb + fi] * at[y % m, sa] * at[x % m, sb], axis=[sa, sb]
        ),
        name=name,
    )


def conv2d_winograd_numpy(data: np.ndarray, packed: np.ndarray, padding: Padding) -> np.ndarray:
    """What conv2d_winograd_nchw computes, in NCHW, by the same three steps in float64: the reference
    of the algorithm itself (the tests check it against the direct conv)."""
    alpha, _, _, K = packed.shape
    m = alpha - KERNEL + 1
    at, _, bt = matrices(m)
    N, _, H, W = data.shape
    top, left, _, _ = padding
    oh, ow, th, tw, after_h, after_w = tiling(H, W, padding, m)
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (top, after_h), (left, after_w)))
    windows = np.lib.stride_tricks.sliding_window_view(x, (alpha, alpha), axis=(2, 3))[:, :, ::m, ::m]
    v = np.einsum("ar,ncyxrs,bs->abncyx", bt, windows, bt)
    prod = np.einsum("abncyx,abck->abnyxk", v, packed.astype(np.float64))
    y = np.einsum("ia,abnyxk,jb->nkyixj", at, prod, at).reshape(N, K, th * m, tw * m)
    return y[:, :, :oh, :ow].astype(data.dtype)
