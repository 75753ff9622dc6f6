"""Rows of an odd number of lanes (a 14x14 or 7x7 conv's rows, a 7-wide depthwise row), loaded as one
masked load or as LLVM's split of a plain load (8 + 4 + 2 lanes and two inserts for 14): the default
schedule of every suite shape (bench/peer_suite.py), compiled both ways and timed alternated in this
process, 2 threads, on this host's target or an emulated narrower one.

    python -m bench.odd_rows [--target znver3] [SHAPE ...]

The split build is made by switching the code generator's choice off (`_masked_width`), which is
what the code generator did before it masked; both builds compute the same numbers (checked).
"""

from __future__ import annotations

import argparse
import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # bench/__main__.py: numpy is not timed, kept for parity

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compiler.codegen_vector as codegen_vector
from bench.common import best_seconds
from bench.peer_suite import SUITE
from compiler import PrimFunc, Target, build
from compiler.build import Kernel
from compiler.schedule_rules import default_schedule
from compiler.workloads import workload_from_spec

ROUNDS = 5


def build_split(func: PrimFunc, target: Target) -> Kernel:
    """`func` compiled with every contiguous load plain, as before masked odd rows."""
    masked_width = codegen_vector._masked_width
    codegen_vector._masked_width = lambda cg, lanes: 0
    try:
        return build(func, target=target, listings=False)
    finally:
        codegen_vector._masked_width = masked_width


def best_of_rounds(calls: dict[str, Callable[[], object]]) -> dict[str, float]:
    """The best seconds of each call over `ROUNDS` rounds, the calls alternated within each round."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(ROUNDS):
        for name, call in calls.items():
            best[name] = min(best[name], best_seconds(call, repeat=3))
    return best


def compare(spec: dict[str, Any], target: Target) -> tuple[float, float]:
    """GFLOPS of `spec`'s default schedule, split and masked, after checking both compute the same."""
    wl = workload_from_spec(spec)
    func = default_schedule(wl.func, target).func
    kernels = {"split": build_split(func, target), "masked": build(func, target=target, listings=False)}
    inputs = wl.random_inputs(np.random.default_rng(0))
    outputs = {name: np.empty(wl.outputs[0].shape, np.float32) for name in kernels}
    for name, kernel in kernels.items():
        kernel(*inputs, outputs[name])
    np.testing.assert_allclose(outputs["masked"], outputs["split"], rtol=1e-4, atol=1e-4)
    best = best_of_rounds({name: partial(kernel, *inputs, outputs[name]) for name, kernel in kernels.items()})
    return wl.flops / best["split"] / 1e9, wl.flops / best["masked"] / 1e9


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="an emulated CPU[,FEATURES], e.g. znver3 (default: this host)")
    parser.add_argument("shapes", nargs="*", help="suite shapes (default: all)")
    args = parser.parse_args(argv)
    target = Target.host().emulated(args.target) if args.target else Target.host()
    print(f"{target.mcpu}, {target.vector_bits}-bit vectors: default schedules, GFLOPS split / masked")
    for shape in SUITE:
        if not args.shapes or shape.name in args.shapes:
            split, masked = compare(shape.spec, target)
            print(f"  {shape.name:32s} {split:6.1f} {masked:6.1f}  {masked / split:4.2f}x", flush=True)


if __name__ == "__main__":
    main()
