"""The search's own cost, without measuring anything: milliseconds to sample one program from the rule
space (and, within that, to list the compute locations of the padding), to lower it and to extract
its features, for conv2d and matmul; then the search time of a 64-trial conv2d tuning run with a null
runner (deterministic fake timings), which is everything `tuner tune` counts as search overhead; and
the same for bench tuning's warm start (matmul 384^3, 32 trials, the model first trained on 64
records of matmul 512^3) next to a cold start."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from compiler import Schedule, Target
from compiler.lower import lower
from compiler.schedule_rules import RuleConfig
from compiler.workloads import workload_from_spec
from runner import NullRunner
from tuner.search.features import extract_features
from tuner.search.space import rule_space
from tuner.tune import tune

SPECS = {
    "conv2d 1x64x56x56 k64 3x3": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1},
    },
    "matmul 512^3": {"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}},
}


def sample_costs(spec: dict, seeds: int, repeats: int = 3) -> dict[str, float]:
    """Median over seeds of the fastest of `repeats` runs, in ms, of each phase for one program."""
    func = workload_from_spec(spec).func
    target = Target.host()
    space = rule_space(RuleConfig.for_target(target))
    locations: list[float] = []
    listing = Schedule.compute_location_candidates

    def timed(self: Schedule, block):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return listing(self, block)
        finally:
            locations.append(time.perf_counter() - start)

    phases: dict[str, list[float]] = {"sample": [], "locations": [], "lower": [], "features": []}
    Schedule.compute_location_candidates = timed  # type: ignore[method-assign]
    try:
        for seed in range(seeds):
            best = dict.fromkeys(phases, float("inf"))
            for _ in range(repeats):
                locations.clear()
                t0 = time.perf_counter()
                sch = Schedule(func, seed=seed)
                space(sch)
                t1 = time.perf_counter()
                lowered = lower(sch.func)
                t2 = time.perf_counter()
                extract_features(lowered, target)
                t3 = time.perf_counter()
                run = {"sample": t1 - t0, "locations": sum(locations), "lower": t2 - t1, "features": t3 - t2}
                best = {k: min(best[k], run[k]) for k in phases}
            for k in phases:
                phases[k].append(best[k] * 1e3)
    finally:
        Schedule.compute_location_candidates = listing  # type: ignore[method-assign]
    return {k: statistics.median(v) for k, v in phases.items()}


def main(seeds: int = 20, trials: int = 64) -> None:
    for name, spec in SPECS.items():
        c = sample_costs(spec, seeds)
        total = c["sample"] + c["lower"] + c["features"]
        print(
            f"{name}, one program, median of {seeds} seeds (fastest of 3 runs each): sample "
            f"{c['sample']:.1f} ms (of which compute locations {c['locations']:.1f}), lower "
            f"{c['lower']:.1f}, features {c['features']:.1f}; total {total:.1f} ms"
        )
    spec = SPECS["conv2d 1x64x56x56 k64 3x3"]
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'search.db'}"
        result = tune(spec, trials=trials, database=url, runner=NullRunner())
    print(
        f"conv2d {trials}-trial tuning with a null runner: search {result.search_secs:.1f} s "
        f"of {result.wall_secs:.1f} s wall"
    )
    new = {"op": "matmul", "params": {"M": 384, "N": 384, "K": 384}}
    with tempfile.TemporaryDirectory() as tmp:
        warm, cold = f"sqlite:///{Path(tmp) / 'warm.db'}", f"sqlite:///{Path(tmp) / 'cold.db'}"
        tune(SPECS["matmul 512^3"], trials=64, database=warm, runner=NullRunner(), strategy="random")
        warm_result = tune(new, trials=32, database=warm, runner=NullRunner())
        cold_result = tune(new, trials=32, database=cold, runner=NullRunner())
    print(
        f"matmul 384^3 32-trial tuning with a null runner: search {warm_result.search_secs:.1f} s "
        f"warm-started from 64 matmul 512^3 records, {cold_result.search_secs:.1f} s cold"
    )
