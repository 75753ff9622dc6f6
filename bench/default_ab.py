"""The default schedules of two versions of the code, side by side on the peer suite's shapes.

The host's speed moves by up to a third over minutes, so two runs of one benchmark cannot compare
two commits; this puts both in one process. The older version writes its default traces:

    python -m bench.default_ab dump OLD.json [--target znver3]

(in a checkout of that commit, with this file copied in), and this checkout replays them:

    python -m bench.default_ab compare OLD.json [--target znver3] [--shapes square.512 bert.context]

For every shape whose default trace changed, both kernels are built and checked against each other,
then timed in paired rounds (alternating which goes first, the same arrays for both): printed are
each side's fastest call, and the median and quartiles of the per-round ratio old / new, which a
drift of the host's speed within a round does not move. Shapes whose trace did not change are
listed as such.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.pop("OPENBLAS_CORETYPE", None)  # before numpy loads OpenBLAS (bench/__main__.py)

import numpy as np

from bench.peer_suite import SHAPES, SUITE
from compiler import Trace, build
from compiler.schedule_rules import default_schedule
from compiler.target import Target, host_hardware
from compiler.workloads import Workload, workload_from_spec
from runner.evaluate import evaluate

ROUNDS = 15
REPEAT_MS = 20.0


def default_traces(target: Target, names: list[str]) -> dict[str, dict]:
    """Each named shape's default schedule, as trace JSON."""
    return {
        name: default_schedule(workload_from_spec(SHAPES[name].spec).func, target).trace.to_json()
        for name in names
    }


def paired_seconds(kernels: list, args: list[np.ndarray], rounds: int) -> tuple[list[float], list[float]]:
    """Each kernel's fastest call, and the per-round ratios of the first's time to the second's."""
    best = [float("inf")] * len(kernels)
    ratios = []
    for r in range(rounds):
        seconds = [0.0] * len(kernels)
        for i in range(len(kernels)) if r % 2 == 0 else reversed(range(len(kernels))):
            seconds[i] = min(evaluate(kernels[i], args, repeat=2, min_repeat_ms=REPEAT_MS))
            best[i] = min(best[i], seconds[i])
        ratios.append(seconds[0] / seconds[1])
    return best, sorted(ratios)


def tile_decisions(trace: Trace) -> list:
    """The tile decisions and whether an input is packed: what a default schedule's rules chose."""
    tiles = [
        i.decision for i in trace.instructions if i.kind in ("sample_perfect_tile", "sample_covering_tile")
    ]
    return [*tiles, "panel" if any(i.kind == "cache_read" for i in trace.instructions) else "in place"]


def compare_one(wl: Workload, old: Trace, new: Trace, target: Target, rounds: int) -> str:
    """One markdown row: both kernels checked against each other, then timed in paired rounds."""
    kernels = [build(t.apply(wl.func).func, target=target, listings=False) for t in (old, new)]
    inputs = list(wl.random_inputs(np.random.default_rng(0)))
    outs = []
    for kernel in kernels:
        out = np.zeros(wl.func.params[-1].shape, np.float32)
        kernel(*inputs, out)
        outs.append(out)
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-4)
    best, ratios = paired_seconds(kernels, [*inputs, outs[0]], rounds)
    q = len(ratios) // 4
    gflops = [wl.flops / s / 1e9 for s in best]
    return (
        f"| {best[0] * 1e6:.1f} | {best[1] * 1e6:.1f} | {gflops[0]:.0f} -> {gflops[1]:.0f} | "
        f"**{ratios[len(ratios) // 2]:.2f}** ({ratios[q]:.2f}-{ratios[-1 - q]:.2f}) | "
        f"{tile_decisions(old)} -> {tile_decisions(new)} |"
    )


def compare(old_file: Path, target: Target, names: list[str], rounds: int) -> None:
    old = json.loads(old_file.read_text())
    new = default_traces(target, names)
    print("| shape | old us | new us | GFLOPS | old / new, paired median (quartiles) | tiles |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in names:
        if name not in old:
            print(f"| {name} | not in {old_file.name} |")
            continue
        before, after = Trace.from_json(old[name]), Trace.from_json(new[name])
        if before.to_json() == after.to_json():
            print(f"| {name} | same schedule |")
            continue
        row = compare_one(workload_from_spec(SHAPES[name].spec), before, after, target, rounds)
        print(f"| {name} {row}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.default_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["dump", "compare"])
    parser.add_argument("file", type=Path, help="the older version's default traces (JSON)")
    parser.add_argument("--target", help="a subset of this machine's features, as `tuner tune --target`")
    parser.add_argument("--shapes", nargs="+", default=[s.name for s in SUITE], help="suite names")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="paired timing rounds per shape")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    unknown = [name for name in args.shapes if name not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; the suite: {', '.join(SHAPES)}")
    target = host_hardware(args.target).target
    if args.action == "dump":
        args.file.write_text(json.dumps(default_traces(target, args.shapes)))
    else:
        compare(args.file, target, args.shapes, args.rounds)


if __name__ == "__main__":
    main()
