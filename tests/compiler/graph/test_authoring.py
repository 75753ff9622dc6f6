"""Writing a graph by hand as Relax users do: `emit_te` of a te function, `call_tir` of a PrimFunc (from
TVMScript, or scheduled by hand, which graph.build then compiles as it is and task extraction leaves
alone), beside ordinary operators; `bind_params` turns inputs into constants. Each against numpy."""

import numpy as np
import pytest

from compiler import Schedule, graph, te
from compiler.graph import GraphBuilder, GraphError, bind_params, extract_tasks
from compiler.script import from_source

# The course's linear0 is 784 -> 128; its default schedule vectorizes 64 outputs of the transposed
# W, a gather per lane that LLVM takes 12 s to compile unrolled, so the tests use 96 -> 32.
LINEAR0 = """
@T.prim_func
def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
            B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
    T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
    Y = T.alloc_buffer((1, 128), "float32")
    for i, j, k in T.grid(1, 128, 784):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
    for i, j in T.grid(1, 128):
        with T.block("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = Y[vi, vj] + B[vj]
""".replace("784", "96").replace("128", "32")


def relu(x: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda *i: te.max(x(*i), 0.0), name="relu")


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"w0": (32, 96), "b0": (32,), "w1": (32, 10), "b1": (10,)}
    return {k: (rng.standard_normal(s) / 10).astype("float32") for k, s in shapes.items()}


def mixture(linear0):
    """The MLC course's MyModuleMixture: linear0 as a PrimFunc, relu through emit_te, the second
    linear layer as graph operators."""
    b = GraphBuilder()
    x = b.input("x", (1, 96), "float32")
    w0, b0, w1, b1 = (
        b.input(n, s, "float32")
        for n, s in [("w0", (32, 96)), ("b0", (32,)), ("w1", (32, 10)), ("b1", (10,))]
    )
    lv0 = b.call_tir(linear0, [x, w0, b0])
    lv1 = b.emit_te(relu, lv0)
    out = b.call("add", [b.call("matmul", [lv1, w1]), b.call("reshape", [b1], shape=(1, 10))])
    return b.module([out])


def numpy_mixture(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    return np.maximum(x @ p["w0"].T + p["b0"], 0) @ p["w1"] + p["b1"]


def test_the_course_mixture_runs_and_bound_weights_become_constants():
    module = mixture(from_source(LINEAR0))
    p = weights()
    x = np.random.default_rng(1).standard_normal((1, 96)).astype("float32")
    (got,) = graph.build(module)(x, *p.values())
    np.testing.assert_allclose(got, numpy_mixture(x, p), rtol=1e-4, atol=1e-5)
    bound = bind_params(module, p)
    assert [i.name for i in bound.inputs] == ["x"]
    p["w0"][:] = 0  # the constants are copies
    (got,) = graph.build(bound)(x)
    np.testing.assert_allclose(got, numpy_mixture(x, weights()), rtol=1e-4, atol=1e-5)


def test_a_function_scheduled_by_hand_is_compiled_as_it_is_and_is_no_task():
    sch = Schedule(from_source(LINEAR0), seed=0)
    block = sch.get_block("Y")
    _, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    module = graph.optimize(mixture(sch.func))
    names = {t.name for t in extract_tasks(module)}
    assert not any(n.startswith("linear0") for n in names) and len(names) >= 1
    compiled = graph.build(module)
    origins = {s.func: s.origin for s in compiled.sources}
    assert origins[next(n for n in origins if n.startswith("linear0"))] == "given"
    p = weights(2)
    x = np.random.default_rng(3).standard_normal((1, 96)).astype("float32")
    (got,) = compiled(x, *p.values())
    np.testing.assert_allclose(got, numpy_mixture(x, p), rtol=1e-4, atol=1e-5)


def test_call_tir_checks_its_arguments_and_bind_params_its_values():
    b = GraphBuilder()
    x = b.input("x", (1, 96), "float32")
    w = b.input("w", (32, 90), "float32")
    with pytest.raises(GraphError, match="W is"):
        b.call_tir(from_source(LINEAR0), [x, w, w])
    with pytest.raises(GraphError, match="takes 4 buffers, given 1"):
        b.call_tir(from_source(LINEAR0), [x])
    module = mixture(from_source(LINEAR0))
    with pytest.raises(GraphError, match="no input is named w9"):
        bind_params(module, {"w9": np.zeros(3)})
    with pytest.raises(GraphError, match=r"the input is \(10,\) float32, given \(10,\) float64"):
        bind_params(module, {"b1": np.zeros(10)})
