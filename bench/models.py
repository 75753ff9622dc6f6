"""Small models tuned end to end with one shared trial budget (the task scheduler), then built from
the best kernels and timed against numpy: the MLC course's MLP (dense 784->128 + bias + relu, dense
128->10 + bias) at batch 1 and 64, and a stack of two 3x3 conv2d layers (via im2col in numpy)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.common import best_seconds
from bench.conv2d import im2col_conv
from compiler.workloads import workload_from_spec
from tuner.best import compile_best
from tuner.task_scheduler import TasksResult, WeightedWorkload, tune_tasks


def mlp_layers(batch: int) -> list[dict]:
    return [
        {"op": "dense_bias_relu", "params": {"batch": batch, "in_features": 784, "out_features": 128}},
        {"op": "dense_bias", "params": {"batch": batch, "in_features": 128, "out_features": 10}},
    ]


CONV_LAYERS = [
    {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 16, "H": 32, "W": 32, "K": 32, "R": 3, "S": 3, "padding": 1},
    },
    {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 32, "H": 32, "W": 32, "K": 32, "R": 3, "S": 3, "padding": 1},
    },
]


def run_chain(kernels: list, weights: list, x: np.ndarray) -> tuple[list[np.ndarray], Callable[[], None]]:
    """A forward pass: each layer's kernel on the previous layer's output. Returns every layer's
    output buffer (after one pass) and the pass itself, for timing."""
    outs = [workload_from_spec(spec).empty_outputs()[0] for _, spec in kernels]

    def forward() -> None:
        h = x
        for (kernel, _), params, out in zip(kernels, weights, outs):
            kernel(h, *params, out)
            h = out

    forward()
    return outs, forward


def mlp_numpy(x, w1, b1, w2, b2):
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def evaluate_model(name: str, layers: list[dict], database: str, numpy_forward, inputs) -> None:
    kernels = [(compile_best(spec, database=database), spec) for spec in layers]
    x, weights = inputs
    outs, forward = run_chain(kernels, weights, x)
    np.testing.assert_allclose(outs[-1], numpy_forward(), rtol=1e-3, atol=1e-3)
    ours, theirs = best_seconds(forward), best_seconds(numpy_forward)
    print(
        f"{name}: tuned model {ours * 1e6:.0f} us, numpy {theirs * 1e6:.0f} us -> {theirs / ours:.2f}x numpy"
    )


def describe(name: str, result: TasksResult) -> None:
    per_task = [result.order.count(i) for i in range(len(result.tasks))]
    trials = sum(r.trials for r in result.results)
    print(f"{name}: {trials} trials in {result.wall_secs:.0f} s, batches per task {per_task}")


def main(trials: int = 128) -> None:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'models.db'}"
        mlp_tasks = [WeightedWorkload(spec) for batch in (1, 64) for spec in mlp_layers(batch)]
        describe("MLP (batch 1 and 64)", tune_tasks(mlp_tasks, trials=trials, database=db, batch_size=8))
        for batch in (1, 64):
            x = rng.standard_normal((batch, 784), dtype=np.float32)
            w1, b1 = (
                rng.standard_normal((128, 784), dtype=np.float32),
                rng.standard_normal(128, dtype=np.float32),
            )
            w2, b2 = (
                rng.standard_normal((10, 128), dtype=np.float32),
                rng.standard_normal(10, dtype=np.float32),
            )
            evaluate_model(
                f"MLP batch {batch}", mlp_layers(batch), db,
                lambda x=x, w1=w1, b1=b1, w2=w2, b2=b2: mlp_numpy(x, w1, b1, w2, b2),
                (x, [(w1, b1), (w2, b2)]),
            )  # fmt: skip
        conv = tune_tasks(
            [WeightedWorkload(s) for s in CONV_LAYERS], trials=trials // 2, database=db, batch_size=8
        )
        describe("conv2d stack", conv)
        x = rng.standard_normal((1, 16, 32, 32), dtype=np.float32)
        ws = [rng.standard_normal((32, c, 3, 3), dtype=np.float32) for c in (16, 32)]
        wls = [workload_from_spec(s) for s in CONV_LAYERS]
        evaluate_model(
            "conv2d stack", CONV_LAYERS, db,
            lambda: im2col_conv(wls[1], im2col_conv(wls[0], x, ws[0]), ws[1]),
            (x, [(ws[0],), (ws[1],)]),
        )  # fmt: skip
