"""Whether a transformer exported with ONNX's Attention operator (torch.onnx's dynamo exporter at
opset 23 writes each scaled_dot_product_attention as one) runs as fast here as the same model
imported from PyTorch: the Attention node imports as ONNX's function body for it, so the two
graphs should meet after optimization. Untuned, batch 1, in one run: ours from PyTorch, ours from
the opset-23 file, ONNX Runtime on that file (its Attention kernel) and on the legacy opset-17
export (its fused attention), each checked against PyTorch.

    python -m bench onnx_attention                    # hf_bert and hf_gpt2 (2 layers, 64 tokens)
    python -m bench.onnx_attention hf_bert_base       # any Hugging Face model of model_latency
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from bench.common import set_kernel_threads
from bench.model_latency import ZooModel, hugging_face_models, median_ms, onnx_bytes
from compiler import frontend, graph
from compiler.target import host_hardware
from tuner.cli.models import onnx_runtime


def opset23_bytes(model: object, args: tuple) -> bytes:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, opset_version=23, verbose=False)
    assert program is not None
    proto = program.model_proto
    attention = sum(n.op_type == "Attention" for n in proto.graph.node)
    print(f"    the opset-23 export holds {attention} Attention nodes")
    return proto.SerializeToString()


def measure(entry: ZooModel, repeat: int, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    model, args = entry.make(), entry.inputs()
    inputs = [a.numpy() for a in args]
    with torch.no_grad():
        expected = model(*args).numpy()
    opset23, opset17 = opset23_bytes(model, args), onnx_bytes(model, args)
    builds = {
        "ours from PyTorch": lambda: frontend.from_torch(model, args),
        "ours from opset 23": lambda: frontend.from_onnx(opset23),
    }
    runs = {}
    for label, imported in builds.items():
        start = time.perf_counter()
        compiled = graph.build(graph.optimize(imported()))
        secs = time.perf_counter() - start
        (got,) = compiled(*inputs)
        error = float(np.max(np.abs(got - expected)) / (np.max(np.abs(expected)) + 1e-12))
        print(f"    {label}: built in {secs:.1f} s, {len(compiled.steps)} kernel calls, error {error:.1e}")
        runs[label] = lambda compiled=compiled: compiled(*inputs)
    runs["ORT on opset 23"] = onnx_runtime(opset23, inputs, threads)
    runs["ORT on opset 17"] = onnx_runtime(opset17, inputs, threads)
    times = {}
    for label, run in runs.items():
        times[label] = median_ms(run, repeat)
        time.sleep(0.3)
    base = times["ours from PyTorch"][0]
    print(f"{entry.name} ({threads} threads):")
    for label, (median, low, high) in times.items():
        print(f"    {label:20s} {median:8.2f} ms [{low:.2f}-{high:.2f}]  {median / base:5.2f}x the first")


def main(names: list[str] | None = None, repeat: int = 20) -> None:
    threads = int(os.environ.get("THREADS", host_hardware().target.cores))
    set_kernel_threads(threads)
    wanted = names or ["hf_bert", "hf_gpt2"]
    for entry in hugging_face_models():
        if entry.name in wanted:
            measure(entry, repeat, threads)


__all__ = ["main"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1:] or None)
