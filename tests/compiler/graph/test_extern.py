"""Extern calls (Relax's `call_dps_packed`): a C function compiled here and a Python function, called
from a graph between ordinary operators, through every stage a graph goes through (passes, memory
plan, the JIT's forward pass, the numpy reference, the printer, the JSON form, export), each against
numpy; and the errors: a failing function, an unregistered name, a Python function at export."""

import ctypes
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from compiler import graph
from compiler.graph import (
    CallDPSPacked,
    ExternCallError,
    ExternFuncError,
    GraphBuilder,
    GraphError,
    LibraryError,
    Module,
)
from compiler.graph.forward import EXTERN_FAILED, Storage
from compiler.graph.serialize import module_from_json, module_to_json

# A linear layer y = x @ w.T + b of any sizes, read off the shapes; a status for anything else.
LINEAR_C = r"""
#include <stdint.h>

int32_t linear(void *const *args, const int64_t *const *shapes, const int32_t *ndims, int32_t nargs) {
  if (nargs != 4 || ndims[0] != 2 || ndims[1] != 2 || ndims[2] != 1 || ndims[3] != 2) return 1;
  const float *x = args[0], *w = args[1], *b = args[2];
  float *y = args[3];
  int64_t n = shapes[0][0], k = shapes[0][1], m = shapes[1][0];
  if (shapes[1][1] != k || shapes[2][0] != m || shapes[3][0] != n || shapes[3][1] != m) return 2;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      float acc = b[j];
      for (int64_t p = 0; p < k; p++) acc += x[i * k + p] * w[j * k + p];
      y[i * m + j] = acc;
    }
  return 0;
}
"""

RNG = np.random.default_rng(7)
X, W, B = ((RNG.standard_normal(s) / 2).astype("float32") for s in [(3, 7), (5, 7), (5,)])


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("extern")
    (work / "env.c").write_text(LINEAR_C)
    path = work / "libenv.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(path), str(work / "env.c")], check=True)
    return path


@pytest.fixture
def registry() -> Iterator[list[str]]:
    """The names a test registers (it appends them), forgotten after it."""
    names: list[str] = []
    yield names
    for name in names:
        graph.remove_func(name)


@pytest.fixture
def native(library: Path, registry: list[str]) -> str:
    graph.register_native_func("env.linear", library, "linear")
    registry.append("env.linear")
    return "env.linear"


def numpy_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    out[:] = x @ w.T + b


@pytest.fixture
def python(registry: list[str]) -> str:
    graph.register_func("py.linear", numpy_linear)
    registry.append("py.linear")
    return "py.linear"


def between_ops(func: str, out_shape: tuple[int, ...] = (3, 5)) -> Module:
    """relu, then the extern linear layer over constant weights, then tanh; the extern's output is
    also the model's second output."""
    b = GraphBuilder()
    x = b.input("x", (3, 7), "float32")
    h = b.call("relu", [x])
    y = b.call_dps_packed(func, [h, b.constant("w", W), b.constant("b", B)], (out_shape, "float32"))
    return b.module([b.call("tanh", [y]), y])


def expected(x: np.ndarray) -> list[np.ndarray]:
    y = np.maximum(x, 0) @ W.T + B
    return [np.tanh(y), y]


@pytest.mark.parametrize("which", ["native", "python"])
def test_an_extern_call_between_two_ops_matches_numpy(which: str, request: pytest.FixtureRequest) -> None:
    module = between_ops(request.getfixturevalue(which))
    fused = graph.optimize(module, check=True)
    kinds = [(type(n).__name__, getattr(n, "ops", ())) for n in fused.nodes() if n.args]
    assert kinds == [("CallTIR", ("relu",)), ("CallDPSPacked", ()), ("CallTIR", ("tanh",))]
    assert sorted(t.ops for t in graph.extract_tasks(fused)) == [("relu",), ("tanh",)]
    model = graph.build(fused)
    for got, want in zip(model(X), expected(X)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(graph.run_reference(module, [X]), expected(X)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (call,) = model.forward_plan.externs
    assert call.args[-1].base is Storage.OUTPUT  # the model's output: written in the caller's array


def test_an_intermediate_extern_output_lives_in_the_arena(python: str) -> None:
    module = between_ops(python)
    model = graph.build(graph.Module(module.inputs, module.outputs[:1]))
    (call,) = model.forward_plan.externs
    assert call.args[-1].base is Storage.ARENA
    np.testing.assert_allclose(model(X)[0], expected(X)[0], rtol=1e-5, atol=1e-6)


def test_the_printer_shows_the_call(native: str) -> None:
    script = between_ops(native).script()
    assert "call_dps_packed('env.linear', (relu, w, b,), out_sinfo=Tensor((3, 5), 'float32'))" in script


def test_a_call_on_constants_alone_is_not_folded_but_runs_each_pass(registry: list[str]) -> None:
    calls: list[int] = []

    def count(a: np.ndarray, out: np.ndarray) -> None:
        calls.append(1)
        out[:] = a + 1

    graph.register_func("py.count", count)
    registry.append("py.count")
    b = GraphBuilder()
    x = b.input("x", (4,), "float32")
    c = b.call_dps_packed("py.count", [b.constant("c", np.arange(4, dtype="float32"))], ((4,), "float32"))
    model = graph.build(b.module([b.call("add", [x, c])]))
    assert calls == []
    for n in (1, 2):
        np.testing.assert_array_equal(model(np.ones(4, "float32"))[0], np.arange(4) + 2)
        assert len(calls) == n


def test_the_exported_library_gives_the_same_numbers(native: str, tmp_path: Path) -> None:
    model = graph.build(between_ops(native))
    path, header = model.export(tmp_path / "model.so")
    text = header.read_text()
    assert "'env.linear'" in text.replace('"', "'") and "linear in" in text
    run = ctypes.CDLL(str(path)).tensor_tuner_run
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    outputs = [np.empty((3, 5), "float32") for _ in range(2)]
    inputs = (ctypes.c_void_p * 1)(X.ctypes.data)
    assert run(inputs, (ctypes.c_void_p * 2)(*(o.ctypes.data for o in outputs))) == 0
    for got, want in zip(outputs, model(X)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(graph.load_library(path)(X), expected(X)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_non_zero_status_raises_naming_the_function(native: str, tmp_path: Path) -> None:
    """The C function returns 2 for an output of the wrong shape: the built model, the reference
    and the exported library (as the status EXTERN_FAILED + 0 from C) all say which call failed."""
    module = between_ops(native, out_shape=(3, 4))
    model = graph.build(module)
    with pytest.raises(ExternCallError, match=r"'env\.linear' \(node 'env_linear'\) failed"):
        model(X)
    with pytest.raises(ExternCallError, match="returned 2"):
        graph.run_reference(module, [X])
    path, _ = model.export(tmp_path / "failing.so")
    run = ctypes.CDLL(str(path)).tensor_tuner_run
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    outputs = [np.empty((3, 4), "float32") for _ in range(2)]
    pointers = (ctypes.c_void_p * 2)(*(o.ctypes.data for o in outputs))
    assert run((ctypes.c_void_p * 1)(X.ctypes.data), pointers) == EXTERN_FAILED
    with pytest.raises(ExternCallError, match=r"env\.linear"):
        graph.load_library(path)(X)


def test_the_failing_call_is_the_one_named(python: str, registry: list[str]) -> None:
    """Of two extern calls, the second raises: the error names its node and chains the exception."""

    def broken(a: np.ndarray, out: np.ndarray) -> None:
        raise ValueError("no good")

    graph.register_func("py.broken", broken)
    registry.append("py.broken")
    b = GraphBuilder()
    x = b.input("x", (3, 7), "float32")
    y = b.call_dps_packed(python, [x, b.constant("w", W), b.constant("b", B)], ((3, 5), "float32"))
    z = b.call_dps_packed("py.broken", [y], ((3, 5), "float32"), name="second")
    model = graph.build(b.module([b.call("exp", [z])]))
    with pytest.raises(ExternCallError, match="node 'second'") as caught:
        model(X)
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_python_function_must_write_in_place_and_may_not_write_its_inputs(registry: list[str]) -> None:
    graph.register_func("py.returns", lambda a, out: a * 2)
    graph.register_func("py.writes_input", lambda a, out: a.fill(0))
    registry.extend(["py.returns", "py.writes_input"])
    for name, error in (("py.returns", TypeError), ("py.writes_input", ValueError)):
        b = GraphBuilder()
        x = b.input("x", (2,), "float32")
        model = graph.build(b.module([b.call("exp", [b.call_dps_packed(name, [x], ((2,), "float32"))])]))
        with pytest.raises(ExternCallError, match=name) as caught:
            model(np.ones(2, "float32"))
        assert isinstance(caught.value.__cause__, error)


def test_an_unregistered_name_is_refused_when_the_graph_is_built(library: Path, registry: list[str]) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 7), "float32")
    with pytest.raises(GraphError, match=r"no extern function is registered as 'env\.missing'"):
        b.call_dps_packed("env.missing", [x], ((3, 5), "float32"))
    graph.register_func("py.any", numpy_linear)
    registry.append("py.any")
    with pytest.raises(GraphError, match="static, non-empty shape"):
        b.call_dps_packed("py.any", [x], ((0,), "float32"))
    with pytest.raises(ExternFuncError, match="no symbol 'nonesuch'"):
        graph.register_native_func("env.nonesuch", library, "nonesuch")
    with pytest.raises(ExternFuncError, match="already registered"):
        graph.register_func("py.any", numpy_linear)


def test_a_python_function_is_refused_at_export(python: str, tmp_path: Path) -> None:
    model = graph.build(between_ops(python))
    with pytest.raises(LibraryError, match=r"Python function 'py\.linear'"):
        model.export(tmp_path / "model.so")


def test_the_json_form_keeps_the_call_by_name(native: str, library: Path) -> None:
    module = between_ops(native)
    text = json.dumps(module_to_json(module))
    again = module_from_json(json.loads(text))
    assert again.script() == module.script()
    assert any(isinstance(n, CallDPSPacked) and n.func == native for n in again.nodes())
    np.testing.assert_allclose(graph.build(again)(X)[0], expected(X)[0], rtol=1e-5, atol=1e-6)
    graph.remove_func(native)
    try:
        with pytest.raises(GraphError, match=r"'env\.linear'"):
            module_from_json(json.loads(text))
    finally:
        graph.register_native_func(native, library, "linear")
    assert module_from_json(json.loads(text)).script() == module.script()


def test_verify_refuses_a_call_of_a_function_forgotten_since(registry: list[str]) -> None:
    graph.register_func("py.gone", numpy_linear)
    module = between_ops("py.gone")
    graph.remove_func("py.gone")
    with pytest.raises(GraphError, match=r"'py\.gone'"):
        graph.verify(module)
    with pytest.raises(GraphError, match=r"'py\.gone'"):
        graph.build(module)
