"""JSON workload specs and the custom expression language: canonical specs, the numpy interpreter,
agreement with the registry, and one WorkloadError with the right field for every malformed spec."""

from __future__ import annotations

import dataclasses
import json
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.visit import blocks
from compiler.workloads import MAX_EXPR_CHARS, Workload, WorkloadError, workload_from_spec

MM_RELU = "Y[i, j] = sum(A[i, k] * B[k, j], k); C[i, j] = max(Y[i, j], 0.0)"
SOFTMAX = (
    "mx[i] = max(A[i, k], k); e[i, j] = exp(A[i, j] - mx[i]); "
    "s[i] = sum(e[i, k], k); out[i, j] = e[i, j] / s[i]"
)


def custom(expr: str, dtype: str = "float32", **inputs: list[int]) -> Workload:
    return workload_from_spec({"expr": expr, "inputs": inputs, "dtype": dtype})


@pytest.fixture(scope="module")
def build():
    return pytest.importorskip("compiler.build").build


def run_reference(w: Workload, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    inputs = w.random_inputs(np.random.default_rng(seed))
    (out,) = w.reference(*inputs)
    return inputs, out


# --- custom workloads agree with the registry -----------------------------------------------------


def test_custom_matmul_relu_is_the_registry_op():
    c = custom(MM_RELU, A=[13, 97], B=[97, 7])
    r = workload_from_spec({"op": "matmul_relu", "params": {"M": 13, "N": 7, "K": 97}})
    assert c.name == "custom" and c.num_inputs == 2
    assert dataclasses.replace(c.func, name=r.func.name) == r.func
    assert c.flops == r.flops
    inputs = c.random_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(c.reference(*inputs)[0], r.reference(*inputs)[0], rtol=1e-5, atol=1e-5)


def test_custom_softmax_matches_registry():
    c = custom(SOFTMAX, A=[7, 31])
    r = workload_from_spec({"op": "softmax", "params": {"M": 7, "N": 31}})
    assert c.flops == r.flops
    assert [b.name for b in blocks(c.func.body)] == ["mx", "e", "s", "out"]
    inputs = c.random_inputs(np.random.default_rng(1))
    np.testing.assert_allclose(c.reference(*inputs)[0], r.reference(*inputs)[0], rtol=1e-5, atol=1e-6)


# --- the interpreter against numpy formulas -----------------------------------------------------------

FORMULAS = [
    ("C[i, j] = A[i, j] + B[i, j]", {"A": [3, 5], "B": [3, 5]}, lambda a, b: a + b),
    ("C[j, i] = A[i, j]", {"A": [3, 5]}, lambda a: a.T),
    (
        "C[i, j] = -A[i, j] * 2 - 1.5 / (A[i, j] * A[i, j] + 1)",
        {"A": [4, 3]},
        lambda a: -a * 2 - 1.5 / (a * a + 1),
    ),
    ("C[i] = sqrt(exp(A[i]) + tanh(A[i]) + 2.0)", {"A": [9]}, lambda a: np.sqrt(np.exp(a) + np.tanh(a) + 2)),
    (
        "C[i] = log(max(A[i], B[i]) - min(A[i], B[i]) + 1)",
        {"A": [9], "B": [9]},
        lambda a, b: np.log(abs(a - b) + 1),
    ),
    ("C[i, j] = A[i, 2 * j + 1] + B[i, j]", {"A": [4, 8], "B": [4, 4]}, lambda a, b: a[:, 1::2] + b),
    ("C[i, j] = A[i, j] - A[i, 0] + A[3 - i, 2]", {"A": [4, 3]}, lambda a: a - a[:, :1] + a[::-1, 2:3]),
    ("C[i] = sum(A[i, k, l] * A[i, k, l], k, l)", {"A": [3, 4, 5]}, lambda a: (a * a).sum(axis=(1, 2))),
    ("C[j] = max(A[k, j], k)", {"A": [6, 5]}, lambda a: a.max(axis=0)),
    ("C[i] = min(A[i, k] + 1, k)", {"A": [6, 5]}, lambda a: a.min(axis=1) + 1),
    ("C[i, j] = sum(A[i, k] * B[j, k], k)", {"A": [3, 7], "B": [5, 7]}, lambda a, b: a @ b.T),
    ("T[i] = A[i] * 3; U[i] = T[i] + A[i]; C[i] = U[i] * T[i]", {"A": [5]}, lambda a: (4 * a) * (3 * a)),
    ("C[b, i, j] = sum(A[b, i, k] * B[b, k, j], k)", {"A": [2, 3, 4], "B": [2, 4, 5]}, lambda a, b: a @ b),
    ("C[i, j] = 1.5", {"A": [2]}, None),  # unused input: checked in the error tests
]


@pytest.mark.parametrize(("expr", "inputs", "formula"), [f for f in FORMULAS if f[2] is not None])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_interpreter_matches_numpy(expr, inputs, formula, dtype):
    w = custom(expr, dtype, **inputs)
    ins, out = run_reference(w)
    assert out.dtype == np.dtype(dtype) and out.shape == w.outputs[0].shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, formula(*ins), rtol=tol, atol=tol)


@pytest.mark.parametrize(("expr", "inputs", "formula"), [f for f in FORMULAS if f[2] is not None])
def test_built_custom_kernel_matches_interpreter(build, expr, inputs, formula):
    w = custom(expr, **inputs)
    ins, want = run_reference(w, seed=3)
    outs = w.empty_outputs()
    build(w.func)(*ins, *outs)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)


def test_input_order_is_order_of_first_use():
    w = workload_from_spec({"expr": "C[i] = B[i] * A[i]", "inputs": {"A": [3], "B": [3]}})
    assert [b.name for b in w.func.params] == ["B", "A", "C"]
    assert list(w.spec["inputs"]) == ["B", "A"]


def test_chunked_interpreter_bounds_memory_on_512_cubed_matmul():
    w = custom("C[i, j] = sum(A[i, k] * B[k, j], k)", A=[512, 512], B=[512, 512])
    a, b = w.random_inputs(np.random.default_rng(0))
    tracemalloc.start()
    start = time.perf_counter()
    try:
        (c,) = w.reference(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 80 << 20, peak  # the unchunked product would be 512 MiB
    assert time.perf_counter() - start < 20
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    ("expr", "inputs", "flops"),
    [
        ("C[i, j] = sum(A[i, k] * B[k, j], k)", {"A": [2, 5], "B": [5, 3]}, 60),
        ("C[i] = -A[i]", {"A": [7]}, 7),
        ("C[i] = A[i] + A[2 * i - i]", {"A": [7]}, 7),  # index arithmetic is addressing, not flops
        ("C[i] = exp(A[i]) / 2.0; D[i] = max(C[i], A[i])", {"A": [7]}, 21),
        ("C[i] = max(A[i, k], k)", {"A": [3, 4]}, 12),
    ],
)
def test_custom_flops(expr, inputs, flops):
    assert custom(expr, **inputs).flops == flops


# --- canonical specs -------------------------------------------------------------------------------


def test_equivalent_texts_give_one_canonical_spec():
    variants = [
        "Y[i,j]=sum(A[i,k]*B[k,j],k);C[i,j]=max(Y[i,j],0.0);",
        "  Y[i, j] = sum((A[i, k]) * (B[k, j]), k) ;\n C[i, j] = max(((Y[i, j])), 0.0)",
        MM_RELU,
    ]
    specs = [
        workload_from_spec({"inputs": {"B": [4, 3], "A": [2, 4]}, "expr": v, "dtype": "float32"}).spec
        for v in variants
    ]
    assert all(json.dumps(s) == json.dumps(specs[0]) for s in specs)
    assert specs[0] == {"expr": MM_RELU, "inputs": {"A": [2, 4], "B": [4, 3]}, "dtype": "float32"}


@pytest.mark.parametrize(
    ("expr", "canonical"),
    [
        ("C[i] = A[i] - (A[i] - A[i])", "C[i] = A[i] - (A[i] - A[i])"),
        ("C[i] = (A[i] - A[i]) - A[i]", "C[i] = A[i] - A[i] - A[i]"),
        ("C[i] = -(A[i] * 2) + --A[i]", "C[i] = -(A[i] * 2) + --A[i]"),
        ("C[i] = A[i] / (2 * A[i]) * 1e-3", "C[i] = A[i] / (2 * A[i]) * 0.001"),
        ("C[i] = A[(i)] * -A[i] + 007", "C[i] = A[i] * -A[i] + 7"),
    ],
)
def test_expression_printing_keeps_meaning(expr, canonical):
    w = custom(expr, A=[6])
    assert w.spec["expr"] == canonical
    again = workload_from_spec(w.spec)
    assert again == w
    np.testing.assert_array_equal(run_reference(again)[1], run_reference(w)[1])


# --- malformed specs ---------------------------------------------------------------------------------

MM = {"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}
AB = {"A": [4, 4], "B": [4, 4]}

BAD_SPECS = [
    ("not a dict", "spec", "must be an object"),
    ({}, "op", "missing"),
    ({"params": {"M": 1}}, "op", "missing"),
    ({"op": "convolution"}, "op", "unknown operator"),
    ({"op": 3}, "op", "must be a string"),
    ({**MM, "params": {"M": "8", "N": 8, "K": 8}}, "params.M", "must be an integer"),
    ({**MM, "params": {"M": -8, "N": 8, "K": 8}}, "params.M", ">= 1"),
    ({**MM, "params": {"M": 1 << 20, "N": 8, "K": 8}}, "params.M", "<= 65536"),
    ({**MM, "params": {"M": 32768, "N": 32768, "K": 32768}}, "params", "bytes"),
    ({**MM, "dtype": "int32"}, "dtype", "float32"),
    ({**MM, "dtype": None}, "dtype", "float32"),
    ({**MM, "device": "cpu"}, "device", "unknown key"),
    ({**MM, "inputs": AB}, "inputs", "unknown key"),
    ({**MM, "expr": "C[i] = A[i]"}, "expr", "not both"),
    ({"expr": "C[i] = A[i]"}, "inputs", "missing"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": [4]}, "params": {}}, "params", "unknown key"),
    ({"expr": "C[i] = A[i]", "inputs": [[4]]}, "inputs", "object"),
    ({"expr": "C[i] = A[i]", "inputs": {}}, "inputs", "object"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": [2] * 7}}, "inputs.A", "rank 7"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": [0]}}, "inputs.A", ">= 1"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": ["4"]}}, "inputs.A", "extent 0 must be an integer"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": [True]}}, "inputs.A", "must be an integer"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": 4}}, "inputs.A", "list of extents"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": [70000]}}, "inputs.A", "<= 65536"),
    ({"expr": "C[i] = A[i]", "inputs": {"A-1": [4]}}, "inputs.A-1", "identifiers"),
    ({"expr": "C[i] = A[i]", "inputs": {"sum": [4]}}, "inputs.sum", "reserved"),
    ({"expr": "C[i, j] = A[i, j]", "inputs": {"A": [65536, 32768]}}, "inputs", "bytes"),
    ({"expr": "C[i, j] = A[i, j]", "inputs": {"A": [16384, 16384]}}, "expr", "bytes"),
    ({"expr": "C[i] = A[i]", "inputs": {"A": [4], "B": [4]}}, "inputs.B", "not used"),
    ({"expr": 42, "inputs": {"A": [4]}}, "expr", "must be a string"),
]


@pytest.mark.parametrize(("spec", "field", "message"), BAD_SPECS)
def test_bad_spec_names_the_field(spec, field, message):
    with pytest.raises(WorkloadError) as e:
        workload_from_spec(spec)
    assert e.value.field == field
    assert message in str(e.value)
    assert str(e.value).startswith(f"{field}: ")


BAD_EXPRS = [
    ("C[i] = Z[i]", "unknown tensor 'Z' at position 7"),
    ("C[i] = A[i, 0] +", "expected a number, name or '(' but found 'end of expression' at position 16"),
    ("C[i] = A[i, 0] $ 1", "unexpected character '$' at position 15"),
    ("C[i, j] = A[i, 0]", "cannot infer the extent of index variable 'j'"),
    ("C[i, j] = sum(A[i, k], k) + B[i, j]", "must be the whole right-hand side"),
    (
        "C[i, j] = A[i, j] + D[j, i]",
        "index variable 'j' at position 22: 4 from D axis 0 (position 22), but 3 from A axis 1 (position 15)",
    ),
    ("C[a, b, c, d, e, f, g] = A[a, b]", "rank 7"),
    ("__import__('os')", 'unexpected character "\'" at position 11'),
    ("C[i, j] = __import__(A[i, j])", "unknown function '__import__' at position 10"),
    ("C[i, j] = A[i * j, j]", "not affine"),
    ("C[i, j] = A[i / 2, j]", "division not allowed in an index"),
    ("C[i, j] = A[B[i, j], j]", "not allowed in an index"),
    ("C[i, j] = A[i, 1.5]", "index must be an integer"),
    ("C[i, j] = A[i, q]", "unknown index variable 'q' at position 15"),
    ("C[i, j] = A[i, A]", "tensor 'A' cannot be used in an index"),
    ("C[i, j] = A[i, j] + A[i, j + 1]", "index j + 1 of A axis 1 ranges over [1, 3], outside [0, 2]"),
    ("C[i, j] = A[i, j] + A[i, j - 1]", "ranges over [-1, 1]"),
    ("C[i, j] = A[i, j] * i", "index variable 'i' can only be used inside tensor indices"),
    ("C[i, j] = A", "tensor 'A' needs indices"),
    ("C[i, j] = x", "unknown name 'x'"),
    ("C[i] = A[i, 0] + C[i]", "unknown tensor 'C' (a statement cannot read its own output)"),
    ("C[i, j] = A[i]", "A has rank 2 but is indexed with 1"),
    ("A[i, j] = D[i, j]", "tensor 'A' is already defined"),
    ("Y[i, j] = A[i, j]; C[i, j] = D[i, j]", "tensor 'Y' is computed but never used at position 0"),
    ("C[i, i] = A[i, i]", "index variable 'i' appears twice"),
    ("C[A, j] = D[A, j]", "'A' is a tensor and cannot be an index variable"),
    ("sum[i, j] = A[i, j]", "'sum' is a function and cannot name a tensor"),
    ("C[i, exp] = A[i, exp]", "'exp' is a function and cannot name an index variable"),
    ("C[i] = sum(A[i, j])", "sum needs one expression, then reduction variables"),
    ("C[i] = sum(A[i, j], D[i, j], j)", "sum reduction takes one expression, then reduction variables"),
    ("C[i] = sum(A[i, k], k, k)", "index variable 'k' appears twice"),
    ("C[i] = sum(max(A[i, k], k), k)", "a max reduction must be the whole right-hand side"),
    ("C[i, j] = max(A[i, j])", "max takes 2 argument(s), got 1"),
    ("C[i, j] = exp(A[i, j], D[i, j])", "exp takes 1 argument(s), got 2"),
    ("C[i, j] = A[i, j] + 99999999999", "integer 99999999999 is larger than"),
    ("C[i, j] = A[i, j] * 1e999", "number 1e999 is out of range"),
    ("C[i, j] = A[i, j] A", "expected ';' or the end of the expression but found 'A' at position 18"),
    ("C[i, j] == A[i, j]", "expected a number, name or '(' but found '='"),
    ("C[i + 1] = A[i, 0]", "expected ']' but found '+' at position 4"),
    ("for[i] = A[i, 0]", "'for' is a reserved word at position 0"),
    ("C[i] = A[i, 0];;", "expected a name but found ';' at position 15"),
    ("", "expected a name but found 'end of expression' at position 0"),
    ("C[i, j] = " + "(" * 70 + "A[i, j]" + ")" * 70, "nested too deeply"),
    ("C[i, j] = " + "-" * 70 + "A[i, j]", "nested too deeply"),
    ("C[i, j] = " + " + ".join(["A[i, j]"] * 70), "nested too deeply"),
    ("; ".join(f"T{k}[i, j] = A[i, j]" for k in range(17)), "more than 16 statements"),
    ("C[i, j] = A[i, j]" + " " * MAX_EXPR_CHARS, f"over the limit of {MAX_EXPR_CHARS}"),
]


@pytest.mark.parametrize(("expr", "message"), BAD_EXPRS)
def test_bad_expression_names_token_and_position(expr, message):
    with pytest.raises(WorkloadError) as e:
        workload_from_spec({"expr": expr, "inputs": {"A": [3, 3], "D": [4, 3]}})
    assert e.value.field == "expr"
    assert message in str(e.value)


# --- fuzzing: garbage in, WorkloadError out ------------------------------------------------------

TOKENS = [
    "A", "B", "C", "Y", "i", "j", "k", "[", "]", "(", ")", ",", ";", "=", "+", "-", "*", "/", " ",
    "sum", "max", "min", "exp", "sqrt", "0", "1", "2", "0.5", "1e3", "C[i, j] = ", "A[i, k]", "B[k, j]",
]  # fmt: skip


def check_garbage(expr: str) -> None:
    try:
        w = workload_from_spec({"expr": expr, "inputs": {"A": [3, 4], "B": [4, 3]}})
    except WorkloadError as e:
        assert e.field in ("expr", "inputs.A", "inputs.B")
        return
    assert workload_from_spec(w.spec) == w  # whatever parses also round-trips and runs
    _, out = run_reference(w)
    assert out.shape == w.outputs[0].shape


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_random_text_only_raises_workload_error(expr):
    check_garbage(expr)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join))
def test_random_token_soup_only_raises_workload_error(expr):
    check_garbage(expr)


# --- random valid programs: the interpreter and the built kernel agree ---------------------------


@st.composite
def programs(draw: st.DrawFn) -> str:
    """A valid program over A, B of shape [4, 4]: every index variable appears as a whole index, every
    index stays in bounds, and only NaN-free functions are used, so any disagreement is a real bug."""
    ranks = {"A": 2, "B": 2}
    stmts = []
    count = draw(st.integers(1, 3))
    for n in range(count):
        name = "C" if n == count - 1 else f"T{n}"
        axes = draw(st.sampled_from([("i",), ("i", "j"), ("j", "i")]))
        reduce = draw(st.sampled_from([(), ("k",), ("k", "l")]))
        names = axes + reduce

        def access(tensor: str, fixed: str | None = None, names: tuple[str, ...] = names) -> str:
            idx = [fixed or draw(st.sampled_from([*names, "0", "3"])) for _ in range(ranks[tensor])]
            idx = [f"3 - {v}" if v in names and not fixed and draw(st.booleans()) else v for v in idx]
            return f"{tensor}[{', '.join(idx)}]"

        def expr(depth: int) -> str:
            kind = draw(st.integers(0, 6 if depth < 3 else 0))
            if kind == 0:
                return access(draw(st.sampled_from(sorted(ranks))))
            a, b = expr(depth + 1), expr(depth + 1)
            return [
                f"{a} + {b}", f"{a} - {b}", f"({a}) * ({b})", f"{a} / (({b}) * ({b}) + 1.5)",
                f"exp(tanh({a}))", f"max({a}, -{b})",
            ][kind - 1]  # fmt: skip

        used = [access(t, v) for v in names for t in [draw(st.sampled_from(sorted(ranks)))]]
        later = [t for t in ranks if t.startswith("T") or n == 0]  # leave no input or intermediate unused
        used += [access(t, names[0]) for t in later]
        value = " + ".join([expr(0), *used])
        if reduce:
            value = f"{draw(st.sampled_from(['sum', 'max', 'min']))}({value}, {', '.join(reduce)})"
        stmts.append(f"{name}[{', '.join(axes)}] = {value}")
        ranks[name] = len(axes)
    return "; ".join(stmts)


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_programs_round_trip_and_build(build, expr):
    w = workload_from_spec({"expr": expr, "inputs": {"A": [4, 4], "B": [4, 4]}, "dtype": "float64"})
    assert workload_from_spec(w.spec) == w
    ins, want = run_reference(w)
    outs = w.empty_outputs()
    build(w.func)(*ins, *outs)
    np.testing.assert_allclose(outs[0], want, rtol=1e-9, atol=1e-9)
