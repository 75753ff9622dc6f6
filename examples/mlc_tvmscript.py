"""The MLC course's TensorIR chapter in TVMScript, as written up to the module prefix (`tvm.` becomes
`compiler.`): the mm_relu IRModule, the schedule that splits, reorders, moves relu under the tile
and decomposes the reduction; each program built and checked against numpy, and the transformed
module's printed text read back as the same program."""

import numpy as np

from compiler import Schedule, build
from compiler.script import from_source
from compiler.script import ir as I
from compiler.script import tir as T


@I.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


rng = np.random.default_rng(0)
a_np = rng.random((128, 128), dtype=np.float32)
b_np = rng.random((128, 128), dtype=np.float32)
c_mm_relu = np.maximum(a_np @ b_np, 0)


def check(func) -> None:
    c_np = np.empty((128, 128), dtype=np.float32)
    build(func)(a_np, b_np, c_np)
    np.testing.assert_allclose(c_np, c_mm_relu, rtol=1e-5)


check(MyModule["mm_relu"])

sch = Schedule(MyModule)
block_Y = sch.get_block("Y", func_name="mm_relu")
i, j, k = sch.get_loops(block_Y)
j0, j1 = sch.split(j, factors=[None, 4])
sch.reorder(j0, k, j1)
block_C = sch.get_block("C", "mm_relu")
sch.reverse_compute_at(block_C, j0)
sch.decompose_reduction(block_Y, k)
sch.mod.show()

check(sch.mod["mm_relu"])
assert from_source(sch.mod.script()) == sch.mod
print("mm_relu in TVMScript, before and after the course's transformations, matches numpy")
