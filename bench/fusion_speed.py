"""Fusion must not cost the tuner its speed: the same conv2d layers tuned bare and fused with their
epilogue (bias + relu; bias + residual add + relu, as in ResNet's basic block), each on a fresh
database for the same number of trials, compared by the best kernel's time (the epilogue adds
memory traffic and a few flops per output, so a fused kernel about as fast as the bare conv means
the epilogue rides along in the conv's output tile)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from compiler import graph
from compiler.graph import GraphBuilder, Module
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


def best_micros(module: Module, trials: int, directory: Path, name: str) -> tuple[float, str]:
    (task,) = graph.extract_tasks(graph.optimize(module))
    result = tune(task.spec, trials=trials, database=f"sqlite:///{directory / name}.db")
    assert result.best is not None
    return result.best.median_secs * 1e6, " + ".join(task.ops)


def main(trials: int = 64) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for title, shape in LAYERS.items():
            bare, _ = best_micros(layer(*shape, "bare"), trials, Path(tmp), "bare")
            print(f"{title}, {trials} trials each: bare conv2d {bare:.0f} us")
            for epilogue in ("bias+relu", "bias+residual+relu"):
                fused, ops = best_micros(layer(*shape, epilogue), trials, Path(tmp), epilogue)
                print(f"    {ops}: {fused:.0f} us = {fused / bare:.2f}x the bare conv's time")
