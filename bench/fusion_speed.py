"""Fusion must not cost the tuner its speed: the same conv2d layers tuned bare and fused with their
epilogue (bias + relu; bias + residual add + relu, as in ResNet's basic block), each on a fresh
database for the same number of trials, compared by the best kernel's time (the epilogue adds
memory traffic and a few flops per output, so a fused kernel about as fast as the bare conv means
the epilogue rides along in the conv's output tile). The default schedules of the same functions
(deterministic, no search) are timed too: they show the cost of the epilogue without the spread of
a 64-trial search."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.common import best_seconds
from compiler import graph
from compiler.build import build
from compiler.graph import ExtractedTask, GraphBuilder, Module
from compiler.schedule_rules import default_schedule
from compiler.target import host_hardware
from tuner.tune import tune

LAYERS = {  # (C, H, W, K): ResNet-18 stages 1 and 3
    "resnet stage 1 (1x64x56x56, 64 3x3)": (64, 56, 56, 64),
    "resnet stage 3 (1x256x14x14, 256 3x3)": (256, 14, 14, 256),
}


def layer(c: int, h: int, w: int, k: int, epilogue: str) -> Module:
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, c, h, w), "float32")
    weight = b.constant("w", rng.standard_normal((k, c, 3, 3)).astype("float32"))
    out = b.call("conv2d", [x, weight], strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
    if epilogue != "bare":
        out = b.call("add", [out, b.constant("bias", rng.standard_normal((k, 1, 1)).astype("float32"))])
    if epilogue == "bias+residual+relu":
        out = b.call("add", [out, b.input("residual", (1, k, h, w), "float32")])
    if epilogue != "bare":
        out = b.call("relu", [out])
    return b.module([out])


def task_of(module: Module) -> ExtractedTask:
    (task,) = graph.extract_tasks(graph.optimize(module))
    return task


def tuned_micros(task: ExtractedTask, trials: int, directory: Path, name: str) -> float:
    result = tune(task.spec, trials=trials, database=f"sqlite:///{directory / name}.db")
    assert result.best is not None
    return result.best.median_secs * 1e6


def default_micros(task: ExtractedTask) -> float:
    target = host_hardware().target
    kernel = build(default_schedule(task.func, target).func, target, listings=False)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(b.shape).astype(b.dtype) for b in task.func.params]  # alive while timed
    pointers = kernel.pointers(*arrays)
    seconds = best_seconds(lambda: kernel.repeat(pointers, 10)) / 10
    del arrays
    return seconds * 1e6


def main(trials: int = 64) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for title, shape in LAYERS.items():
            print(f"{title}: best of {trials} trials each; default schedule")
            bare_tuned = bare_default = 0.0
            for epilogue in ("bare", "bias+relu", "bias+residual+relu"):
                task = task_of(layer(*shape, epilogue))
                tuned = tuned_micros(task, trials, Path(tmp), epilogue)
                default = default_micros(task)
                if epilogue == "bare":
                    bare_tuned, bare_default = tuned, default
                print(
                    f"    {' + '.join(task.ops):26s} tuned {tuned:6.0f} us = {tuned / bare_tuned:.2f}x bare; "
                    f"default {default:6.0f} us = {default / bare_default:.2f}x bare"
                )
