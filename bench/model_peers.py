"""Every model of the zoo and of the Hugging Face set against the fastest CPU runtimes, in one
process: ours (default schedules, then after each tuning budget), ONNX Runtime (all graph
optimizations), OpenVINO (`PERFORMANCE_HINT=LATENCY`, f32, this machine's cores), torch.compile
(inductor, default mode) and PyTorch eager, batch 1, alternated round by round with pauses between
libraries; each peer's output is checked against eager before it is timed. Prints each latency,
its ratio to ours and ours against the fastest peer, and the tuning wall time.

The peers are not dependencies of the project: OpenVINO comes from the index beside the benchmark
(`make bench-models` installs it into the venv; without it, its column is left out).

    python -m bench.model_peers                                   # every model, untuned
    python -m bench.model_peers --models hf_bert hf_gpt2 --budgets 0 300 2000
    make bench-models BUDGETS="0 300" MODELS="resnet18 hf_bert"
"""

from __future__ import annotations

import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # an honest numpy/PyTorch baseline (bench/__main__.py)

import statistics
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import alternated_ms, budget_arguments, tuned_at_budgets
from bench.model_latency import ZooModel, onnx_bytes, zoo_models
from compiler import frontend, graph
from compiler.target import host_hardware
from tuner.cli.models import onnx_runtime

ROUNDS, CALLS = 5, 6
TOLERANCE = 1e-3  # a peer whose output differs more than this from eager's is not timed
OPENVINO_CONFIG = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}

Run = Callable[[], object]


def eager_run(model: object, args: tuple) -> Run:
    import torch

    def eager() -> object:
        with torch.no_grad():
            return model(*args)

    return eager


def openvino_request(onnx: bytes, threads: int, **extra: str) -> Any | None:
    """An OpenVINO infer request on the same ONNX export as ONNX Runtime's, compiled with
    OPENVINO_CONFIG and `extra` (PERF_COUNT="YES"); None when OpenVINO is not installed."""
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(onnx)
        config = {**OPENVINO_CONFIG, "INFERENCE_NUM_THREADS": threads, **extra}
        compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    return compiled.create_infer_request()


def openvino_run(onnx: bytes, inputs: list[np.ndarray], threads: int) -> Run | None:
    """OpenVINO's forward pass on `inputs`; None when it is not installed."""
    request = openvino_request(onnx, threads)
    return None if request is None else lambda: list(request.infer(inputs).values())


def torch_compile_run(model: object, args: tuple) -> Run:
    import torch

    compiled = torch.compile(model)

    def run() -> object:
        with torch.no_grad():
            return compiled(*args)

    return run


def first_output(value: object) -> np.ndarray:
    """The first output of any runtime's result, as numpy."""
    while isinstance(value, (list, tuple)):
        value = value[0]
    return value.detach().numpy() if hasattr(value, "detach") else np.asarray(value)


def peers(entry: ZooModel, threads: int) -> dict[str, Run]:
    """The peers on `entry`'s inputs, each checked against eager: one whose output differs is
    reported and left out."""
    import torch

    torch.set_num_threads(threads)
    model, args = entry.make(), entry.inputs()
    inputs = [a.numpy() for a in args]
    onnx = onnx_bytes(model, args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        candidates: dict[str, Run | None] = {
            "ONNX Runtime": onnx_runtime(onnx, inputs, threads),
            "OpenVINO": openvino_run(onnx, inputs, threads),
            "torch.compile": torch_compile_run(model, args),
        }
    eager = eager_run(model, args)
    expected = first_output(eager())
    runs = {"PyTorch eager": eager}
    for name, run in candidates.items():
        if run is None:
            print(f"    {name}: not installed, left out")
            continue
        error = _relative_error(first_output(run()), expected)
        if error > TOLERANCE:
            print(f"    {name}: output differs from eager by {error:.1e}, left out")
            continue
        runs[name] = run
    return runs


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-12))


def report(name: str, trials: int, tuned_secs: float, times: dict[str, list[float]]) -> None:
    ms = {key: statistics.median(t) for key, t in times.items()}
    ours = ms.pop("ours")
    fastest = min(ms, key=ms.__getitem__)
    cells = ", ".join(f"{key} {peer:.3g} ms ({peer / ours:.2f}x)" for key, peer in ms.items())
    print(  # three digits: the MLP's call takes about 0.01 ms
        f"{name} after {trials} trials ({tuned_secs:.0f} s of tuning): ours {ours:.3g} ms; {cells}; "
        f"ours vs the fastest peer ({fastest}): {ms[fastest] / ours:.2f}x (above 1x: we are faster)"
    )


def run(entry: ZooModel, budgets: list[int], directory: Path, threads: int) -> None:
    model, args = entry.make(), entry.inputs()
    inputs = [a.numpy() for a in args]
    module = graph.optimize(frontend.from_torch(model, args))
    reference = peers(entry, threads)
    expected = first_output(reference["PyTorch eager"]())
    database = f"sqlite:///{directory / (entry.name + '.db')}"
    for budget, result, tuned_secs in tuned_at_budgets(module, budgets, database):
        error = _relative_error(first_output(result.model(*inputs)), expected)
        if error > TOLERANCE:
            raise AssertionError(f"{entry.name}: ours differs from eager by {error:.1e}")
        ours = result.model
        times = alternated_ms({"ours": lambda m=ours: m(*inputs), **reference}, ROUNDS, CALLS)
        report(entry.name, budget, tuned_secs, times)


def main(
    models: list[str] | None = None, budgets: list[int] | None = None, directory: str | None = None
) -> None:
    threads = host_hardware().target.cores
    chosen = [m for m in zoo_models() if not models or m.name in models]
    budgets = sorted(budgets or [0])
    print(f"{threads} threads; budgets {budgets}; models {[m.name for m in chosen]}")
    with tempfile.TemporaryDirectory() as tmp:
        for entry in chosen:
            run(entry, budgets, Path(directory or tmp), threads)


if __name__ == "__main__":
    options = budget_arguments(__doc__.split("\n\n")[0])
    main(options.models, options.budgets, options.databases)
