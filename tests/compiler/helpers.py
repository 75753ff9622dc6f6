"""Workloads written with te, and the numpy check that every schedule test uses.

Extents are odd or prime on purpose (97, 127, 61, 1000 = 8 * 125) so that most splits leave a
remainder, while a build-and-run stays at a few tens of milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from compiler import LoopRV, PrimFunc, Schedule, ScheduleError, build, te
from compiler.ir import TRUE, structural_equal
from compiler.schedule.tree import find_block, find_loop

Arrays = tuple[np.ndarray, ...]


@dataclass(frozen=True)
class ProgramCase:
    """A program and what numpy says it computes: the first `n_inputs` parameters are inputs, and
    `reference` returns the remaining (output) parameters in order."""

    func: PrimFunc
    reference: Callable[..., Arrays]
    n_inputs: int

    def schedule(self, seed: int = 0) -> Schedule:
        return Schedule(self.func, seed=seed)


def assert_computes(wl: ProgramCase, program: PrimFunc | Schedule, seed: int = 0) -> None:
    """Build `program` and compare it with the reference on random inputs. Outputs start as NaN, so
    an element the program never writes fails the check too."""
    func = program.func if isinstance(program, Schedule) else program
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(b.shape).astype(np.float32) for b in func.params[: wl.n_inputs]]
    outputs = [np.full(b.shape, np.nan, np.float32) for b in func.params[wl.n_inputs :]]
    build(func, listings=False)(*inputs, *outputs)
    for got, want in zip(outputs, wl.reference(*inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@contextlib.contextmanager
def schedule_error(*names: str, match: str | None = None) -> Iterator[pytest.ExceptionInfo]:
    """Expect a ScheduleError whose message names each of `names` (quoted, as primitives quote them)."""
    with pytest.raises(ScheduleError, match=match) as info:
        yield info
    message = str(info.value)
    for name in names:
        assert repr(name) in message, f"{name!r} is not named in: {message}"


def extents(sch: Schedule, loops: list[LoopRV]) -> list[int]:
    return [find_loop(sch.func.body, lp.name)[1].extent for lp in loops]


def loop_kinds(sch: Schedule, loops: list[LoopRV]) -> list[str]:
    return [find_loop(sch.func.body, lp.name)[1].kind for lp in loops]


def loops_of(sch: Schedule, block: str) -> list[LoopRV]:
    return sch.get_loops(sch.get_block(block))


def is_guarded(sch: Schedule, block: str) -> bool:
    """Whether the block carries a predicate (a split that over-covers, or a compute_at overhang)."""
    return not structural_equal(find_block(sch.func.body, block)[1].predicate, TRUE)


# --- workloads ----------------------------------------------------------------------------------
def matmul(n: int = 97, m: int = 127, k: int = 61) -> ProgramCase:
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return ProgramCase(te.create_prim_func([A, B, C], name="matmul"), lambda a, b: (_mm(a, b),), 2)


def mm_relu(n: int = 97, m: int = 127, k: int = 61) -> ProgramCase:
    """Blocks Y (the matmul) and C (relu of Y)."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    Y = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = te.compute((n, m), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    func = te.create_prim_func([A, B, C], name="mm_relu")
    return ProgramCase(func, lambda a, b: (np.maximum(_mm(a, b), 0),), 2)


def mm_two_consumers(n: int = 31, m: int = 37, k: int = 13) -> ProgramCase:
    """Y feeds two outputs in separate nests: C = relu(Y) and D = 2 * Y."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    Y = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = te.compute((n, m), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    D = te.compute((n, m), lambda i, j: Y[i, j] * 2.0, name="D")
    func = te.create_prim_func([A, B, C, D], name="mm_two")
    return ProgramCase(func, lambda a, b: (np.maximum(_mm(a, b), 0), 2 * _mm(a, b)), 2)


def bias_relu(n: int = 97, m: int = 127, k: int = 61) -> ProgramCase:
    """Blocks Y (matmul), Z = Y + bias[j] and R = relu(Z)."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    bias = te.placeholder((m,), name="bias")
    r = te.reduce_axis((0, k), name="k")
    Y = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    Z = te.compute((n, m), lambda i, j: Y[i, j] + bias[j], name="Z")
    R = te.compute((n, m), lambda i, j: te.max(Z[i, j], 0.0), name="R")
    func = te.create_prim_func([A, B, bias, R], name="bias_relu")
    return ProgramCase(func, lambda a, b, c: (np.maximum(_mm(a, b) + c, 0),), 3)


def chain(shape: tuple[int, ...] = (1000,), stages: int = 2) -> ProgramCase:
    """Elementwise stages B, C (, D) of A: each doubles the previous stage and adds its number."""
    tensor = A = te.placeholder(shape, name="A")
    for s, name in enumerate("BCD"[:stages]):
        tensor = te.compute(shape, _double_plus(tensor, float(s + 1)), name=name)

    def reference(a: np.ndarray) -> Arrays:
        x = a.astype(np.float64)
        for s in range(stages):
            x = 2 * x + (s + 1)
        return (x,)

    return ProgramCase(te.create_prim_func([A, tensor], name="chain"), reference, 1)


def _double_plus(t: te.Tensor, c: float) -> Callable[..., te.Expr]:
    if len(t.shape) == 1:
        return lambda i: t[i] * 2.0 + c
    return lambda i, j: t[i, j] * 2.0 + c


def stencil(n: int = 97) -> ProgramCase:
    """P = 2 * A, then C[i] = P[i] + P[i + 1]: each C reads a neighbour of its own P element."""
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n - 1,), lambda i: P[i] + P[i + 1], name="C")
    return ProgramCase(te.create_prim_func([A, C], name="stencil"), lambda a: (2 * a[:-1] + 2 * a[1:],), 1)


def conv2d(
    n: int = 1, ci: int = 3, h: int = 13, w: int = 11, co: int = 5, kh: int = 3, kw: int = 3, pad: int = 1
) -> ProgramCase:
    """NCHW conv2d with a padding block `pad` (te.select/te.all) and the conv block `conv`."""
    X = te.placeholder((n, ci, h, w), name="X")
    W = te.placeholder((co, ci, kh, kw), name="W")
    inside = lambda y, x: te.all(y >= pad, y < h + pad, x >= pad, x < w + pad)  # noqa: E731
    P = te.compute(
        (n, ci, h + 2 * pad, w + 2 * pad),
        lambda b, c, y, x: te.select(inside(y, x), X[b, c, y - pad, x - pad], 0.0),
        name="pad",
    )
    rc = te.reduce_axis((0, ci), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    O = te.compute(  # noqa: E741
        (n, co, oh, ow),
        lambda b, f, y, x: te.sum(P[b, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv",
    )

    def reference(x: np.ndarray, wt: np.ndarray) -> Arrays:
        padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        out = np.zeros((n, co, oh, ow))
        for dy in range(kh):
            for dx in range(kw):
                window = padded[:, :, dy : dy + oh, dx : dx + ow]
                out += np.einsum("nchw,fc->nfhw", window, wt[:, :, dy, dx])
        return (out,)

    return ProgramCase(te.create_prim_func([X, W, O], name="conv2d"), reference, 2)


def softmax(n: int = 37, m: int = 61) -> ProgramCase:
    """Row softmax in four blocks: M (row max), E = exp(X - M), S (row sum of E), Y = E / S."""
    X = te.placeholder((n, m), name="X")
    k1 = te.reduce_axis((0, m), name="k")
    M = te.compute((n,), lambda i: te.max(X[i, k1], axis=k1), name="M")
    E = te.compute((n, m), lambda i, j: te.exp(X[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, m), name="k")
    S = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((n, m), lambda i, j: E[i, j] / S[i], name="Y")

    def reference(x: np.ndarray) -> Arrays:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True),)

    return ProgramCase(te.create_prim_func([X, Y], name="softmax"), reference, 1)


def scan_pipeline(m: int = 10, n: int = 16) -> ProgramCase:
    """X2 = 2 * X, read only by the recurrence of a cumulative sum `scan` over rows (its first row,
    block scan_init, doubles X itself), then D = scan + 1."""
    X = te.placeholder((m, n), name="X")
    X2 = te.compute((m, n), lambda t, i: X[t, i] * 2.0, name="X2")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i] * 2.0, name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X2[t, i], name="update")
    S = te.scan(init, update, state, name="scan")
    D = te.compute((m, n), lambda t, i: S[t, i] + 1.0, name="D")
    func = te.create_prim_func([X, D], name="scan_pipeline")
    return ProgramCase(func, lambda x: (np.cumsum(2 * x.astype(np.float64), axis=0) + 1,), 1)


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def int8_gemm(
    m: int, n: int, k: int, dense: bool = False, dtypes: tuple[str, str] = ("uint8", "int8")
) -> PrimFunc:
    """C[i, j] = sum_k int32(A[i, k]) * int32(B[k, j]) (B[j, k] when `dense`): the GEMM VNNI computes."""
    A = te.placeholder((m, k), dtypes[0], "A")
    B = te.placeholder((n, k) if dense else (k, n), dtypes[1], "B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute(
        (m, n),
        lambda i, j: te.sum(
            te.cast("int32", A[i, r]) * te.cast("int32", B[j, r] if dense else B[r, j]), axis=r
        ),
        name="C",
    )
    return te.create_prim_func([A, B, C])


def fma_tiles(sch: Schedule) -> None:
    """A matmul's update in 4 x 16 tiles of local accumulators, each computed by the FMA
    micro-kernel (`fma_4x16_f32`); tensorize is the last call."""
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    sch.reverse_compute_at(sch.cache_write(c, 0, "local"), jo)
    sch.decompose_reduction(c, k)
    sch.tensorize(ii, "fma_4x16_f32")
