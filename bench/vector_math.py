"""The float32 math functions in compiled kernels: exp, erf, tanh, log and log1p over 1M elements, a
BERT-base softmax (12 heads x 128 x 128) and gelu (exact, through erf; and GPT-2's tanh form) on a
BERT FFN activation (128 x 3072). Each is a one-op model through compiler.graph (optimize, build
with the default schedules), timed kernel by kernel on this machine's cores, against numpy (exp,
tanh, log, log1p; softmax and gelu as numpy writes them; erf has no numpy function and no scipy
here, so it is timed against nothing but itself across versions).

    python -m bench vector_math
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import graph
from compiler.graph import GraphBuilder
from compiler.target import host_hardware


def one_op(op: str, shape: tuple[int, ...], **attrs: object) -> graph.CompiledModel:
    b = GraphBuilder()
    x = b.input("x", shape, "float32")
    return graph.build(graph.optimize(b.module([b.call(op, [x], **attrs)])))


def kernel_micros(model: graph.CompiledModel, x: np.ndarray) -> float:
    """The model's kernels, each timed in a native loop (no output copy, no Python per call)."""
    return sum(secs for _, secs in model.profile(x, repeat=7, min_secs=0.05)) * 1e6


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """numpy has no erf: its nearest vectorized stand-in, the tanh gelu, costs about what exact would."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


CASES: list[tuple[str, str, tuple[int, ...], dict, Callable[[np.ndarray], object] | None]] = [
    ("exp 1M", "exp", (1 << 20,), {}, np.exp),
    ("erf 1M", "erf", (1 << 20,), {}, None),
    ("tanh 1M", "tanh", (1 << 20,), {}, np.tanh),
    ("log 1M", "log", (1 << 20,), {}, np.log),
    ("log1p 1M", "log1p", (1 << 20,), {}, np.log1p),
    ("softmax 12x128x128", "softmax", (12, 128, 128), {"axis": 2}, softmax),
    ("gelu none 128x3072", "gelu", (128, 3072), {"approximate": "none"}, gelu_tanh),
    ("gelu tanh 128x3072", "gelu", (128, 3072), {"approximate": "tanh"}, gelu_tanh),
]
POSITIVE = {"log", "log1p"}  # their inputs are |x|


def main() -> None:
    cores = host_hardware().target.cores
    set_kernel_threads(cores)
    print(f"float32, {cores} threads, default schedules; numpy single-threaded")
    rng = np.random.default_rng(0)
    for title, op, shape, attrs, numpy_fn in CASES:
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        x = np.abs(x) if op in POSITIVE else x
        ours = kernel_micros(one_op(op, shape, **attrs), x)
        line = f"    {title:22s} ours {ours:8.1f} us"
        if numpy_fn is not None:
            theirs = best_seconds(lambda fn=numpy_fn, x=x: fn(x)) * 1e6
            line += f"   numpy {theirs:8.1f} us   numpy/ours {theirs / ours:5.2f}x"
        print(line)


__all__ = ["main"]
