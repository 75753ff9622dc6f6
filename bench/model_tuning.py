"""Whole models tuned at growing budgets (0 = default schedules, then 500, then 2,000 trials in all:
each step continues from the last in one SQLite database per model), each checkpoint timed at batch 1
on this machine's cores alternated with the peers of `bench.model_peers` (ONNX Runtime, OpenVINO
when installed, torch.compile, PyTorch eager): latency, ratio to each peer, the estimate from the
best records, tuning wall time, and where the time goes (the tasks by share of latency, GFLOPS
against the measured FMA peak, and what their calls took inside forward passes).

    python -m bench.model_tuning [--models resnet18 bert_layer mobilenet_v2] [--budgets 0 500 2000]
        [--databases DIR]    # keep each model's database there (a second run adds its budgets)
"""

from __future__ import annotations

import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # an honest numpy/PyTorch baseline (bench/__main__.py)

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.common import alternated_ms, budget_arguments, tuned_at_budgets
from bench.model_latency import ZooModel, zoo_models
from bench.model_peers import peers
from bench.peak import measure_peak
from compiler import frontend, graph
from compiler.target import host_hardware
from tuner.model_tuning import ModelTuneResult

ROUNDS, CALLS = 5, 6  # per checkpoint: ours and each peer alternated, 6 calls each per round


def checkpoint(
    entry: ZooModel,
    result: ModelTuneResult,
    tuned_secs: float,
    peers: dict[str, Callable[[], object]],
    peak: float,
) -> None:
    """Ours and the peers timed alternated (the host drifts over a tuning run: peers timed once at
    the start moved by up to 1.5x), then where the time goes: per task, its share of the estimate
    and what its calls took inside forward passes."""
    inputs = [a.numpy() for a in entry.inputs()]
    times = alternated_ms({"ours": lambda: result.model(*inputs), **peers}, ROUNDS, CALLS)
    ms = {name: statistics.median(t) for name, t in times.items()}
    ours = ms.pop("ours")
    trials = result.curve[-1][0] if result.curve else 0
    ratios = ", ".join(f"{name} {peer:.2f} ms ({peer / ours:.2f}x)" for name, peer in ms.items())
    total = result.estimated_secs
    estimate = f"{total * 1e3:.2f} ms" if total < float("inf") else "none (tasks without records)"
    print(
        f"{entry.name} after {trials} more trials ({tuned_secs:.0f} s of tuning in all): ours "
        f"{ours:.2f} ms, estimated {estimate}; {ratios} (above 1x: we are faster)"
    )
    if total == float("inf"):
        return
    in_pass: dict[str, float] = {}
    for step, secs in result.model.profile(*inputs, repeat=15, in_pass=True):
        in_pass[step.func] = in_pass.get(step.func, 0.0) + secs
    print(f"    kernels in a pass: {sum(in_pass.values()) * 1e3:.2f} ms; the tasks that take most:")
    for report in sorted(result.tasks, key=lambda t: -t.weighted_secs)[:8]:
        print(
            f"    {report.task.name[:40]:40s} x{report.task.weight:<2d} {report.task.shape[:26]:26s} "
            f"{report.weighted_secs * 1e3:7.3f} ms {report.weighted_secs / total:6.1%} "
            f"{report.best_gflops:6.1f} GFLOPS ({report.best_gflops / peak:4.0%} of peak), "
            f"in a pass {in_pass.get(report.task.name, 0.0) * 1e3:7.3f} ms"
        )


def run(entry: ZooModel, budgets: list[int], peak: float, directory: Path) -> None:
    threads = host_hardware().target.cores
    module = graph.optimize(frontend.from_torch(entry.make(), entry.inputs()))
    database = f"sqlite:///{directory / (entry.name + '.db')}"
    reference = peers(entry, threads)
    for _, result, tuned_secs in tuned_at_budgets(module, budgets, database):
        checkpoint(entry, result, tuned_secs, reference, peak)


def main(
    models: list[str] | None = None, budgets: list[int] | None = None, directory: str | None = None
) -> None:
    budgets = sorted(budgets or [0, 500, 2000])
    chosen = [m for m in zoo_models() if m.name in (models or ["resnet18", "mobilenet_v2", "bert_layer"])]
    _, peak, _ = measure_peak()
    print(f"FMA peak on all cores: {peak:.0f} GFLOPS; budgets {budgets}")
    with tempfile.TemporaryDirectory() as tmp:
        for entry in chosen:
            run(entry, budgets, peak, Path(directory or tmp))


if __name__ == "__main__":
    options = budget_arguments(__doc__.split("\n\n")[0])
    main(options.models, options.budgets, options.databases)
