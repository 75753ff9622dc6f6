"""One import for every sequence length (issue 40's graph level): a Hugging Face model exported to ONNX
once with its sequence dimension named, imported with that dimension given a range, and run at
lengths 1 to the model's largest against ONNX Runtime on the same export, which runs any length.

`graph.build` of the family gives one model for the whole range (`compiler.graph.symbolic`: one
module, its kernels scheduled per bucket of lengths), built once before any call. Beside it, the
family compiled for each length on its first call (`graph.DynamicModel`: a static model per length,
its first-call column that compile plus the run, the cost a server pays once per new length). The
steady latencies alternate with ONNX Runtime's round by round, untuned (default schedules); with
--trials, the family tuned once at four lengths under that budget (its model for the range runs
each kernel's tuned traces as the schedules of the buckets of lengths ending at the tuned lengths);
with --separate, each length also imported statically and tuned alone at a quarter of the budget,
as one would tune each length without a family.

    python -m bench dynamic_lengths        # untuned: hf_bert (2 BERT-base layers, 1..512), hf_gpt2 (1..512)
    python -m bench.dynamic_lengths --models hf_bert --trials 800 --separate
"""

from __future__ import annotations

import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # an honest baseline (bench/__main__.py)

import argparse
import io
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

from bench.common import alternated_ms
from bench.model_latency import zoo_models
from compiler import frontend, graph
from compiler.target import host_hardware
from tuner import tune_model
from tuner.cli.models import onnx_runtime

LENGTHS = (1, 7, 64, 128, 333, 512)
LARGEST = {"hf_bert": 512, "hf_gpt2": 512}  # their position tables' sizes
TEXT = ("input_ids", "attention_mask")


def export(model: object, length: int) -> bytes:
    import torch

    ids = torch.zeros(1, length, dtype=torch.int64)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer warnings
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids)),
            buffer,
            dynamo=False,
            opset_version=17,
            input_names=list(TEXT),
            dynamic_axes={n: {1: "sequence"} for n in TEXT},
        )
    return buffer.getvalue()


def compare(name: str, args: argparse.Namespace, threads: int) -> None:
    entry = {m.name: m for m in zoo_models()}[name]
    largest = LARGEST[name]
    onnx = export(entry.make(), 8)
    start = time.perf_counter()
    family = frontend.from_onnx(onnx, dims={"sequence": (1, largest)})
    assert isinstance(family, graph.ShapeFamily)
    imported = time.perf_counter() - start
    symbolic = graph.build(family)
    assert isinstance(symbolic, graph.CompiledModel)
    built = time.perf_counter() - start - imported
    untuned = graph.DynamicModel(family, graph.build)
    print(
        f"\n{name}: {family} (imported in {imported:.2f} s; one model for the range built in {built:.1f} s)"
    )
    tuned, tuned_sizes = None, []
    if args.trials:
        result = tune_model(family, trials=args.trials, database=f"sqlite:///{args.dir}/{name}-family.db")
        tuned, tuned_sizes = result.model, [s["sequence"] for s in result.sizes]
        wall = result.scheduled.wall_secs if result.scheduled else 0.0
        print(f"tuned at lengths {tuned_sizes}, {args.trials} trials in all: {wall:.0f} s")
    columns = ["range ms", "first call s", "per-length ms", "per/range", "ORT ms", "ORT/range"]
    if tuned is not None:
        columns += ["tuned ms", "ORT/tuned"]
    if args.separate:
        columns += ["separately ms", "tuning s"]
    print(f"{'length':>7} " + " ".join(f"{c:>13}" for c in columns) + f" {'max err':>9}")
    rng = np.random.default_rng(0)
    for n in [n for n in args.lengths if n <= largest]:
        inputs = [rng.integers(0, 5000, (1, n)), np.ones((1, n), dtype=np.int64)]
        start = time.perf_counter()
        ours = untuned(*inputs)
        first = time.perf_counter() - start
        runs = {
            "range": lambda x=inputs: symbolic(*x),
            "untuned": lambda x=inputs: untuned(*x),
            "ort": onnx_runtime(onnx, inputs, threads),
        }
        want = runs["ort"]()
        error = max(float(np.max(np.abs(o - w))) for o, w in zip([*ours, *symbolic(*inputs)], want + want))
        if tuned is not None:
            error = max(error, *(float(np.max(np.abs(o - w))) for o, w in zip(tuned(*inputs), want)))
            runs["tuned"] = lambda x=inputs: tuned(*x)
        separate_secs = 0.0
        if args.separate:
            module = family.specialize({"sequence": n})
            database = f"sqlite:///{args.dir}/{name}-{n}.db"
            alone = tune_model(module, trials=args.trials // len(tuned_sizes), database=database)
            separate_secs = alone.scheduled.wall_secs if alone.scheduled else 0.0
            runs["separate"] = lambda x=inputs, m=alone.model: m(*x)
        ms = {k: statistics.median(v) for k, v in alternated_ms(runs, rounds=5, calls=5).items()}
        cells = [f"{ms['range']:.3f}", f"{first:.1f}", *_with_ratio(ms, "range", "untuned")[1:]]
        cells += _with_ratio(ms, "range", "ort")[1:]
        if tuned is not None:
            cells += _with_ratio(ms, "tuned", "ort")[::2]
        if args.separate:
            cells += [f"{ms['separate']:.3f}", f"{separate_secs:.0f}"] if "separate" in ms else ["-", "-"]
        _print_row(n, cells, error)


def compare_batches(batches: list[int], threads: int) -> None:
    """ResNet-18 (the zoo's) imported once with its batch open (1..16) through torch.export's Dim,
    against a static import at each batch and ONNX Runtime on an export with a dynamic batch axis;
    all untuned."""
    import torch

    from bench import zoo

    model = zoo.resnet18().eval()
    image = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    batch = torch.export.Dim("batch", min=1, max=16)
    family = frontend.from_torch(model, (image,), dynamic_shapes=({0: batch},))
    assert isinstance(family, graph.ShapeFamily)
    start = time.perf_counter()
    dynamic = graph.build(family)
    assert isinstance(dynamic, graph.CompiledModel)
    built = time.perf_counter() - start
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (image,),
            buffer,
            dynamo=False,
            opset_version=17,
            input_names=["image"],
            dynamic_axes={"image": {0: "batch"}},
        )
    print(f"\nresnet18: {family} (one model for the range built in {built:.1f} s)")
    columns = ["range ms", "static ms", "static/range", "ORT ms", "ORT/range"]
    print(f"{'batch':>7} " + " ".join(f"{c:>13}" for c in columns) + f" {'max err':>9}")
    rng = np.random.default_rng(0)
    for n in batches:
        inputs = [rng.standard_normal((n, 3, 224, 224)).astype("float32")]
        ours = dynamic(*inputs)
        static = graph.build(
            frontend.require_static(frontend.from_torch(model, (torch.from_numpy(inputs[0]),)), "bench")
        )
        ort = onnx_runtime(buffer.getvalue(), inputs, threads)
        error = max(float(np.max(np.abs(o - w))) for o, w in zip(ours, ort()))
        runs = {
            "range": lambda x=inputs: dynamic(*x),
            "static": lambda x=inputs, m=static: m(*x),
            "ort": ort,
        }
        ms = {k: statistics.median(v) for k, v in alternated_ms(runs, rounds=5, calls=3).items()}
        cells = [*_with_ratio(ms, "range", "static"), *_with_ratio(ms, "range", "ort")[1:]]
        _print_row(n, cells, error)


def _with_ratio(ms: dict[str, float], ours: str, peer: str) -> list[str]:
    """Our milliseconds, the peer's, and the peer's over ours (above 1: ours is faster)."""
    return [f"{ms[ours]:.3f}", f"{ms[peer]:.3f}", f"{ms[peer] / ms[ours]:.2f}x"]


def _print_row(size: int, cells: list[str], error: float) -> None:
    print(f"{size:>7} " + " ".join(f"{c:>13}" for c in cells) + f" {error:>9.1e}", flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=[*LARGEST, "resnet18"], choices=[*LARGEST, "resnet18"])
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 3, 8, 16], help="resnet18's batches")
    parser.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    parser.add_argument("--trials", type=int, default=0, help="tune the family once at four lengths")
    parser.add_argument(
        "--separate",
        action="store_true",
        help="also tune each other length alone, at a quarter of the trials",
    )
    parser.add_argument("--dir", help="the databases (made if missing; by default a new temporary one)")
    args = parser.parse_args(argv)
    args.dir = args.dir or tempfile.mkdtemp(prefix="dynamic-lengths-")
    os.makedirs(args.dir, exist_ok=True)
    hardware = host_hardware()
    threads = hardware.target.cores
    print(f"{hardware.cpu_model}, {threads} threads; databases in {args.dir}")
    for name in args.models:
        if name == "resnet18":
            compare_batches(args.batches, threads)
        else:
            compare(name, args, threads)


if __name__ == "__main__":
    main(sys.argv[1:])
