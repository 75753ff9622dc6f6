"""The MLC course's first auto-tuning loop as written, up to the module prefix: a stochastic schedule
of matmul (no seed: each Schedule samples afresh), each candidate built and timed with
`time_evaluator`, the fastest kept; the candidates differ, and the best trace replays to the same
program."""

import numpy as np

import compiler
from compiler import Trace
from compiler.script import ir as I
from compiler.script import tir as T


@I.ir_module
class MyModule:
    @T.prim_func
    def main(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def stochastic_schedule_mm(sch: compiler.tir.Schedule):
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


dtype = "float32"
a_np = np.random.rand(128, 128).astype(dtype)
b_np = np.random.rand(128, 128).astype(dtype)
c_mm = a_np @ b_np
a_nd = compiler.nd.array(a_np)
b_nd = compiler.nd.array(b_np)
c_nd = compiler.nd.empty((128, 128), dtype="float32")


def random_search(mod: compiler.IRModule, num_trials=5):
    best_result = None
    best_sch = None
    tried = set()
    for i in range(num_trials):
        sch = stochastic_schedule_mm(compiler.tir.Schedule(mod))
        lib = compiler.build(sch.mod, target="llvm")
        lib["main"](a_nd, b_nd, c_nd)
        np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)
        f_timer_after = lib.time_evaluator("main", compiler.cpu())
        result = f_timer_after(a_nd, b_nd, c_nd).mean
        print(f"=====Attempt {i}, time-cost: {result * 1e3:.3f} ms====")
        print(sch.trace)
        tried.add(sch.mod["main"].structural_hash())

        # book keep the best result so far
        if best_result is None or result < best_result:
            best_result = result
            best_sch = sch
    assert len(tried) > 1, "every attempt measured the same program"
    return best_sch


sch = random_search(MyModule, num_trials=8)
replayed = Trace.from_json(sch.trace.to_json()).apply(MyModule["main"])
assert replayed.func == sch.func
print("best schedule:")
sch.mod.show()
