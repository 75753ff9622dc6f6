"""NCHW against channel-blocked convolutions (what the `block_conv_channels` pass chooses between),
with the default schedule: per layer shape of ResNet-18/50 and MobileNetV2, GFLOPS of conv2d_nchw and
of conv2d_nchw_kblock (weights packed in blocks of 16 output channels); then single layers with their
bias and relu (blocked: with the copy back to NCHW) and whole models, built with and without the
pass, their latency alternated in one process.

    python -m bench conv_layout            # THREADS=1 for one core (pin it with taskset)
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from bench.common import alternated_ms, forward_passes, threads_from_env, with_and_without, zoo_model_ms
from compiler import Target, build, graph
from compiler.graph import passes
from compiler.schedule_rules import default_schedule
from compiler.workloads import workload_from_spec
from runner.evaluate import evaluate

PAUSE_S = 0.3
# (C, H=W, K, R=S, padding): ResNet-18 stages 2-5, its 1x1 downsampling, ResNet-50 and MobileNetV2 1x1s.
LAYERS = [
    (64, 56, 64, 3, 1),
    (128, 28, 128, 3, 1),
    (256, 14, 256, 3, 1),
    (512, 7, 512, 3, 1),
    (64, 28, 128, 1, 0),
    (256, 14, 1024, 1, 0),
    (2048, 7, 512, 1, 0),
    (960, 7, 160, 1, 0),
]


# (C, H=W, K, R=S, stride, padding): short reductions (MobileNetV2's expansions, its stem), a long one
# on a small image, ResNet's stem.
FUSED_LAYERS = [
    (32, 28, 192, 1, 1, 0),
    (64, 14, 384, 1, 1, 0),
    (160, 7, 960, 1, 1, 0),
    (3, 224, 32, 3, 2, 1),
    (3, 224, 64, 7, 2, 3),
]


def _spec(op: str, layer: tuple[int, ...]) -> dict[str, Any]:
    C, HW, K, RS, p = layer
    return {"op": op, "params": {"N": 1, "C": C, "H": HW, "W": HW, "K": K, "R": RS, "S": RS, "padding": p}}


def layer_gflops(op: str, layer: tuple[int, ...], target: Target, rng: np.random.Generator) -> float:
    """The default schedule of the layer in `op`'s layout, checked against its reference, timed."""
    wl = workload_from_spec(_spec(op, layer))
    inputs = wl.random_inputs(rng)
    (want,) = wl.reference(*inputs)
    kernel = build(default_schedule(wl.func, target).func, target, listings=False)
    out = np.full(want.shape, np.nan, want.dtype)
    kernel(*inputs, out)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)
    return wl.flops / min(evaluate(kernel, [*inputs, out], repeat=7, min_repeat_ms=50)) / 1e9


def fused_layer_ms(layer: tuple[int, ...], rng: np.random.Generator) -> dict[str, list[float]]:
    """conv + bias + relu as one graph, built with and without blocking (checked to agree)."""
    C, HW, K, RS, stride, padding = layer
    b = graph.GraphBuilder()
    x = b.input("x", (1, C, HW, HW), "float32")
    w = b.constant("w", (rng.standard_normal((K, C, RS, RS)) * 0.1).astype("float32"))
    attrs = {"strides": (stride, stride), "padding": (padding,) * 4, "dilation": (1, 1), "groups": 1}
    y = b.call("add", [b.call_attrs("conv2d", [x, w], attrs), b.constant("b", np.ones((K, 1, 1), "float32"))])
    builds = with_and_without(b.module([b.call("relu", [y])]), passes.block_conv_channels)
    data = rng.standard_normal((1, C, HW, HW)).astype("float32")
    np.testing.assert_allclose(builds["with"](data)[0], builds["without"](data)[0], rtol=1e-3, atol=1e-3)
    return alternated_ms(forward_passes(builds, [data]), rounds=3, calls=20)


def main() -> None:
    threads = threads_from_env()
    target, rng = Target.host(), np.random.default_rng(0)
    print(f"default schedules, {threads} thread(s), {target.mcpu}")
    print("| layer C, HxW, K, RxS | NCHW GFLOPS | blocked GFLOPS | blocked / NCHW |")
    for layer in LAYERS:
        nchw = layer_gflops("conv2d_nchw", layer, target, rng)
        time.sleep(PAUSE_S)
        blocked = layer_gflops("conv2d_nchw_kblock", layer, target, rng)
        time.sleep(PAUSE_S)
        C, HW, K, RS, _ = layer
        shape = f"{C}, {HW}x{HW}, {K}, {RS}x{RS}"
        print(f"| {shape} | {nchw:.0f} | {blocked:.0f} | {blocked / nchw:.2f} |", flush=True)
    print("conv + bias + relu, min ms per call of the built graph (its output allocated in each call)")
    print("| C, HxW, K, RxS, stride | NCHW | with the pass |")
    for layer in FUSED_LAYERS:
        times = fused_layer_ms(layer, rng)
        C, HW, K, RS, stride, _ = layer
        nchw_ms, blocked_ms = min(times["without"]), min(times["with"])
        print(f"| {C}, {HW}x{HW}, {K}, {RS}x{RS}, {stride} | {nchw_ms:.3f} | {blocked_ms:.3f} |", flush=True)
    for name in ("resnet18", "mobilenet_v2"):
        times = zoo_model_ms(name, passes.block_conv_channels)
        shown = {k: f"median {statistics.median(v):.2f} ms, min {min(v):.2f}" for k, v in times.items()}
        print(f"{name}: channel-blocked {shown['with']}; NCHW {shown['without']}", flush=True)


__all__ = ["main"]
