"""The MLC course's automatic optimization chapter: its TVMScript matmul and its stochastic schedule as
the search space, tuned and built in this tuner's API (`tuner.tune_tir(mod, trials=, space=,
database=)` where the course calls `ms.tune_tir(mod=, target=, max_trials_global=, space=
ms.space_generator.ScheduleFn(...), work_dir=)`, and `compile_best` for `compile_tir`). No
`if __name__ == "__main__":` guard, as in the course: the runner's processes do not re-run this
script."""

import pathlib
import tempfile

import numpy as np

from compiler import Schedule
from compiler.script import ir as I
from compiler.script import tir as T
from tuner import compile_best, tune_tir


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


def stochastic_schedule_mm(sch: Schedule) -> Schedule:
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


work_dir = pathlib.Path(tempfile.mkdtemp(prefix="tune_tmp"))
database = f"sqlite:///{work_dir / 'database.db'}"
result = tune_tir(MyModule, trials=16, space=stochastic_schedule_mm, database=database)
print(f"{result.trials} trials, best {result.best.median_secs * 1e3:.3f} ms")

kernel = compile_best(MyModule, database=database)
rng = np.random.default_rng(0)
a_np = rng.random((128, 128), dtype=np.float32)
b_np = rng.random((128, 128), dtype=np.float32)
c_np = np.empty((128, 128), dtype=np.float32)
kernel(a_np, b_np, c_np)
np.testing.assert_allclose(c_np, a_np @ b_np, rtol=1e-5)
print("the tuned matmul matches numpy")
