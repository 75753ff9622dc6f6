"""TVM's scan tutorial, multiple states: two recurrences advancing together, the second reading
the first state's previous row."""

import numpy as np

from compiler import build, te

m, n, l = 10, 16, 8  # noqa: E741 (the tutorial's names)
X = te.placeholder((m, n), name="X")
s_state1 = te.placeholder((m, n))
s_state2 = te.placeholder((m, l))
s_init1 = te.compute((1, n), lambda _, i: X[0, i])
s_init2 = te.compute((1, l), lambda _, i: 0.0)
s_update1 = te.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
s_update2 = te.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
s_scan1, s_scan2 = te.scan([s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2])
func = te.create_prim_func([X, s_scan1, s_scan2], name="two_state_scan")
print(func.script())

x = np.random.default_rng(0).random((m, n), dtype=np.float32)
out1 = np.empty((m, n), dtype=np.float32)
out2 = np.empty((m, l), dtype=np.float32)
build(func)(x, out1, out2)
expect1 = np.cumsum(x, axis=0)
expect2 = np.zeros((m, l), dtype=np.float32)
for t in range(1, m):
    expect2[t] = expect2[t - 1] + expect1[t - 1, 0]
np.testing.assert_allclose(out1, expect1, rtol=1e-5)
np.testing.assert_allclose(out2, expect2, rtol=1e-5)
print("two-state scan matches numpy")
