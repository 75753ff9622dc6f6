"""The MLC course's TensorIR exercise on mm_relu: split j by 4, reorder, move relu under j0 and
decompose the reduction; the transformed program still computes what numpy computes."""

import numpy as np

from compiler import Schedule, build, te


def mm_relu(n: int = 128):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    Y = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, n), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return te.create_prim_func([A, B, C], name="mm_relu")


func = mm_relu()
sch = Schedule(func)
block_Y = sch.get_block("Y")
i, j, k = sch.get_loops(block_Y)
j0, j1 = sch.split(j, factors=[None, 4])
sch.reorder(j0, k, j1)
block_C = sch.get_block("C")
sch.reverse_compute_at(block_C, j0)
sch.decompose_reduction(block_Y, k)
print(sch.func.script())

rng = np.random.default_rng(0)
a = rng.random((128, 128), dtype=np.float32)
b = rng.random((128, 128), dtype=np.float32)
c = np.empty((128, 128), dtype=np.float32)
build(sch.func)(a, b, c)
np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5)
print("mm_relu after split/reorder/reverse_compute_at/decompose_reduction matches numpy")
