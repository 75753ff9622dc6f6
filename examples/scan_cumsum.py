"""TVM's scan tutorial, first example: cumulative sum over the rows of X with te.scan."""

import numpy as np

from compiler import build, te

m, n = 10, 16
X = te.placeholder((m, n), name="X")
s_state = te.placeholder((m, n))
s_init = te.compute((1, n), lambda _, i: X[0, i])
s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
s_scan = te.scan(s_init, s_update, s_state, inputs=[X])
func = te.create_prim_func([X, s_scan], name="cumsum")
print(func.script())

x = np.random.default_rng(0).random((m, n), dtype=np.float32)
out = np.empty((m, n), dtype=np.float32)
build(func)(x, out)
np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5)
print("cumsum matches numpy")
