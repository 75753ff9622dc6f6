"""The MLC course's first auto-tuning loop: a stochastic schedule of matmul, sampled a few times,
each candidate built and timed, the fastest kept; its trace replays to the same program."""

import time

import numpy as np

from compiler import Schedule, Trace, build, te


def matmul(n: int = 128):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C], name="main")


def stochastic_schedule_mm(sch: Schedule) -> Schedule:
    block_C = sch.get_block("C")
    i, j, k = sch.get_loops(block_C)
    j_factors = sch.sample_perfect_tile(j, n=2)
    j_0, j_1 = sch.split(j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def seconds_per_call(kernel, args, number: int = 20) -> float:
    kernel(*args)
    start = time.perf_counter()
    for _ in range(number):
        kernel(*args)
    return (time.perf_counter() - start) / number


def random_search(func, num_trials: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.random((128, 128), dtype=np.float32)
    b = rng.random((128, 128), dtype=np.float32)
    c = np.empty((128, 128), dtype=np.float32)
    best_result, best_sch = None, None
    for trial in range(num_trials):
        sch = stochastic_schedule_mm(Schedule(func, seed=seed + trial))
        kernel = build(sch.func)
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
        result = seconds_per_call(kernel, (a, b, c))
        print(f"=====Attempt {trial}, time-cost: {result * 1e3:.3f} ms====")
        print(sch.trace)
        if best_result is None or result < best_result:
            best_result, best_sch = result, sch
    return best_sch


func = matmul()
best = random_search(func)
replayed = Trace.from_json(best.trace.to_json()).apply(func)
assert replayed.func == best.func
print("best schedule:")
print(best.func.script())
