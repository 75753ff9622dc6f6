"""The default schedule (what graph.build compiles a kernel with when the database has no record for
it) against the unscheduled program, the best of 16 random samples of the rule space (each measured),
and numpy, on the layers of typical models, 2 threads."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import PrimFunc, Schedule, Target, build, te
from compiler.schedule_rules import RuleConfig, default_schedule
from runner.evaluate import evaluate
from tuner.search.space import rule_space

SAMPLES = 16
PAUSE_S = 0.3  # let the other library's threads go to sleep before timing
F32 = np.float32


@dataclass(frozen=True)
class ScheduleCase:
    name: str
    func: PrimFunc
    numpy: Callable[..., np.ndarray]
    shapes: list[tuple[int, ...]]


def _pad(data: te.Tensor, p: int, value: float) -> te.Tensor:
    n, c, h, w = data.shape
    inside = lambda y, x: te.all(y >= p, y < h + p, x >= p, x < w + p)  # noqa: E731
    return te.compute(
        (n, c, h + 2 * p, w + 2 * p),
        lambda i, j, y, x: te.select(inside(y, x), data[i, j, y - p, x - p], value),
        name="pad",
    )


def conv2d(n: int, c: int, size: int, k: int, padding: int) -> ScheduleCase:
    data, weight = (
        te.placeholder((n, c, size, size), name="data"),
        te.placeholder((k, c, 3, 3), name="weight"),
    )
    padded = _pad(data, padding, 0.0)
    out_size = size + 2 * padding - 2
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (n, k, out_size, out_size),
        lambda b, f, y, x: te.sum(padded[b, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv",
    )
    name = f"conv2d {n}x{c}x{size}x{size} k{k} 3x3" + (f" pad{padding}" if padding else "")
    return ScheduleCase(
        name, te.create_prim_func([data, weight, out]), _im2col_conv(padding), [data.shape, weight.shape]
    )


def _im2col_conv(padding: int) -> Callable[..., np.ndarray]:
    """Zero-pad, gather every 3x3 window into a (C*9, OH*OW) matrix, one OpenBLAS matmul."""

    def run(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
        p = padding
        padded = np.pad(data, ((0, 0), (0, 0), (p, p), (p, p)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
        oh, ow = windows.shape[2:4]
        cols = windows[0].transpose(0, 3, 4, 1, 2).reshape(-1, oh * ow)
        return (weight.reshape(weight.shape[0], -1) @ cols).reshape(1, -1, oh, ow)

    return run


def depthwise(c: int, size: int) -> ScheduleCase:
    data, weight = (
        te.placeholder((1, c, size, size), name="data"),
        te.placeholder((c, 1, 3, 3), name="weight"),
    )
    padded = _pad(data, 1, 0.0)
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (1, c, size, size),
        lambda b, f, y, x: te.sum(padded[b, f, y + ry, x + rx] * weight[f, 0, ry, rx], axis=[ry, rx]),
        name="depthwise",
    )

    def taps(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        acc = np.zeros_like(x)
        for r in range(3):
            for s in range(3):
                acc += padded[:, :, r : r + size, s : s + size] * w[None, :, 0, r, s, None, None]
        return acc

    name = f"depthwise 1x{c}x{size}x{size} 3x3 pad1"
    return ScheduleCase(name, te.create_prim_func([data, weight, out]), taps, [data.shape, weight.shape])


def matmul(m: int, k: int, n: int) -> ScheduleCase:
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return ScheduleCase(
        f"matmul {m}x{k} @ {k}x{n}", te.create_prim_func([a, b, c]), np.matmul, [a.shape, b.shape]
    )


def max_pool(c: int, size: int) -> ScheduleCase:
    """3x3, stride 2, padding 1 (ResNet's stem)."""
    data = te.placeholder((1, c, size, size), name="data")
    padded = _pad(data, 1, float("-inf"))
    out_size = (size - 1) // 2 + 1
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (1, c, out_size, out_size),
        lambda b, f, y, x: te.max(padded[b, f, 2 * y + ry, 2 * x + rx], axis=[ry, rx]),
        name="pool",
    )

    def taps(x: np.ndarray) -> np.ndarray:
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        span = 2 * out_size - 1
        acc = np.full((1, c, out_size, out_size), -np.inf, F32)
        for r in range(3):
            for s in range(3):
                np.maximum(acc, padded[:, :, r : r + span : 2, s : s + span : 2], out=acc)
        return acc

    name = f"max_pool 3x3 s2 1x{c}x{size}x{size}"
    return ScheduleCase(name, te.create_prim_func([data, out]), taps, [data.shape])


def softmax(shape: tuple[int, int, int]) -> ScheduleCase:
    a = te.placeholder(shape, name="A")
    n = shape[-1]
    k1, k2 = te.reduce_axis((0, n), "k"), te.reduce_axis((0, n), "k")
    mx = te.compute(shape[:2], lambda i, j: te.max(a[i, j, k1], axis=k1), name="max")
    e = te.compute(shape, lambda i, j, k: te.exp(a[i, j, k] - mx[i, j]), name="exp")
    s = te.compute(shape[:2], lambda i, j: te.sum(e[i, j, k2], axis=k2), name="sum")
    out = te.compute(shape, lambda i, j, k: e[i, j, k] / s[i, j], name="softmax")

    def ref(x: np.ndarray) -> np.ndarray:
        y = np.exp(x - x.max(axis=-1, keepdims=True))
        return y / y.sum(axis=-1, keepdims=True)

    return ScheduleCase(
        f"softmax {'x'.join(map(str, shape))} last axis", te.create_prim_func([a, out]), ref, [shape]
    )


def cases() -> list[ScheduleCase]:
    return [
        conv2d(1, 64, 56, 64, 1),
        conv2d(1, 256, 14, 256, 1),
        depthwise(144, 56),
        matmul(1, 768, 3072),
        matmul(128, 768, 768),
        max_pool(64, 112),
        softmax((12, 128, 128)),
    ]


def kernel_seconds(func: PrimFunc, args: list[np.ndarray], expected: np.ndarray, repeat: int = 5) -> float:
    """Build, check against numpy, time (fastest repeat)."""
    kernel = build(func, listings=False)
    args[-1][...] = np.nan
    kernel(*args)
    np.testing.assert_allclose(args[-1], expected, rtol=1e-3, atol=1e-3)
    return min(evaluate(kernel, args, repeat=repeat, min_repeat_ms=30))


def best_random(case: ScheduleCase, args: list[np.ndarray], expected: np.ndarray, target: Target) -> float:
    space = rule_space(RuleConfig.for_target(target))
    best = float("inf")
    for seed in range(SAMPLES):
        sch = Schedule(case.func, seed=seed)
        space(sch)
        best = min(best, kernel_seconds(sch.func, args, expected, repeat=3))
    return best


def main() -> None:
    target = Target.host()
    set_kernel_threads(2)
    rng = np.random.default_rng(0)
    rows = []
    for case in cases():
        inputs = [rng.standard_normal(s).astype(F32) for s in case.shapes]
        expected = case.numpy(*inputs)
        args = [*inputs, np.empty(expected.shape, F32)]
        numpy_s = best_seconds(lambda: case.numpy(*inputs))  # noqa: B023
        time.sleep(PAUSE_S)
        started = time.perf_counter()
        default = kernel_seconds(default_schedule(case.func, target).func, args, expected)
        random = best_random(case, args, expected, target)
        unscheduled = kernel_seconds(case.func, args, expected, repeat=3)
        rows.append((case.name, default, unscheduled, random, numpy_s))
        print(f"  {case.name}: measured in {time.perf_counter() - started:.0f} s", flush=True)
        time.sleep(PAUSE_S)
    print(
        "| kernel | default us | unscheduled us | best of 16 random us | numpy us "
        "| default vs unscheduled | default / best random | default vs numpy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, default, unscheduled, random, numpy_s in rows:
        print(
            f"| {name} | {default * 1e6:.0f} | {unscheduled * 1e6:.0f} | {random * 1e6:.0f} | "
            f"{numpy_s * 1e6:.0f} | {unscheduled / default:.1f}x faster | {default / random:.2f}x time "
            f"| {numpy_s / default:.2f}x speed |"
        )
