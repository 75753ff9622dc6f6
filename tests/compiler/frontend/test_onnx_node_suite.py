"""The ONNX backend node test suite as a test (issue 43): every node case onnx defines, imported,
built and run, must end as `onnx_node_suite_expected.json` says (pass, or a clear refusal), never as a
wrong answer or a crash; and the harness itself (`onnx_node_suite.py`) must tell a dead or hung
worker, a wrong shape or dtype, and every kind of drift from the expectations."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.compiler.frontend.onnx_node_suite import (
    REFERENCE_DISAGREEMENTS,
    WRITE_COMMAND,
    Case,
    Result,
    compare_output,
    discover,
    load_expected,
    problems,
    run_case,
    run_cases,
)

SHOWN = 60  # problems listed in a failure, at most


@pytest.mark.slow
def test_every_node_case_as_expected() -> None:
    cases = discover()
    found = problems(run_cases(cases), load_expected())
    shown = found[:SHOWN] + ([f"... and {len(found) - SHOWN} more"] if len(found) > SHOWN else [])
    assert not found, (
        f"{len(found)} ONNX node cases differ from onnx_node_suite_expected.json:\n"
        + "\n".join(shown)
        + "\nA WRONG or CRASH case is a compiler bug: fix it. If the other changes are intended (an operator "
        f"now supported, cases added or removed by an onnx upgrade), rewrite the expectations with "
        f"`{WRITE_COMMAND}` and review the diff."
    )


# The harness.


def relu_case(name: str = "relu", inputs: tuple = ()) -> Case:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], name, [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    data = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    return Case(name, "Relu", model.SerializeToString(), inputs or (data,), (np.maximum(data, 0),))


class Segfault:
    """Read from address 0 where it is unpickled: in the worker, as it receives its case."""

    def __reduce__(self) -> tuple:
        return ctypes.string_at, (0,)


class Hang:
    def __reduce__(self) -> tuple:
        return time.sleep, (3600,)


def test_a_dead_worker_is_a_crash_of_its_case_only() -> None:
    results = run_cases([relu_case("dies", (Segfault(),)), relu_case("after")], jobs=1)
    assert results["dies"].outcome == "crash"
    assert "worker process died" in results["dies"].detail
    assert results["after"] == Result("pass")


def test_a_hung_case_times_out() -> None:
    start = time.monotonic()
    results = run_cases([relu_case("hangs", (Hang(),))], timeout=2)
    assert results["hangs"] == Result("crash", "timed out after 2 s")
    assert time.monotonic() - start < 30


def test_a_wrong_value_is_wrong() -> None:
    case = relu_case()
    wrong = Case("wrong", case.op, case.model, case.inputs, (case.outputs[0] + 0.01,))
    results = run_cases([wrong], jobs=1)
    assert results["wrong"].outcome == "wrong"
    assert results["wrong"].detail.startswith("output 0 ('y'): 6 of 6 elements differ")


def test_a_listed_disagreement_with_the_reference_is_checked_against_onnx_runtime() -> None:
    """Listed cases pass as "onnxruntime" while ONNX Runtime disagrees with their expected outputs
    and ours match ONNX Runtime's; once ONNX Runtime agrees, they are compared as any other."""
    name = next(iter(REFERENCE_DISAGREEMENTS))
    case = relu_case(name)
    off = Case(name, case.op, case.model, case.inputs, (case.outputs[0] + 0.01,))
    assert run_case(off) == Result("onnxruntime", REFERENCE_DISAGREEMENTS[name])
    assert run_case(case) == Result("pass")


@pytest.mark.parametrize(
    ("actual", "expected", "problem"),
    [
        (np.zeros(1, np.float32), np.zeros((), np.float32), "shape (1,), expected ()"),
        (np.zeros(3, np.float32), np.zeros(3, np.float64), "dtype float32, expected float64"),
        (np.array([1.0, np.nan], np.float32), np.array([1.0005, np.nan], np.float32), None),
        (np.array([1, 2], np.int64), np.array([1, 3], np.int64), "1 of 2 elements differ; at (1,)"),
        (np.array([True]), np.array([True]), None),
    ],
)
def test_outputs_compare_by_shape_dtype_and_value(
    actual: np.ndarray, expected: np.ndarray, problem: str | None
) -> None:
    found = compare_output(actual, expected)
    assert found == problem if problem is None else found is not None and found.startswith(problem)


def test_every_drift_from_the_expectations_is_a_problem() -> None:
    expected = {
        "still_refused": {"outcome": "refused", "reason": "old words"},
        "now_passes": {"outcome": "refused", "reason": "r"},
        "now_refused": {"outcome": "pass"},
        "fine": {"outcome": "pass"},
        "gone": {"outcome": "pass"},
        "known_wrong": {"outcome": "wrong", "detail": "d"},
    }
    results = {
        "still_refused": Result("refused", "new words"),
        "now_passes": Result("pass"),
        "now_refused": Result("refused", "node 'n' (Op): no"),
        "fine": Result("pass"),
        "known_wrong": Result("wrong", "d"),
        "new": Result("refused", "r"),
        "crashes": Result("crash", "SystemError: x"),
    }
    found = problems(results, expected)
    assert [line.split(":")[0] for line in found] == [
        "crashes",
        "gone",
        "known_wrong",
        "new",
        "now_passes",
        "now_refused",
    ]
    assert WRITE_COMMAND in found[4]
