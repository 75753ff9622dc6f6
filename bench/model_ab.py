"""A zoo model as two versions of the code build it, side by side in one process.

The host's speed moves by up to a fifth between runs of a whole model (OpenVINO's ViT-base: 87 and
107 ms an hour apart), so two runs of `bench.model_peers` cannot tell a 2% change of ours. An
exported model is one self-contained shared library, and two load side by side in one process
(`compiler.graph.export`), so each version exports its untuned build:

    python -m bench.model_ab export hf_vit_base OLD.so     # in a checkout of the older commit
    python -m bench.model_ab export hf_vit_base NEW.so
    python -m bench.model_ab compare hf_vit_base OLD.so NEW.so [--rounds 10]

`compare` runs every library on the model's seeded inputs, checks each output against the first
library's, then times them alternated round by round (6 calls a round, pauses between): printed are
each one's median and fastest call, and the first's median over each one's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.pop("OPENBLAS_CORETYPE", None)  # bench/__main__.py: numpy is not timed, kept for parity

import numpy as np

from bench.common import alternated_ms
from bench.model_latency import ZooModel, zoo_models
from compiler import frontend, graph
from compiler.graph.export import load_library

ROUNDS = 10
CALLS = 6
RTOL, ATOL = 1e-4, 1e-4


def export(model: ZooModel, path: Path) -> None:
    """The model imported from PyTorch, optimized and built with the default schedules, exported."""
    built = graph.build(graph.optimize(frontend.from_torch(model.make(), model.inputs())))
    built.export(path)
    print(f"{model.name}: {path} ({len(built.steps)} kernel calls a pass)")


def compare(model: ZooModel, paths: list[Path], rounds: int) -> None:
    inputs = [np.asarray(a) for a in model.inputs()]
    libraries = {str(p): load_library(p) for p in paths}
    outputs = {name: _as_list(lib(*inputs)) for name, lib in libraries.items()}
    first = next(iter(outputs))
    for name, out in outputs.items():
        for got, want in zip(out, outputs[first], strict=True):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name} against {first}")
    times = alternated_ms({n: (lambda lib=lib: lib(*inputs)) for n, lib in libraries.items()}, rounds, CALLS)
    base = statistics.median(times[first])
    print(f"{model.name}, {rounds} rounds of {CALLS} calls, outputs checked against {first}:")
    for name, ms in times.items():
        median = statistics.median(ms)
        speed = f"{base / median:.3f}x the first's speed"
        print(f"    {name}: median {median:.3f} ms, fastest {min(ms):.3f} ms, {speed}")


def _as_list(out: object) -> list[np.ndarray]:
    return list(out) if isinstance(out, (list, tuple)) else [np.asarray(out)]


def main(argv: list[str] | None = None) -> None:
    models = {m.name: m for m in zoo_models()}
    parser = argparse.ArgumentParser(prog="python -m bench.model_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["export", "compare"])
    parser.add_argument("model", choices=sorted(models))
    parser.add_argument(
        "libraries", type=Path, nargs="+", help="export: one path to write; compare: two or more"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.action == "export":
        if len(args.libraries) != 1:
            parser.error("export writes one library")
        export(models[args.model], args.libraries[0])
    else:
        if len(args.libraries) < 2:
            parser.error("compare takes two libraries or more")
        compare(models[args.model], args.libraries, args.rounds)


if __name__ == "__main__":
    main()
