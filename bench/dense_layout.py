"""Plain against column-blocked dense layers (what the `block_matmul_columns` pass chooses between),
with the default schedule: per layer shape (BERT-base at sequence 128, batch-1 classifier and MLP
layers), each kernel timed warm (called in a loop, its weights in cache) and cold (the caches
evicted before each call, as a layer finds its weights inside a forward pass); then whole models
built with and without the pass, their latency alternated in one process.

    python -m bench dense_layout            # THREADS=1 for one core (pin it with taskset)
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from bench.common import threads_from_env, zoo_model_ms
from compiler import Kernel, Target, build, te, topi
from compiler.graph import passes
from compiler.graph.passes.block_matmul_columns import NBLOCK
from runner.evaluate import evaluate, evict_caches

PAUSE_S = 0.3
COLD_CALLS = 15
# (M, K, N): BERT-base's projections and feed-forward layers at sequence 128, batch-1 dense layers
# (BERT's feed-forward, a 4096-wide MLP, MobileNetV2's 1280-wide head cut to whole blocks), a few
# rows, the MLC course's MLP.
LAYERS = [
    (128, 768, 768),
    (128, 768, 3072),
    (128, 3072, 768),
    (1, 768, 3072),
    (1, 4096, 4096),
    (1, 1280, 992),
    (8, 1024, 1024),
    (1, 784, 128),
]


def _kernel(M: int, K: int, N: int, blocked: bool, target: Target) -> Kernel:
    from compiler.schedule_rules import default_schedule

    x = te.placeholder((M, K), "float32", "x")
    if blocked:
        w = te.placeholder((N // NBLOCK, K, NBLOCK), "float32", "w")
        out = topi.matmul_nblock(x, w, "y")
    else:
        w = te.placeholder((K, N), "float32", "w")
        out = topi.matmul(x, w, "y")
    func = te.create_prim_func([x, w, out])
    return build(default_schedule(func, target).func, target, listings=False)


def _cold_secs(kernel: Kernel, args: list[np.ndarray]) -> float:
    pointers = kernel.pointers(*args)
    times = []
    for _ in range(COLD_CALLS):
        evict_caches()
        start = time.perf_counter()
        kernel.repeat(pointers, 1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def layer_gflops(layer: tuple[int, int, int], target: Target, rng: np.random.Generator) -> dict[str, float]:
    """GFLOPS of each layout's default schedule, checked against numpy, warm and cold."""
    M, K, N = layer
    x = rng.standard_normal((M, K)).astype("float32")
    w = rng.standard_normal((K, N)).astype("float32")
    want = x @ w
    flops = 2 * M * N * K / 1e9
    out: dict[str, float] = {}
    for layout, weights, shape in (
        ("plain", w, (M, N)),
        ("blocked", topi.pack_nblock(w, NBLOCK), (M, N // NBLOCK, NBLOCK)),
    ):
        kernel = _kernel(M, K, N, layout == "blocked", target)
        args = [x, weights, np.full(shape, np.nan, "float32")]
        kernel(*args)
        np.testing.assert_allclose(args[2].reshape(M, N), want, rtol=2e-3, atol=2e-3)
        out[f"{layout} warm"] = flops / statistics.median(evaluate(kernel, args, repeat=7, min_repeat_ms=20))
        time.sleep(PAUSE_S)
        out[f"{layout} cold"] = flops / _cold_secs(kernel, args)
        time.sleep(PAUSE_S)
    return out


def main() -> None:
    threads = threads_from_env()
    target, rng = Target.host(), np.random.default_rng(0)
    print(f"default schedules, {threads} thread(s), {target.mcpu}; GFLOPS, median of calls")
    print("| M, K, N | plain warm | plain cold | blocked warm | blocked cold | blocked / plain, cold |")
    for layer in LAYERS:
        g = layer_gflops(layer, target, rng)
        columns = ("plain warm", "plain cold", "blocked warm", "blocked cold")
        cells = " | ".join(f"{g[k]:.0f}" for k in columns)
        ratio = g["blocked cold"] / g["plain cold"]
        print(f"| {', '.join(map(str, layer))} | {cells} | {ratio:.2f} |", flush=True)
    for name in ("bert_layer", "mlp"):
        times = zoo_model_ms(name, passes.block_matmul_columns)
        shown = {k: f"median {statistics.median(v):.3f} ms, min {min(v):.3f}" for k, v in times.items()}
        ratio = statistics.median(times["without"]) / statistics.median(times["with"])
        print(f"{name}: column-blocked {shown['with']}; plain {shown['without']} ({ratio:.2f}x)", flush=True)


__all__ = ["main"]
