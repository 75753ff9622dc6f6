"""TVM's scan tutorial, multi-stage example: the update is built from two computes (`s1` doubles
the previous row of the state, `s2` adds the input row), and `s1` is moved under `s2`'s tile with
compute_at, as the tutorial's schedule does; both programs match numpy."""

import numpy as np

from compiler import Schedule, build, te

m, n = 10, 64
X = te.placeholder((m, n), name="X")
s_state = te.placeholder((m, n))
s_init = te.compute((1, n), lambda _, i: X[0, i])
s_update_s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
s_update_s2 = te.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
s_scan = te.scan(s_init, s_update_s2, s_state, inputs=[X])
func = te.create_prim_func([X, s_scan], name="scan")

sch = Schedule(func)
_, xi = sch.get_loops(sch.get_block("scan"))
xo, _ = sch.split(xi, factors=[None, 32])
sch.compute_at(sch.get_block("s1"), xo)
print(sch.func.script())

x = np.random.default_rng(0).random((m, n), dtype=np.float32)
want = np.empty_like(x)
want[0] = x[0]
for t in range(1, m):
    want[t] = want[t - 1] * 2 + x[t]
for program in (func, sch.func):
    out = np.empty((m, n), dtype=np.float32)
    build(program)(x, out)
    np.testing.assert_allclose(out, want, rtol=1e-5)
print("the multi-stage scan matches numpy, before and after compute_at")
