"""The probe of a workload's reference: it computes exactly what the whole reference computes in the
window it looks at, touches only what that window depends on, and refuses references that are not
finite there (the issue's `Y[i] = A[i] / 0` and `log(-1*A[i]*A[i])`)."""

import numpy as np
import pytest

from compiler.workloads import WorkloadError, workload_from_spec
from compiler.workloads.primfunc_spec import primfunc_spec
from compiler.workloads.probe import PROBE_EXTENT, check_finite, plan, probe
from tests.compiler.test_workloads import CASES, IDS
from tests.compiler.workloads.test_primfunc_spec import fused_conv2d_add_relu

EXPRESSIONS = [
    ("Y[i, j] = sum(A[i, k] * B[k, j], k); C[i, j] = max(Y[i, j], 0.0)", {"A": [9, 6], "B": [6, 11]}),
    ("S[i] = sum(exp(A[i, j]), j); Y[i, j] = exp(A[i, j]) / S[i]", {"A": [5, 13]}),
    ("T[i] = sum(A[i] * B[i + k] * W[k], k); Y[i] = T[i] + 1.0", {"A": [8], "B": [12], "W": [5]}),
    ("T[i] = sum(A[i, j], j); Y[i, j] = A[i, j] - T[5]", {"A": [6, 10]}),
]
SPECS = [{"op": op, "params": params} for op, params in CASES]
SPECS += [{"expr": expr, "inputs": inputs} for expr, inputs in EXPRESSIONS]
SPECS.append(primfunc_spec(fused_conv2d_add_relu(), 3))


@pytest.mark.parametrize("spec", SPECS, ids=IDS + [f"expr-{i}" for i in range(len(EXPRESSIONS))] + ["fused"])
def test_the_probe_computes_what_the_whole_reference_computes_in_its_window(spec: dict):
    workload = workload_from_spec(spec)
    seen = probe(workload, np.random.default_rng(0))
    whole = workload.reference(*seen.inputs)
    for (buffer, window), full in zip(seen.outputs.items(), whole, strict=True):
        assert window.shape == tuple(min(n, PROBE_EXTENT) for n in buffer.shape) or window.shape == full.shape
        np.testing.assert_allclose(
            window, full[tuple(slice(0, n) for n in window.shape)], rtol=1e-5, atol=1e-5
        )
    assert any(np.any(x != 0) for x in seen.inputs)


def test_the_probe_reads_only_what_its_window_depends_on():
    # A 3x3 convolution of stride 1 with padding 1: 4x4 outputs read a 5x5 corner of the input.
    params = {"N": 1, "C": 2, "H": 30, "W": 30, "K": 3, "R": 3, "S": 3, "padding": 1}
    conv = workload_from_spec({"op": "conv2d_nchw", "params": params})
    data, weight = probe(conv, np.random.default_rng(0)).inputs
    assert np.count_nonzero(data[0, 0]) == 25 and not data[0, 0, 5:].any() and np.all(weight != 0)
    # Half a gigabyte of buffers, sixteen iterations: nothing but the window is evaluated.
    big = workload_from_spec({"op": "relu", "params": {"shape": [8192, 8192]}})
    assert plan(big.func, big.num_inputs).iterations == PROBE_EXTENT**2


def test_the_issues_triple_sum_is_probed_within_its_limit():
    triple = workload_from_spec(
        {"expr": "Y[i] = sum(A[i] * B[j] * C[k], j, k)", "inputs": {"A": [65536], "B": [4096], "C": [1024]}}
    )
    assert plan(triple.func, 1).iterations == PROBE_EXTENT * 4096 * 1024
    check_finite(triple)


@pytest.mark.parametrize(
    "expr",
    [
        "Y[i] = A[i] / 0",
        "Y[i] = log(-1*A[i]*A[i])",
        "Y[i] = sqrt(-1 - A[i] * A[i])",
        "Y[i] = exp(1000 + A[i])",
        "S[i] = sum(A[i, j] - A[i, j], j); Y[i, j] = A[i, j] / S[7]",
    ],
)
def test_a_reference_that_is_not_finite_is_refused(expr: str):
    inputs = {"A": [8, 8] if "S" in expr else [64]}
    with pytest.raises(WorkloadError) as refused:
        check_finite(workload_from_spec({"expr": expr, "inputs": inputs}))
    assert refused.value.field == "expr" and "not finite" in refused.value.message


def test_every_registered_op_and_the_fused_kernel_are_finite():
    for spec in SPECS:
        check_finite(workload_from_spec(spec))


def test_a_reference_too_costly_to_probe_is_refused_before_anything_runs():
    spec = {"expr": "Y[i] = sum(A[i] * B[j] * C[k], j, k)", "inputs": {"A": [8], "B": [65536], "C": [8192]}}
    with pytest.raises(
        WorkloadError, match="cannot be probed: one output element needs 536870912 iterations"
    ):
        check_finite(workload_from_spec(spec))
