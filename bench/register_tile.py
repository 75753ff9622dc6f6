"""Register tiles on AVX-512 and on AVX2, measured on this machine: the AVX2 code is compiled for
`znver3` with every AVX-512 feature off (16 ymm registers instead of 32 zmm), which an AVX-512 host
runs as it would run on an AVX2-only one, short of clock and cache differences.

- the hand-written matmul schedule (bench/matmul.py) with register tiles of several shapes, each the
  best of 5 interleaved rounds (this machine's two vCPUs at times run at half speed for seconds);
- the tuner on matmul 512^3, 64 trials, with the space's register-tile bound and without it (its
  accumulator budget lifted), paired by seed. The cost model's features still describe this host's
  vector width in the AVX2 runs, in both arms alike.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace

import numpy as np

from bench.common import best_seconds
from bench.matmul import hand_schedule
from bench.tuning import SPEC, numpy_gflops
from compiler import Target, build
from compiler.schedule_rules import RuleConfig
from compiler.target import Hardware, cpu_model
from compiler.workloads import workload_from_spec
from runner import LocalRunner, LocalRunnerConfig
from runner.evaluate import evaluate
from tuner.search.space import rule_space
from tuner.tune import tune

HAND_N = 480  # divisible by every tile below
TILES = ((8, 32), (4, 32), (3, 32), (4, 24), (6, 24), (8, 16), (6, 16), (5, 16), (4, 16))
SEEDS = 5
UNBOUNDED = 10**6  # vector registers: the register-tile bound never binds


def avx2_target(host: Target) -> Target:
    features = ",".join(f"-{f[1:]}" if f[1:].startswith("avx512") else f for f in host.features.split(","))
    return Target(host.triple, "znver3", features, host.cores)


def hand_tiles(targets: dict[str, Target]) -> None:
    wl = workload_from_spec({"op": "matmul", "params": {"M": HAND_N, "N": HAND_N, "K": HAND_N}})
    a, b = wl.random_inputs(np.random.default_rng(0))
    c = np.empty((HAND_N, HAND_N), np.float32)
    kernels = {}
    for name, target in targets.items():
        for ti, tj in TILES:
            kernel = build(hand_schedule(wl.func, ti, tj), target=target, listings=False)
            kernel(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-2)
            kernels[name, ti, tj] = kernel
    best = dict.fromkeys(kernels, 0.0)
    numpy_best = 0.0
    for _ in range(5):
        numpy_best = max(numpy_best, wl.flops / best_seconds(lambda: np.matmul(a, b, out=c)) / 1e9)
        for key, kernel in kernels.items():
            seconds = min(evaluate(kernel, [a, b, c], repeat=3, min_repeat_ms=30))
            best[key] = max(best[key], wl.flops / seconds / 1e9)
    print(f"hand-written matmul {HAND_N}^3, GFLOPS by register tile (rows x columns); numpy {numpy_best:.0f}")
    for name in targets:
        row = ", ".join(f"{ti}x{tj} {best[name, ti, tj]:.0f}" for ti, tj in TILES)
        print(f"  {name}: {row}")


def tuned(targets: dict[str, Target]) -> None:
    numpy_rate = 0.0  # the best of one measurement per seed, like the tuned kernels' best
    for name, target in targets.items():
        bounded = RuleConfig.for_target(target)
        arms = {"bounded": bounded, "unbounded": replace(bounded, vector_registers=UNBOUNDED)}
        results: dict[str, list[float]] = {arm: [] for arm in arms}
        with LocalRunner(LocalRunnerConfig(), target) as runner:
            for seed in range(SEEDS):
                numpy_rate = max(numpy_rate, numpy_gflops(SPEC))
                for arm, config in arms.items():
                    with tempfile.TemporaryDirectory() as tmp:
                        r = tune(
                            SPEC,
                            trials=64,
                            database=f"sqlite:///{tmp}/tune.db",
                            seed=seed,
                            space=rule_space(config),
                            runner=runner,
                            hardware=Hardware(target, cpu_model()),
                        )
                    results[arm].append(r.best_gflops)
        line = "; ".join(
            f"{arm} {', '.join(f'{g:.0f}' for g in gflops)} (median {np.median(gflops) / numpy_rate:.2f}x)"
            for arm, gflops in results.items()
        )
        print(f"tuned matmul 512^3, 64 trials, {name}, GFLOPS by seed: {line}; numpy {numpy_rate:.0f}")


def main() -> None:
    host = Target.host()
    targets = {"host": host} if host.vector_bits < 512 else {"avx512": host, "avx2": avx2_target(host)}
    hand_tiles(targets)
    tuned(targets)
