"""Softmax, elementwise add and relu of any rank, and cumsum written with te.scan."""

from __future__ import annotations

import math

import numpy as np

from compiler import te, topi
from compiler.workloads.registry import REQUIRED, SHAPE, OpGraph, Param, register


@register("softmax", M=REQUIRED, N=REQUIRED)
def softmax(M: int, N: int, dtype: str) -> OpGraph:
    """Row softmax over the last axis with max subtraction, as four blocks like topi's softmax."""
    a = te.placeholder((M, N), dtype, "A")
    norm = topi.softmax(a, 1, "T_softmax_norm", prefix="T_softmax")
    # max, subtract, exp, add, divide: one flop each per element
    return OpGraph([a], [norm], softmax_ref, 5 * M * N)


def softmax_ref(a: np.ndarray) -> list[np.ndarray]:
    return [topi.softmax_numpy(a, 1)]


@register("add", shape=SHAPE)
def add(shape: tuple[int, ...], dtype: str) -> OpGraph:
    """C = A + B, elementwise."""
    a, b = te.placeholder(shape, dtype, "A"), te.placeholder(shape, dtype, "B")
    c = te.compute(shape, lambda *i: a[i] + b[i], "C")
    return OpGraph([a, b], [c], add_ref, math.prod(shape))


def add_ref(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [a + b]


@register("relu", shape=SHAPE)
def relu(shape: tuple[int, ...], dtype: str) -> OpGraph:
    """B = max(A, 0), elementwise."""
    a = te.placeholder(shape, dtype, "A")
    b = te.compute(shape, lambda *i: te.max(a[i], 0.0), "B")
    return OpGraph([a], [b], relu_ref, math.prod(shape))


def relu_ref(a: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(a, 0)]


@register("cumsum", M=Param(minimum=2), N=REQUIRED)
def cumsum(M: int, N: int, dtype: str) -> OpGraph:
    """Cumulative sum over axis 0, exactly as TVM's scan tutorial. te.scan needs at least one update
    row, hence M >= 2."""
    x = te.placeholder((M, N), dtype, "X")
    s_state = te.placeholder((M, N), dtype, "s_state")
    s_init = te.compute((1, N), lambda _, i: x[0, i], name="s_init")
    s_update = te.compute((M, N), lambda t, i: s_state[t - 1, i] + x[t, i], name="s_update")
    s_scan = te.scan(s_init, s_update, s_state, inputs=[x], name="s_scan")
    assert isinstance(s_scan, te.Tensor)
    return OpGraph([x], [s_scan], cumsum_ref, (M - 1) * N)


def cumsum_ref(x: np.ndarray) -> list[np.ndarray]:
    return [np.cumsum(x, axis=0)]
