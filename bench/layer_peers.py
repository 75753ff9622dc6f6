"""Each convolution and dense layer of a zoo model against the same layer in ONNX Runtime, both timed
inside their forward passes, in one process: where a model loses to its peer, layer by layer.

Ours: `CompiledModel.profile(in_pass=True)` (each kernel timed once per pass, in order, median over
the passes). ONNX Runtime: its profiler's per-node kernel times (all graph optimizations, the same
threads), median over as many runs. The heavy layers (conv, dense) pair up in execution order,
each of ours with whichever of ORT's next two is closer in FLOPs (the two runtimes order a ResNet
block's shortcut conv and its first conv differently), printed with both output shapes; everything
else (layout reorders, pooling, additions ORT did not fuse) is summed as one row per side. Then
where each runtime's time goes by kind: ours by each kernel's first operator, ORT's by node type,
and OpenVINO's (when it is installed: `make bench-models`) by node type and implementation from
its `PERF_COUNT` profile, each as the median over the passes of the kind's sum in a pass.

    python -m bench.layer_peers --model mobilenet_v2 [--database sqlite:///DB] [--passes 25]
"""

from __future__ import annotations

import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # an honest baseline (bench/__main__.py)

import argparse
import json
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import alternated_ms, set_kernel_threads
from bench.model_latency import ZooModel, onnx_bytes, zoo_models
from compiler import frontend, graph
from compiler.graph import CompiledModel
from compiler.target import host_hardware
from tuner.best import build_model
from tuner.cli.models import onnx_runtime, onnx_runtime_session

ORT_HEAVY = {"Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul", "NchwcConv"}
OUR_HEAVY = ("conv2d", "matmul", "dense")
WARMUP = 5
LOOKAHEAD = 2


@dataclass(frozen=True)
class LayerTime:
    name: str
    shape: tuple[int, ...]
    ms: float
    flops: float


def our_layers(model: CompiledModel, inputs: list[np.ndarray], passes: int) -> tuple[list[LayerTime], float]:
    """Our heavy kernels in pass order, and the milliseconds every other kernel takes."""
    nodes = {n.name: n for n in model.module.nodes() if isinstance(n, graph.CallTIR)}
    heavy, other = [], 0.0
    for step, secs in model.profile(*inputs, repeat=passes, in_pass=True):
        node = nodes[step.node]
        if any(word in step.func for word in OUR_HEAVY):
            heavy.append(LayerTime(step.func, node.type.shape, secs * 1e3, node.flops))
        else:
            other += secs * 1e3
    return heavy, other


def ort_profile(onnx: bytes, inputs: list[np.ndarray], threads: int, runs: int) -> list[dict]:
    """ONNX Runtime's profiler events over WARMUP + `runs` passes."""
    with tempfile.TemporaryDirectory() as tmp:
        session = onnx_runtime_session(onnx, threads, profile_prefix=str(Path(tmp) / "ort"))
        feed = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
        for _ in range(WARMUP + runs):
            session.run(None, feed)
        return json.loads(Path(session.end_profiling()).read_text())


def ort_layers(
    onnx: bytes, inputs: list[np.ndarray], threads: int, runs: int
) -> tuple[list[LayerTime], float]:
    """ONNX Runtime's heavy nodes in execution order (median kernel time over `runs`), and the
    milliseconds of its other nodes."""
    events = ort_profile(onnx, inputs, threads, runs)
    times: dict[str, list[float]] = {}
    kinds: dict[str, tuple[str, list[tuple[int, ...]], tuple[int, ...]]] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        name = event["name"].removesuffix("_kernel_time")
        times.setdefault(name, []).append(event["dur"] / 1e3)
        args = event["args"]
        ins = [tuple(next(iter(t.values()), ())) for t in args.get("input_type_shape", [])]
        out = [tuple(next(iter(t.values()), ())) for t in args.get("output_type_shape", [])] or [()]
        kinds[name] = (args["op_name"], ins, out[0])
    heavy, other = [], 0.0
    for name, durations in times.items():  # dicts keep the first run's execution order
        ms = statistics.median(durations[WARMUP:])
        op, ins, out = kinds[name]
        if op in ORT_HEAVY:
            heavy.append(LayerTime(f"{op} {name}", out, ms, _ort_flops(op, ins, out)))
        else:
            other += ms
    return heavy, other


def _ort_flops(op: str, ins: list[tuple[int, ...]], out: tuple[int, ...]) -> float:
    """Multiply-adds x 2 of a conv (weights [K, C/groups, R, S], or blocked, whose elements per
    output channel are the same) or a matrix product (the reduction: A's last dimension)."""
    if "Conv" in op:
        channels = math.prod(out) // (out[0] * out[2] * out[3])  # NCHW, or blocked NCHWc
        return 2.0 * math.prod(out) * math.prod(ins[1]) / channels
    return 2.0 * math.prod(out) * ins[0][-1]


def our_kinds(model: CompiledModel, inputs: list[np.ndarray], passes: int) -> dict[str, float]:
    """Milliseconds a pass spends in kernels by each one's first operator (matmul_nblock, softmax)."""
    nodes = {n.name: n for n in model.module.nodes() if isinstance(n, graph.CallTIR)}
    kinds: dict[str, float] = {}
    for step, secs in model.profile(*inputs, repeat=passes, in_pass=True):
        kind = nodes[step.node].ops[0]
        kinds[kind] = kinds.get(kind, 0.0) + secs * 1e3
    return kinds


def ort_kinds(onnx: bytes, inputs: list[np.ndarray], threads: int, runs: int) -> dict[str, float]:
    """Milliseconds a pass spends in ONNX Runtime's nodes by op type (median over `runs`)."""
    events = ort_profile(onnx, inputs, threads, runs)
    per_run: dict[str, list[float]] = {}
    seen: dict[str, int] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        run = seen.get(event["name"], 0)
        seen[event["name"]] = run + 1
        sums = per_run.setdefault(event["args"]["op_name"], [0.0] * (WARMUP + runs))
        sums[run] += event["dur"] / 1e3
    return {kind: statistics.median(sums[WARMUP:]) for kind, sums in per_run.items()}


def openvino_kinds(onnx: bytes, inputs: list[np.ndarray], threads: int, runs: int) -> dict[str, float] | None:
    """Milliseconds a pass spends in OpenVINO's nodes by "type / implementation" (median over
    `runs`, `PERF_COUNT`); None when OpenVINO is not installed."""
    from bench.model_peers import openvino_request

    request = openvino_request(onnx, threads, PERF_COUNT="YES")
    if request is None:
        return None
    per_run: dict[str, list[float]] = {}
    for run in range(WARMUP + runs):
        request.infer(inputs)
        for node in request.get_profiling_info():
            if node.status == node.Status.EXECUTED:
                sums = per_run.setdefault(f"{node.node_type} / {node.exec_type}", [0.0] * (WARMUP + runs))
                sums[run] += node.real_time.total_seconds() * 1e3
    return {kind: statistics.median(sums[WARMUP:]) for kind, sums in per_run.items()}


def print_kinds(runtime: str, kinds: dict[str, float]) -> None:
    top = sorted(kinds.items(), key=lambda kv: -kv[1])
    print(
        f"{runtime} by kind, {sum(kinds.values()):.3f} ms in all: "
        + ", ".join(f"{k} {ms:.3f}" for k, ms in top)
    )


def pair(ours: list[LayerTime], theirs: list[LayerTime]) -> list[tuple[LayerTime | None, LayerTime | None]]:
    """Each of our layers with whichever of ORT's next LOOKAHEAD unpaired ones is closest in FLOPs."""
    left = list(theirs)
    out: list[tuple[LayerTime | None, LayerTime | None]] = []
    for layer in ours:
        window = left[:LOOKAHEAD]
        if not window:
            out.append((layer, None))
            continue
        match = min(window, key=lambda t: abs(math.log(max(t.flops, 1.0) / max(layer.flops, 1.0))))
        left.remove(match)
        out.append((layer, match))
    return out + [(None, t) for t in left]


def compare(entry: ZooModel, database: str | None, passes: int, threads: int) -> None:
    model, args = entry.make(), entry.inputs()
    onnx = onnx_bytes(model, args)
    inputs = [a.numpy() for a in args]
    module = graph.optimize(frontend.from_torch(model, args))
    ours = build_model(module, database=database) if database else graph.build(module)
    runs = {"ours": lambda: ours(*inputs), "ort": onnx_runtime(onnx, inputs, threads)}
    latency = {k: statistics.median(v) for k, v in alternated_ms(runs, 5, 6).items()}
    mine, my_other = our_layers(ours, inputs, passes)
    theirs, their_other = ort_layers(onnx, inputs, threads, passes)
    print(
        f"{entry.name}: forward pass ours {latency['ours']:.3f} ms, ONNX Runtime {latency['ort']:.3f} ms "
        f"(alternated); layers timed in their passes ({passes} passes each):"
    )
    print(f"{'ours':44s} {'ms':>7s} {'ONNX Runtime':52s} {'ms':>7s} {'ORT/ours':>8s}")
    missing = LayerTime("-", (), 0.0, 0.0)
    for first, second in pair(mine, theirs):
        a, b = first or missing, second or missing
        ratio = f"{b.ms / a.ms:8.2f}" if a.ms and b.ms else ""
        left = f"{a.name[:30]} {'x'.join(map(str, a.shape))}"
        right = f"{b.name[-30:]} {'x'.join(map(str, b.shape))}"
        print(f"{left[:44]:44s} {a.ms:7.3f} {right[:52]:52s} {b.ms:7.3f} {ratio}")
    my_heavy, their_heavy = sum(x.ms for x in mine), sum(x.ms for x in theirs)
    print(f"{'heavy layers':44s} {my_heavy:7.3f} {'':52s} {their_heavy:7.3f} {their_heavy / my_heavy:8.2f}")
    print(f"{'everything else':44s} {my_other:7.3f} {'':52s} {their_other:7.3f}")
    print_kinds("ours", our_kinds(ours, inputs, passes))
    print_kinds("ONNX Runtime", ort_kinds(onnx, inputs, threads, passes))
    openvino = openvino_kinds(onnx, inputs, threads, passes)
    if openvino is not None:
        print_kinds("OpenVINO", openvino)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mobilenet_v2", choices=[m.name for m in zoo_models()])
    parser.add_argument(
        "--database", help="build from the best records of this database URL (sqlite:///path.db)"
    )
    parser.add_argument("--passes", type=int, default=25)
    args = parser.parse_args(argv)
    threads = host_hardware().target.cores
    set_kernel_threads(threads)
    entry = next(m for m in zoo_models() if m.name == args.model)
    compare(entry, args.database, args.passes, threads)


if __name__ == "__main__":
    main()
