"""conv2d NCHW 1x64x56x56, 64 filters 3x3, pad 1, with a hand-written schedule, against numpy doing
im2col + one OpenBLAS matmul (the usual way to run a convolution on a BLAS)."""

from __future__ import annotations

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import Schedule, build
from compiler.ir import PrimFunc
from compiler.workloads import Workload, workload_from_spec
from runner.evaluate import evaluate

SPEC = {
    "op": "conv2d_nchw",
    "params": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1},
}


def hand_schedule(func: PrimFunc, tf: int = 16, tx: int = 14) -> PrimFunc:
    """A tf x tx register tile of outputs (tf filters unrolled, tx columns vectorized) accumulates in
    a local buffer over all of rc, ry, rx; rows of filter groups run in parallel. The padded input is
    built first, in parallel, by the padding block."""
    sch = Schedule(func)
    conv = sch.get_block("conv2d_nchw")
    acc = sch.cache_write(conv, 0, "local")
    n, f, y, x, rc, ry, rx = sch.get_loops(conv)
    f0, f1 = sch.split(f, [None, tf])
    x0, x1 = sch.split(x, [None, tx])
    sch.reorder(n, f0, y, x0, rc, ry, rx, f1, x1)
    sch.reverse_compute_at(acc, x0)
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(conv, rc)
    sch.vectorize(x1)
    sch.unroll(f1)
    sch.parallel(sch.fuse(n, f0, y))
    pad = sch.get_block("pad_temp")
    sch.parallel(sch.fuse(*sch.get_loops(pad)[:2]))
    sch.vectorize(sch.get_loops(pad)[-1])
    return sch.func


def im2col_conv(workload: Workload, data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Zero-pad, gather every 3x3 window into a (C*R*S, OH*OW) matrix, multiply by the filters."""
    p = workload.spec["params"]
    pad = p["padding"]
    padded = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (p["R"], p["S"]), axis=(2, 3))
    oh, ow = windows.shape[2], windows.shape[3]
    cols = windows[0].transpose(0, 3, 4, 1, 2).reshape(p["C"] * p["R"] * p["S"], oh * ow)
    return (weight.reshape(p["K"], -1) @ cols).reshape(1, p["K"], oh, ow)


def main() -> None:
    workload = workload_from_spec(SPEC)
    data, weight = workload.random_inputs(np.random.default_rng(0))
    (out,) = workload.empty_outputs()
    (expected,) = workload.reference(data, weight)
    np.testing.assert_allclose(im2col_conv(workload, data, weight), expected, rtol=1e-3, atol=1e-3)
    kernel = build(hand_schedule(workload.func), listings=False)
    kernel(data, weight, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    rates = {}
    for threads in (1, 2):
        set_kernel_threads(threads)
        secs = min(evaluate(kernel, [data, weight, out], repeat=9, min_repeat_ms=50))
        rates[threads] = workload.flops / secs / 1e9
    numpy_rate = workload.flops / best_seconds(lambda: im2col_conv(workload, data, weight), repeat=9) / 1e9
    print(
        f"conv2d 1x64x56x56 k64 3x3: ours {rates[2]:.0f} GFLOPS (2 threads), im2col + numpy "
        f"{numpy_rate:.0f} -> {rates[2] / numpy_rate:.2f}x; 1 thread {rates[1]:.0f} -> "
        f"2 threads {rates[2] / rates[1]:.2f}x"
    )
