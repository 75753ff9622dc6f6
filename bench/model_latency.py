"""Untuned models end to end: each zoo model imported from PyTorch, optimized and built with the
default schedules, timed at batch 1 on this machine's cores against PyTorch eager and ONNX Runtime
(all graph optimizations) in one run; then where our time goes, kernel by kernel. With the
`thirdparty` extra, Hugging Face models too (random weights from config classes, int64 token ids
and attention mask as inputs, their last hidden state as output): GPT-2 and BERT with GPT-2-small's
and BERT-base's widths (2 layers, 64 tokens) and a 2-layer ViT-tiny, and full-sized GPT-2 small and
BERT-base (12 layers, 128 tokens), ViT-base and MobileNetV2 (224x224; TensorFlow-style padding, an
explicit pad before every conv).

    python -m bench model_latency
    python -m bench.model_latency hf_gpt2 hf_bert hf_vit_tiny     # some of them
    THREADS=1 taskset -c 1 python -m bench model_latency     # one core, for a machine that is busy
"""

from __future__ import annotations

import io
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.common import set_kernel_threads
from compiler import frontend, graph
from compiler.graph import CompiledModel
from compiler.target import host_hardware
from tuner.cli.models import latencies, onnx_runtime


@dataclass(frozen=True)
class ZooModel:
    name: str
    make: Callable[[], object]
    inputs: Callable[[], tuple]


def zoo_models() -> list[ZooModel]:
    from bench import zoo

    return [
        ZooModel("mlp", zoo.mlp, zoo.mlp_inputs),
        ZooModel("resnet18", zoo.resnet18, zoo.image_inputs),
        ZooModel("mobilenet_v2", zoo.mobilenet_v2, zoo.image_inputs),
        ZooModel("bert_layer", zoo.transformer_encoder_layer, zoo.transformer_inputs),
        *hugging_face_models(),
    ]


def hugging_face_models() -> list[ZooModel]:
    """Nothing when `transformers` is not installed (the `thirdparty` extra)."""
    try:
        import torch
        import transformers
    except ImportError:
        return []

    class LastHidden(torch.nn.Module):
        def __init__(self, model: torch.nn.Module, names: tuple[str, ...]) -> None:
            super().__init__()
            self.model, self.names = model, names
            # The wrapper too: the legacy ONNX exporter restores the mode it found, recursively,
            # which would switch the model's dropout on for every later call.
            self.eval()

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(self.names, args))).last_hidden_state

    def tokens(length: int) -> Callable[[], tuple]:
        def make() -> tuple:
            ids = torch.randint(0, 5000, (1, length), generator=torch.Generator().manual_seed(0))
            return ids, torch.ones(1, length, dtype=torch.int64)

        return make

    def image() -> tuple:
        return (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)

    def seeded(make: Callable[[], torch.nn.Module], names: tuple[str, ...]) -> Callable[[], torch.nn.Module]:
        """The same random weights at every call (the peers and ours time the same model)."""

        def build() -> torch.nn.Module:
            torch.manual_seed(0)
            return LastHidden(make(), names)

        return build

    def text(make: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
        return seeded(make, ("input_ids", "attention_mask"))

    def vision(make: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
        return seeded(make, ("pixel_values",))

    def gpt2(layers: int) -> transformers.GPT2Config:
        return transformers.GPT2Config(
            vocab_size=5000, n_embd=768, n_layer=layers, n_head=12, n_positions=512
        )

    def bert(layers: int) -> transformers.BertConfig:
        return transformers.BertConfig(vocab_size=5000, num_hidden_layers=layers)  # BERT-base otherwise

    tiny = transformers.ViTConfig(
        hidden_size=192, num_hidden_layers=2, num_attention_heads=3, intermediate_size=768
    )
    return [
        ZooModel("hf_gpt2", text(lambda: transformers.GPT2Model(gpt2(2))), tokens(64)),
        ZooModel("hf_bert", text(lambda: transformers.BertModel(bert(2))), tokens(64)),
        ZooModel("hf_vit_tiny", vision(lambda: transformers.ViTModel(tiny)), image),
        ZooModel("hf_gpt2_small", text(lambda: transformers.GPT2Model(gpt2(12))), tokens(128)),
        ZooModel("hf_bert_base", text(lambda: transformers.BertModel(bert(12))), tokens(128)),
        ZooModel("hf_vit_base", vision(lambda: transformers.ViTModel(transformers.ViTConfig())), image),
        ZooModel(
            "hf_mobilenet_v2",  # TensorFlow-style padding: an explicit pad before every conv
            vision(lambda: transformers.MobileNetV2Model(transformers.MobileNetV2Config())),
            image,
        ),
    ]


def median_ms(run: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    """(median, min, max) milliseconds of `repeat` calls after two warm-up calls."""
    times = [t * 1e3 for t in latencies(run, repeat)]
    return statistics.median(times), min(times), max(times)


def onnx_bytes(model: object, args: tuple) -> bytes:
    """The model as the peers' benchmarks export it: the legacy exporter, opset 17."""
    import torch

    buffer = io.BytesIO()
    torch.onnx.export(model, args, buffer, dynamo=False, opset_version=17)
    return buffer.getvalue()


def onnx_session(model: object, args: tuple, threads: int) -> Callable[[], object]:
    """The same model exported by `onnx_bytes`, in ONNX Runtime."""
    return onnx_runtime(onnx_bytes(model, args), [a.numpy() for a in args], threads)


def kernel_table(model: CompiledModel, inputs: list[np.ndarray], top: int = 8) -> None:
    """The kernels that take the most time (median of one call, times its calls per pass)."""
    per_func: dict[str, list[float]] = {}
    gflop: dict[str, float] = {}
    for step, secs in model.profile(*inputs, repeat=3, min_secs=0.01):
        per_func.setdefault(step.func, []).append(secs)
    for node in model.module.nodes():
        if isinstance(node, graph.CallTIR):
            gflop[node.func] = node.flops / 1e9
    total = sum(sum(v) for v in per_func.values())
    print(f"    kernels: {len(model.steps)} calls of {len(per_func)} functions, sum {total * 1e3:.2f} ms")
    print(f"    {'function':44s} {'calls':>5s} {'ms':>8s} {'share':>6s} {'GFLOPS':>7s}")
    for func, times in sorted(per_func.items(), key=lambda kv: -sum(kv[1]))[:top]:
        rate = gflop[func] / statistics.median(times) if gflop[func] else 0.0
        spent = sum(times)
        print(f"    {func[:44]:44s} {len(times):5d} {spent * 1e3:8.3f} {spent / total:6.1%} {rate:7.1f}")


def measure(entry: ZooModel, repeat: int, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    model, args = entry.make(), entry.inputs()
    start = time.perf_counter()
    module = graph.optimize(frontend.from_torch(model, args))
    compiled = graph.build(module)
    build_secs = time.perf_counter() - start
    inputs = [a.numpy() for a in args]
    with torch.no_grad():
        expected = model(*args).numpy()
    (got,) = compiled(*inputs)
    error = float(np.max(np.abs(got - expected)) / (np.max(np.abs(expected)) + 1e-12))
    ours = median_ms(lambda: compiled(*inputs), repeat)
    time.sleep(0.3)

    def eager() -> object:
        with torch.no_grad():
            return model(*args)

    theirs = median_ms(eager, repeat)
    time.sleep(0.3)
    ort = median_ms(onnx_session(model, args, threads), repeat)
    time.sleep(0.3)
    print(
        f"{entry.name}: ours {ours[0]:.2f} ms [{ours[1]:.2f}-{ours[2]:.2f}], PyTorch {theirs[0]:.2f} ms "
        f"[{theirs[1]:.2f}-{theirs[2]:.2f}], ONNX Runtime {ort[0]:.2f} ms [{ort[1]:.2f}-{ort[2]:.2f}] -> "
        f"{theirs[0] / ours[0]:.2f}x PyTorch, {ort[0] / ours[0]:.2f}x ORT (above 1: we are faster)"
    )
    print(
        f"    built in {build_secs:.1f} s; max relative error vs PyTorch {error:.1e}; intermediates "
        f"{compiled.peak_bytes / 1e6:.2f} MB planned vs {compiled.plan.total_bytes / 1e6:.2f} MB unplanned"
    )
    kernel_table(compiled, inputs)


def main(names: list[str] | None = None, repeat: int = 20) -> None:
    threads = int(os.environ.get("THREADS", host_hardware().target.cores))
    set_kernel_threads(threads)
    for entry in zoo_models():
        if not names or entry.name in names:
            measure(entry, repeat, threads)


__all__ = ["main"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1:] or None)
