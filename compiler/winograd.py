"""Winograd convolution F(m x m, 3 x 3): a stride-1 3x3 conv as a batch of alpha x alpha = (m+2)^2
independent matmuls over the channels, in the spirit of Lavin & Gray (2015) and TVM's
conv2d_winograd.

Why: a direct 3x3 conv spends 9 multiply-adds per input channel, output channel and output pixel.
Winograd splits the output into m x m tiles; each tile's input window (alpha x alpha) is transformed
once (V = B^T d B), each filter once (U = G g G^T, at compile time, since the weights are
constants), and then one matmul per transform point multiplies them over the channels (M = V U),
alpha^2 multiply-adds per channel pair per tile instead of 9 m^2: 2.25x fewer for m = 2, 4x for
m = 4. An output transform (Y = A^T M A) folds each tile back. Each transform sums only the
nonzero entries of its matrices' rows: with m = 2 an element of V is 4 signed input elements and an
output element 9 signed elements of M.

Layouts, chosen so that every block of the program has a contiguous vector axis and the matmul reads
its operands as a GEMM's row-major A and B:
- the zero-padded input with channels innermost, [N, H', W', C]: one transposing copy;
- transformed input V [alpha, alpha, N, TH, TW, C], the transform vectorized along C;
- weights U [alpha, alpha, C, K] (`pack_winograd`): the matmul vectorizes along K and broadcasts V
  along C, one cache line serving 16 steps of its reduction (with V as [.., C, TH, TW], each step
  read a new line: 128 against 185 GFLOPS on one Rocket Lake core, bench/results/2026-11-26.md);
- product M [alpha, alpha, N, TH, TW, K], its block annotated with `PRODUCT_RULE`;
- the output transform writes output channels in blocks of kb (as conv2d_nchw_kblock does) and a
  copy block puts them back in NCHW, which fusion inlines into the epilogue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from compiler import te
from compiler.ir import Expr, const
from compiler.topi import Padding, conv_out_size

KERNEL = 3
# The schedule rule the batched matmul's block names (`te.SCHEDULE_RULE`): the tuner computes the
# transforms per tile of it (compiler/schedule_rules/winograd_tiling.py).
PRODUCT_RULE = "winograd_product"

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


class _Sparse(NamedTuple):
    """A transform matrix by its nonzero entries: row r's j-th nonzero is `values[r][j]`, at column
    `columns[r][j]` (rows with fewer are padded with zeros at column 0)."""

    columns: list[list[int]]
    values: list[list[float]]

    @property
    def width(self) -> int:
        return len(self.columns[0])

    def column(self, row: Expr, j: Expr) -> Expr:
        return _table(self.columns, row, j)

    def value(self, row: Expr, j: Expr) -> Expr:
        return _table(self.values, row, j)


def _sparse(matrix: np.ndarray) -> _Sparse:
    rows = [[(c, float(v)) for c, v in enumerate(row) if v != 0] for row in matrix]
    width = max(len(r) for r in rows)
    padded = [r + [(0, 0.0)] * (width - len(r)) for r in rows]
    return _Sparse([[c for c, _ in r] for r in padded], [[v for _, v in r] for r in padded])


def _table(table: Sequence[Sequence[float]], row: Expr, j: Expr) -> Expr:
    """`table[row][j]` as a chain of selects (ints stay ints: a column is an index): computed once
    per term where the loops over row and j are outside the vectorized loop, as the Winograd rule
    places them, and a constant where they are unrolled."""
    out: Expr | None = None
    for r, entries in reversed(list(enumerate(table))):
        for k, v in reversed(list(enumerate(entries))):
            out = const(v) if out is None else te.select(te.all(row == r, j == k), v, out)
    assert out is not None
    return out


def _padded_nhwc(data: te.Tensor, top: int, left: int, after_h: int, after_w: int, name: str) -> te.Tensor:
    """The zero-padded image with channels innermost, [N, H', W', C]: the input transform reads a
    tile's window as rows of channels, so that it and the matmul after it run along C."""
    N, C, H, W = data.shape

    def body(n: Expr, h: Expr, w: Expr, c: Expr) -> Expr:
        inside = te.all(h >= top, h < H + top, w >= left, w < W + left)
        return te.select(inside, data[n, c, h - top, w - left], 0.0)

    shape = (N, H + top + after_h, W + left + after_w, C)
    return te.compute(shape, body, name=name, axis_names=["n", "h", "w", "c"])


def conv2d_winograd_nchw(
    data: te.Tensor, packed: te.Tensor, padding: Padding, kb: int, name: str
) -> te.Tensor:
    """data [N, C, H, W], packed weights [alpha, alpha, C, K] (`pack_winograd`) -> the stride-1 3x3
    conv [N, K/kb, OH, OW, kb], output channels in blocks of kb. Blocks (prefix `name`): the zero
    padding (extended so that the last tiles' windows are inside), the input transform, the batched
    matmul and the output transform.

    Each transform sums only the nonzero terms of its matrices' rows (`_Sparse`): with F(2, 3) an
    element of V is 4 signed input elements, not the 16 products of the dense B^T d B, 12 of them
    by zero."""
    (N, C, H, W), (alpha, _, _, K) = data.shape, packed.shape
    m = alpha - KERNEL + 1
    at_np, _, bt_np = matrices(m)
    top, left, _, _ = padding
    oh, ow, th, tw, after_h, after_w = tiling(H, W, padding, m)
    padded = _padded_nhwc(data, top, left, after_h, after_w, f"{name}_pad")
    bt, at = _sparse(bt_np), _sparse(at_np)
    ra, rb = te.reduce_axis((0, bt.width), "ra"), te.reduce_axis((0, bt.width), "rb")
    transformed = te.compute(
        (alpha, alpha, N, th, tw, C),
        lambda e, u, n, y, x, c: te.sum(
            padded[n, y * m + bt.column(e, ra), x * m + bt.column(u, rb), c]
            * (bt.value(e, ra) * bt.value(u, rb)),
            axis=[ra, rb],
        ),
        name=f"{name}_v",
    )
    rc = te.reduce_axis((0, C), "rc")
    product = te.compute(
        (alpha, alpha, N, th, tw, K),
        lambda e, u, n, y, x, k: te.sum(transformed[e, u, n, y, x, rc] * packed[e, u, rc, k], axis=rc),
        name=f"{name}_m",
        annotations={te.SCHEDULE_RULE: PRODUCT_RULE},
    )
    sa, sb = te.reduce_axis((0, at.width), "sa"), te.reduce_axis((0, at.width), "sb")
    return te.compute(
        (N, K // kb, oh, ow, kb),
        lambda n, fo, y, x, fi: te.sum(
            product[at.column(y % m, sa), at.column(x % m, sb), n, y // m, x // m, fo * kb + fi]
            * (at.value(y % m, sa) * at.value(x % m, sb)),
            axis=[sa, sb],
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
