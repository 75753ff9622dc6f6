"""The ONNX backend node test suite run through our frontend and compiler (issue 43): every node case
the installed `onnx` package defines is imported (`from_onnx`), optimized, built and run, and its
outputs are compared with the case's expected ones.

Each case ends in one outcome:

- "pass": imported, built, and every output matches (shape, dtype, and values: floats within
  rtol=1e-3, atol=1e-4, anything else exactly);
- "refused": from_onnx, optimize or build raised FrontendError or GraphError (a clear refusal; the
  detail is the first line of its message), or the run did, for a model imported at the values of
  its inputs that set shapes (`graph.ValueFamily`), which imports on its first call;
- "onnxruntime": a case of REFERENCE_DISAGREEMENTS, where ONNX Runtime (and PyTorch) compute
  otherwise than the reference that made the expected outputs, and our outputs match ONNX
  Runtime's (checked at every run, as is that ONNX Runtime still disagrees with the reference);
- "wrong": built and ran, but an output differs (a silent wrong answer: the worst outcome);
- "crash": any other exception, a worker process that died (a segfault in native code) or a case
  that outlived its timeout.

The cases run in worker processes ("spawn"), one at a time each, so a crash or a hang costs one case
only: its worker is replaced. `onnx_node_suite_expected.json` holds the expected outcome of every
case ("pass" or "refused", with the reason); `test_onnx_node_suite.py` compares a run with it, and

    python -m tests.compiler.frontend.onnx_node_suite --write

runs every case and rewrites it, printing the counts per outcome and the most refused operators.
The cases come from `onnx.backend.test.loader.load_model_tests(kind="node")`, which generates them
(seeded) from `onnx.backend.test.case.node`: the same cases as the `data/node` directories of an onnx
release, which this installation does not ship.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import numpy_helper

from compiler import frontend, graph
from compiler.frontend import FrontendError
from compiler.frontend.onnx_dims import open_dims
from compiler.graph import GraphError
from compiler.graph.shape_family import DimSpec

OUTCOMES = ("pass", "onnxruntime", "refused", "wrong", "crash")
EXPECTED_PATH = Path(__file__).with_name("onnx_node_suite_expected.json")
WRITE_COMMAND = "python -m tests.compiler.frontend.onnx_node_suite --write"
RTOL, ATOL = 1e-3, 1e-4
CASE_TIMEOUT = 60.0
CASES_PER_WORKER = 200  # a worker is replaced after this many cases: each build loads a library

# Cases whose expected outputs ONNX Runtime does not compute, where we compute what ONNX Runtime and
# the models' authors (PyTorch) do: compared with ONNX Runtime's outputs instead.
_ALIGN_CORNERS = (
    "align_corners from a scale whose output length is fractional: ONNX Runtime and PyTorch divide by "
    "the output length less one, the reference by the fractional length less one (onnx/onnx#2462)"
)
REFERENCE_DISAGREEMENTS = {
    "test_resize_downsample_scales_cubic_align_corners": _ALIGN_CORNERS,
    "test_resize_downsample_scales_linear_align_corners": _ALIGN_CORNERS,
}


@dataclass(frozen=True)
class Case:
    """One node case: its model's bytes, its inputs in the model's input order, its expected outputs
    in the model's output order, and the operator it tests."""

    name: str
    op: str
    model: bytes
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]


@dataclass(frozen=True)
class Result:
    outcome: str  # one of OUTCOMES
    detail: str = ""


# Discovery.


def discover(names: Iterable[str] | None = None) -> list[Case]:
    """The node cases (those named in `names`, if given), sorted by name; one case per data set."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow and divide by zero on purpose
        tests = load_model_tests(kind="node")
    ops = {t.name: _op_of(t.model) for t in tests if "_expanded" not in t.name}
    wanted = None if names is None else set(names)
    cases = []
    for test in tests:
        for k, (inputs, outputs) in enumerate(test.data_sets):
            name = test.name if len(test.data_sets) == 1 else f"{test.name}_data_set_{k}"
            if wanted is not None and name not in wanted:
                continue
            op = ops.get(_base_name(test.name)) or _op_of(test.model)
            data = tuple(_array(v) for v in inputs), tuple(_array(v) for v in outputs)
            cases.append(Case(name, op, test.model.SerializeToString(), *data))
    return sorted(cases, key=lambda c: c.name)


def _base_name(name: str) -> str:
    """The case a function-expanded case (`test_x_expanded`, `test_x_expanded_ver18`) expands."""
    return re.sub(r"_expanded(_ver\d+)?$", "", name)


def _op_of(model: onnx.ModelProto) -> str:
    node = model.graph.node[0]
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _array(value: Any) -> Any:
    """A case's value as numpy: a TensorProto converted, a sequence element-wise, None as it is."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_array(v) for v in value]
    return value if value is None else np.asarray(value)


# One case.


def run_case(case: Case) -> Result:
    """Import, optimize, build and run one case, and compare its outputs. An input dimension the
    model leaves open gets the range 1 to the case's size (`from_onnx(dims=...)`): the compiled model
    then takes the case's inputs as any caller's of that range."""
    try:
        model = frontend.from_onnx(case.model, dims=_case_dims(case))
        compiled = graph.build(graph.optimize(model) if isinstance(model, graph.Module) else model)
    except (FrontendError, GraphError) as e:
        return Result("refused", _first_line(e))
    except Exception as e:
        return Result("crash", f"{type(e).__name__} while building: {_first_line(e)}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = list(compiled(*case.inputs))
    except (FrontendError, GraphError) as e:
        return Result("refused", _first_line(e))
    except Exception as e:
        return Result("crash", f"{type(e).__name__} while running: {_first_line(e)}")
    names = _output_names(case.model)
    if case.name in REFERENCE_DISAGREEMENTS:
        runtime = _onnx_runtime_outputs(case)
        if compare_outputs(runtime, case.outputs, names) is not None:  # they still disagree
            problem = compare_outputs(actual, runtime, names)
            if problem:
                return Result("wrong", f"against ONNX Runtime's outputs: {problem}")
            return Result("onnxruntime", REFERENCE_DISAGREEMENTS[case.name])
    problem = compare_outputs(actual, case.outputs, names)
    return Result("wrong", problem) if problem else Result("pass")


def _onnx_runtime_outputs(case: Case) -> list[Any]:
    import onnxruntime

    session = onnxruntime.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(_input_names(case.model), case.inputs)))


def _input_names(model: bytes) -> list[str]:
    proto = onnx.load_model_from_string(model)
    weights = {t.name for t in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in weights]


def _case_dims(case: Case) -> dict[str, DimSpec]:
    """Each open input dimension's range, up to its size in the case's inputs (a size below 1 is
    given as it is, for the frontend to refuse)."""
    proto = onnx.load_model_from_string(case.model)
    arrays = dict(zip(_input_names(case.model), case.inputs))
    dims: dict[str, DimSpec] = {}
    for dim in open_dims(proto):
        array = arrays.get(dim.input)
        if isinstance(array, np.ndarray) and dim.axis < array.ndim:
            size = int(array.shape[dim.axis])
            dims.setdefault(dim.key, (1, size) if size >= 1 else size)
    return dims


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _output_names(model: bytes) -> list[str]:
    return [o.name for o in onnx.load_model_from_string(model).graph.output]


def compare_outputs(actual: Sequence[Any], expected: Sequence[Any], names: Sequence[str]) -> str | None:
    """What differs between the outputs and the expected ones, or None."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        problem = compare_output(np.asarray(a), np.asarray(e))
        if problem:
            return f"output {k} ({names[k] if k < len(names) else '?'!r}): {problem}"
    return None


def compare_output(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """Shape, dtype, then values: floats within `tolerance` (NaN where NaN), others exactly."""
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    floating = expected.dtype.kind in "fc" or str(expected.dtype) == "bfloat16"
    rtol = tolerance(str(expected.dtype)) if floating else 0.0
    if floating:  # bfloat16 (ml_dtypes') is no numpy float kind
        actual, expected = actual.astype(np.float64), expected.astype(np.float64)
    try:
        if floating:
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=ATOL)
        else:
            np.testing.assert_array_equal(actual, expected)
    except AssertionError:
        return _difference(actual, expected, floating, rtol)
    return None


def tolerance(dtype: str) -> float:
    """RTOL, or two units in the last place of a narrower float type: a half-precision result computed
    in float32 and rounded once can differ by one from the reference's, rounded at every step."""
    return max(RTOL, 2 * float(ml_dtypes.finfo(dtype).eps))


def _difference(actual: np.ndarray, expected: np.ndarray, floating: bool, rtol: float) -> str:
    """How many elements differ, and the first of them."""
    if floating:
        bad = ~np.isclose(actual, expected, rtol=rtol, atol=ATOL, equal_nan=True)
    else:
        bad = np.asarray(actual != expected)
    count = int(bad.sum())
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim and count else ()
    got, want = actual[first] if actual.ndim else actual, expected[first] if expected.ndim else expected
    text = f"{count} of {expected.size} elements differ; at {first}: {got!r}, expected {want!r}"
    if floating and count:
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        text += f" (max abs diff {np.nanmax(np.where(bad, diff, 0)):.4g})"
    return text


# Every case, in worker processes.


def run_cases(
    cases: Sequence[Case], *, jobs: int | None = None, timeout: float = CASE_TIMEOUT
) -> dict[str, Result]:
    """Each case's result, run in `jobs` worker processes (one per core by default), each case within
    `timeout` seconds (a new worker's start counts: well under a second); a worker that dies or hangs
    is replaced, and its case is a crash."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(cases)))
    context = multiprocessing.get_context("spawn")
    pending = list(reversed(cases))
    results: dict[str, Result] = {}
    workers = [_Worker(context) for _ in range(jobs)]
    try:
        while pending or any(w.case is not None for w in workers):
            for w in workers:
                if w.case is None and pending:
                    w.send(pending.pop(), timeout)
            _collect(workers, results, timeout)
    finally:
        for w in workers:
            w.stop()
    return results


class _Worker:
    """One worker process and the case it runs; restarted after a crash, a timeout, or enough cases."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self.case: Case | None = None
        self.deadline = 0.0
        self.done = 0

    def send(self, case: Case, timeout: float) -> None:
        if self.process is None or self.done >= CASES_PER_WORKER:
            self.stop()
            self.start()
        self.case, self.deadline = case, time.monotonic() + timeout
        try:
            assert self.conn is not None
            self.conn.send(case)
        except OSError:  # the worker died after its last case: its successor takes this one
            self.stop()
            self.start()
            assert self.conn is not None
            self.conn.send(case)

    def start(self) -> None:
        self.conn, child = self.context.Pipe()
        self.process = self.context.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()  # so that the worker's death reads as end of file here
        self.done = 0

    def receive(self) -> Result:
        """The result of the current case, or a crash if the worker died."""
        assert self.conn is not None and self.process is not None
        try:
            result = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(5)
            result = Result("crash", f"the worker process died (exit code {self.process.exitcode})")
            self.stop()
        self.done += 1
        return result

    def stop(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            self.process.join()
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn = None, None


def _collect(workers: list[_Worker], results: dict[str, Result], timeout: float) -> None:
    """Wait for the first result or deadline; record every finished or timed-out case."""
    busy = [w for w in workers if w.case is not None]
    now = time.monotonic()
    ready = wait([w.conn for w in busy if w.conn], timeout=max(0.0, min(w.deadline for w in busy) - now))
    now = time.monotonic()
    for w in busy:
        assert w.case is not None
        if w.conn in ready:
            results[w.case.name] = w.receive()
        elif now >= w.deadline:
            results[w.case.name] = Result("crash", f"timed out after {timeout:g} s")
            w.stop()
        else:
            continue
        w.case = None


def _serve(conn: Connection) -> None:
    """A worker's loop: run each case it is sent, send its result back."""
    warnings.simplefilter("ignore")
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        conn.send(run_case(case))


# Expectations.


def expectations(results: Mapping[str, Result]) -> dict[str, dict[str, str]]:
    """What the expectation file records of `results`: each case's outcome, a refusal's reason, and
    what went wrong in a wrong answer or a crash (bugs, which fail the test until they are fixed)."""
    return {name: _expectation(r) for name, r in sorted(results.items())}


def _expectation(result: Result) -> dict[str, str]:
    if result.outcome == "pass":
        return {"outcome": "pass"}
    if result.outcome in ("refused", "onnxruntime"):
        return {"outcome": result.outcome, "reason": _reason(result.detail)}
    return {"outcome": result.outcome, "detail": result.detail}


def _reason(detail: str) -> str:
    """A refusal's message without the list of supported operators that follows an unsupported one
    (it changes whenever an operator is added, and would repeat on every line of the file)."""
    return re.sub(r"; supported: .*$", "", detail)


def load_expected(path: Path = EXPECTED_PATH) -> dict[str, dict[str, str]]:
    return json.loads(path.read_text())


def write_expected(results: Mapping[str, Result], path: Path = EXPECTED_PATH) -> None:
    """Write the expectations, sorted, one case per line (readable diffs)."""
    lines = [f"  {json.dumps(n)}: {json.dumps(e, sort_keys=True)}" for n, e in expectations(results).items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def problems(results: Mapping[str, Result], expected: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Every way `results` fails the expectations, one line each: a wrong answer or a crash, an
    expected pass that does not pass, an expected refusal that passes, a case new or gone."""
    found = []
    for name in sorted(set(results) | set(expected)):
        if name not in expected:
            result = results[name]
            outcome = result.outcome if result.outcome == "pass" else f"{result.outcome}: {result.detail}"
            found.append(f"{name}: a new case ({outcome}), not in the expectations")
            continue
        if name not in results:
            found.append(f"{name}: in the expectations but no longer a case")
            continue
        found.extend(_problem(name, results[name], expected[name]["outcome"]))
    return found


def _problem(name: str, result: Result, outcome: str) -> Iterator[str]:
    if result.outcome in ("wrong", "crash"):
        yield f"{name}: {result.outcome.upper()}: {result.detail}"
    elif outcome == "pass" and result.outcome != "pass":
        yield f"{name}: expected to pass, {result.outcome}: {result.detail}"
    elif result.outcome != outcome:
        now = "passes" if result.outcome == "pass" else f"{result.outcome}: {result.detail}"
        yield f"{name}: expected {outcome}, now {now}: update the expectations ({WRITE_COMMAND})"


def report(results: Mapping[str, Result], cases: Sequence[Case], top: int = 30) -> str:
    """The counts per outcome, the operators with the most refused cases, and every wrong or crash."""
    counts = Counter(r.outcome for r in results.values())
    lines = [f"{len(results)} cases: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES)]
    ops = {c.name: c.op for c in cases}
    refused = Counter(ops.get(n, "?") for n, r in results.items() if r.outcome == "refused")
    lines.append(f"most refused operators (cases refused / cases), top {top}:")
    totals = Counter(ops.values())
    lines += [f"  {op:<32} {n:>4} / {totals[op]}" for op, n in refused.most_common(top)]
    reasons = Counter(_reason(r.detail) for r in results.values() if r.outcome == "refused")
    lines.append("most common refusals:")
    lines += [f"  {n:>4}  {_anonymous(reason)}" for reason, n in _top_reasons(reasons, 15)]
    for name, r in sorted(results.items()):
        if r.outcome in ("wrong", "crash"):
            lines.append(f"{r.outcome.upper()} {name} ({ops.get(name, '?')}): {r.detail}")
    return "\n".join(lines)


def _anonymous(reason: str) -> str:
    """A refusal without the node's name, so that the same refusal of many cases counts once."""
    return re.sub(r"^node '.*?' ", "node ", reason)


def _top_reasons(reasons: Counter[str], top: int) -> list[tuple[str, int]]:
    merged: Counter[str] = Counter()
    for reason, n in reasons.items():
        merged[_anonymous(reason)] += n
    return merged.most_common(top)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {EXPECTED_PATH.name}")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("cases", nargs="*", help="run only these cases")
    args = parser.parse_args(argv)
    if args.write and args.cases:
        parser.error("--write runs every case: name none")
    start = time.perf_counter()
    cases = discover(args.cases or None)
    results = run_cases(cases, jobs=args.jobs)
    print(report(results, cases))
    print(f"{time.perf_counter() - start:.0f} s")
    if args.write:
        write_expected(results)
        print(f"wrote {EXPECTED_PATH}")
    elif EXPECTED_PATH.exists():
        expected = load_expected()
        found = problems(results, {n: e for n, e in expected.items() if not args.cases or n in results})
        print("\n".join(found) or "as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
