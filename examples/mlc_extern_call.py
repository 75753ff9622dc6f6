"""The MLC course's "integrate existing libraries" chapter in this compiler's API: `env.linear` and
`env.relu` registered as Python functions that write their outputs in place (the course's use torch;
these numpy), the two-layer MLP built from `call_dps_packed` calls of them, then the course's mixture
where the first linear layer is compiled by us (graph operators over the weights bound as constants,
Relax's BindParams). Random weights stand in for the course's trained ones; both match numpy."""

import numpy as np

from compiler import graph
from compiler.graph import GraphBuilder


@graph.register_func("env.linear")
def numpy_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.matmul(x, w.T, out=out)
    out += b


@graph.register_func("env.relu")
def numpy_relu(x: np.ndarray, out: np.ndarray) -> None:
    np.maximum(x, 0, out=out)


rng = np.random.default_rng(0)
params = {
    "w0": rng.standard_normal((128, 784)).astype("float32") / 28,
    "b0": rng.standard_normal(128).astype("float32"),
    "w1": rng.standard_normal((10, 128)).astype("float32") / 11,
    "b1": rng.standard_normal(10).astype("float32"),
}
data = rng.random((1, 784)).astype("float32")
expected = np.maximum(data @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]


def my_module(mixture: bool) -> graph.Module:
    b = GraphBuilder()
    x = b.input("x", (1, 784), "float32")
    w0, b0, w1, b1 = (b.input(name, p.shape, "float32") for name, p in params.items())
    if mixture:  # linear0 compiled here (the course's is TensorIR)
        lv0 = b.call("add", [b.call("matmul", [x, b.call("transpose", [w0], axes=(1, 0))]), b0])
    else:
        lv0 = b.call_dps_packed("env.linear", (x, w0, b0), ((1, 128), "float32"))
    lv1 = b.call_dps_packed("env.relu", (lv0,), ((1, 128), "float32"))
    out = b.call_dps_packed("env.linear", (lv1, w1, b1), ((1, 10), "float32"))
    return b.module([out])


(result,) = graph.build(my_module(mixture=False))(data, *params.values())
np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4)
mixture = graph.bind_params(my_module(mixture=True), params)
print(graph.optimize(mixture).script().split("\n\n")[0])  # main, before the fused PrimFuncs
(mixed,) = graph.build(mixture)(data)
np.testing.assert_allclose(mixed, expected, rtol=1e-4, atol=1e-4)
print("MyModuleWithExternCall and the mixture match numpy; class", result.argmax())
