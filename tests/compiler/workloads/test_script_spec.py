"""Workloads written in TVMScript: the same workload as the registry's or te's program, inputs found
from what blocks write, and every refusal (syntax, a scheduled or unsafe program, limits) a
WorkloadError on `tvmscript` that names the script's line."""

import numpy as np
import pytest

from compiler.workloads import WorkloadError, workload_from_spec
from tests.compiler.test_script import MM_RELU

SOFTMAX = """
@T.prim_func
def softmax(A: T.Buffer((4, 9), "float32"), out: T.Buffer((4, 9), "float32")):
    mx = T.alloc_buffer((4,), "float32")
    e = T.alloc_buffer((4, 9), "float32")
    s = T.alloc_buffer((4,), "float32")
    for i, k in T.grid(4, 9):
        with T.block("mx"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                mx[vi] = T.min_value("float32")
            mx[vi] = T.max(mx[vi], A[vi, vk])
    for i, j in T.grid(4, 9):
        with T.block("e"):
            vi, vj = T.axis.remap("SS", [i, j])
            e[vi, vj] = T.exp(A[vi, vj] - mx[vi])
    for i, k in T.grid(4, 9):
        with T.block("s"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                s[vi] = 0.0
            s[vi] = s[vi] + e[vi, vk]
    for i, j in T.grid(4, 9):
        with T.block("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = e[vi, vj] / s[vi]
"""


def test_the_course_mm_relu_is_the_registry_s_matmul_relu():
    script = workload_from_spec({"tvmscript": MM_RELU})
    registry = workload_from_spec({"op": "matmul_relu", "params": {"M": 128, "N": 128, "K": 128}})
    assert script.func.structural_hash() == registry.func.structural_hash()
    assert script.num_inputs == 2 and script.flops == registry.flops
    assert set(script.spec) == {"primfunc", "num_inputs"}  # travels to workers as its PrimFunc
    assert workload_from_spec(script.spec).func == script.func


def test_a_script_workload_s_reference_is_its_program():
    w = workload_from_spec({"tvmscript": SOFTMAX})
    (a,) = w.random_inputs(np.random.default_rng(0))
    (got,) = w.reference(a)
    want = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(got, want / want.sum(1, keepdims=True), rtol=1e-6)


def _refusal(text: str, num_inputs: object = None) -> WorkloadError:
    spec = {"tvmscript": text} if num_inputs is None else {"tvmscript": text, "num_inputs": num_inputs}
    with pytest.raises(WorkloadError) as caught:
        workload_from_spec(spec)
    return caught.value


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("e[vi, vk]\n", "e[vi, vk + 1]\n", "line 18 (primfunc.body[1][2]"),  # block s reads past e
        (
            'T.grid(4, 9):\n        with T.block("out")',
            'T.grid(4, 99999):\n        with T.block("out")',
            "line 24 (primfunc.body[1][3][5][2]): a loop extent must be <=",
        ),
        (
            'for i, j in T.grid(4, 9):\n        with T.block("e")',
            'for i in T.parallel(4):\n      for j in range(9):\n        with T.block("e")',
            "are serial",
        ),
        (
            'mx = T.alloc_buffer((4,), "float32")',
            'mx = T.alloc_buffer((5,), "float32")',
            "line 8 (primfunc.body",
        ),
        (
            'mx = T.alloc_buffer((4,), "float32")',
            'mx = T.alloc_buffer((4,), "float32")\n    junk = T.alloc_buffer((3,))',
            "line 5 (primfunc.allocs[1]): no block writes junk",
        ),
        ("T.max(mx[vi], A[vi, vk])", "T.max(mx[vi], A[vi, vk]", "line 12, column"),
    ],
)
def test_a_refused_script_workload_names_the_line(old, new, message):
    assert old in SOFTMAX
    e = _refusal(SOFTMAX.replace(old, new))
    assert e.field == "tvmscript" and message in e.message, e


def test_a_workload_is_one_function_of_text():
    two = MM_RELU + SOFTMAX
    assert "one function" in _refusal(two.replace("import tvm\n", "")).message
    assert "TVMScript text" in _refusal(12).message  # type: ignore[arg-type]


def test_inputs_come_first_unless_num_inputs_says_otherwise():
    swapped = SOFTMAX.replace(
        'def softmax(A: T.Buffer((4, 9), "float32"), out: T.Buffer((4, 9), "float32")):',
        'def softmax(out: T.Buffer((4, 9), "float32"), A: T.Buffer((4, 9), "float32")):',
    )
    refused = _refusal(swapped)
    assert refused.field == "num_inputs" and "A follow an output" in refused.message
    assert _refusal(swapped, num_inputs=1).field.startswith("tvmscript")
    assert _refusal(SOFTMAX, num_inputs=2).field == "num_inputs"
    assert workload_from_spec({"tvmscript": SOFTMAX, "num_inputs": 1}).num_inputs == 1


def test_a_huge_script_costs_only_the_limit():
    e = _refusal(SOFTMAX + "#" * (300 << 10))
    assert "exceeds the limit" in e.message
