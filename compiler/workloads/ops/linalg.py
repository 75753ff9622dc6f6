"""Matrix products: matmul (+relu), dense with bias (+relu) as in the MLC course, batch matmul."""

from __future__ import annotations

import numpy as np

from compiler import te, topi
from compiler.workloads.registry import REQUIRED, OpGraph, Param, register


@register("matmul", M=REQUIRED, N=REQUIRED, K=REQUIRED)
def matmul(M: int, N: int, K: int, dtype: str) -> OpGraph:
    """C[i, j] = sum_k A[i, k] * B[k, j]."""
    a, b = te.placeholder((M, K), dtype, "A"), te.placeholder((K, N), dtype, "B")
    return OpGraph([a, b], [topi.matmul(a, b, "C")], matmul_ref, 2 * M * N * K)


def matmul_ref(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [a @ b]


@register("matmul_relu", M=REQUIRED, N=REQUIRED, K=REQUIRED)
def matmul_relu(M: int, N: int, K: int, dtype: str) -> OpGraph:
    """The MLC course's mm_relu: Y = A @ B, C = max(Y, 0)."""
    a, b = te.placeholder((M, K), dtype, "A"), te.placeholder((K, N), dtype, "B")
    y = topi.matmul(a, b, "Y")
    c = te.compute((M, N), lambda i, j: te.max(y[i, j], 0.0), name="C")
    return OpGraph([a, b], [c], matmul_relu_ref, 2 * M * N * K + M * N)


def matmul_relu_ref(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(a @ b, 0)]


def _dense_bias(batch: int, in_features: int, out_features: int, dtype: str) -> tuple[te.Tensor, ...]:
    x = te.placeholder((batch, in_features), dtype, "X")
    w = te.placeholder((out_features, in_features), dtype, "W")
    b = te.placeholder((out_features,), dtype, "B")
    k = te.reduce_axis((0, in_features), "k")
    y = te.compute((batch, out_features), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="Y")
    z = te.compute((batch, out_features), lambda i, j: y[i, j] + b[j], name="Z")
    return x, w, b, z


DENSE_PARAMS = {"batch": Param(1), "in_features": Param(784), "out_features": Param(128)}


@register("dense_bias", **DENSE_PARAMS)
def dense_bias(batch: int, in_features: int, out_features: int, dtype: str) -> OpGraph:
    """The MLC course's linear0: Z = X @ W.T + B, with X [batch, in], W [out, in], B [out]."""
    x, w, b, z = _dense_bias(batch, in_features, out_features, dtype)
    flops = 2 * batch * in_features * out_features + batch * out_features
    return OpGraph([x, w, b], [z], dense_bias_ref, flops)


def dense_bias_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [x @ w.T + b]


@register("dense_bias_relu", **DENSE_PARAMS)
def dense_bias_relu(batch: int, in_features: int, out_features: int, dtype: str) -> OpGraph:
    """linear0 followed by relu0: R = max(X @ W.T + B, 0); Y and Z are intermediates."""
    x, w, b, z = _dense_bias(batch, in_features, out_features, dtype)
    r = te.compute(z.shape, lambda i, j: te.max(z[i, j], 0.0), name="R")
    flops = 2 * batch * in_features * out_features + 2 * batch * out_features
    return OpGraph([x, w, b], [r], dense_bias_relu_ref, flops)


def dense_bias_relu_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(x @ w.T + b, 0)]


@register("batch_matmul", B=REQUIRED, M=REQUIRED, N=REQUIRED, K=REQUIRED)
def batch_matmul(B: int, M: int, N: int, K: int, dtype: str) -> OpGraph:
    """C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]."""
    a, b = te.placeholder((B, M, K), dtype, "A"), te.placeholder((B, K, N), dtype, "B")
    return OpGraph([a, b], [topi.matmul(a, b, "C")], batch_matmul_ref, 2 * B * M * N * K)


def batch_matmul_ref(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [a @ b]
