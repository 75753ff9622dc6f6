"""The seed example: define matmul+relu, schedule it by hand with one sampled tile, replay its trace,
build it with LLVM and check it against numpy. `make demo` runs this."""

import time

import numpy as np

from compiler import Schedule, Trace, build, te

A = te.placeholder((128, 128), "float32", name="A")
B = te.placeholder((128, 128), "float32", name="B")
k = te.reduce_axis((0, 128), name="k")
Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0.0), name="C")
func = te.create_prim_func([A, B, C], name="mm_relu")
print(func.script())

sch = Schedule(func, seed=0)
block_Y = sch.get_block("Y")
i, j, kk = sch.get_loops(block_Y)
j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=64))
sch.reorder(j0, kk, j1)
sch.reverse_compute_at(sch.get_block("C"), j0)
sch.decompose_reduction(block_Y, kk)
sch.vectorize(j1)
print(sch.func.script())
print("# trace")
print(sch.trace)

data = sch.trace.to_json()
assert Trace.from_json(data).apply(func).func == sch.func, "replaying the trace must rebuild the same program"

rng = np.random.default_rng(0)
a = rng.standard_normal((128, 128), dtype=np.float32)
b = rng.standard_normal((128, 128), dtype=np.float32)
for name, program in (("unscheduled", func), ("scheduled", sch.func)):
    kernel = build(program)
    c = np.empty((128, 128), dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    number = 200
    start = time.perf_counter()
    for _ in range(number):
        kernel(a, b, c)
    seconds = (time.perf_counter() - start) / number
    gflops = 2 * 128**3 / seconds / 1e9
    print(f"{name:>12}: {seconds * 1e6:8.1f} us per call, {gflops:6.1f} GFLOPS (matches numpy)")
