"""LocalRunner: every candidate comes back as a result, whatever it does; the runner survives."""

import dataclasses
import importlib
import resource

import numpy as np
import pytest

from compiler import Schedule
from compiler.build import compile_kernel
from compiler.ir import Allocate, Binary, Block, BufferStore, Const, For, Load, PrimFunc, SeqStmt, Var, const
from compiler.schedule_rules import RuleConfig
from compiler.target import Target
from compiler.visit import map_blocks
from compiler.workloads import workload_from_spec
from compiler.workloads.primfunc_spec import primfunc_spec
from runner import MODEL_TIMING, Candidate, LocalRunner, LocalRunnerConfig, Status, TimingConfig, local
from runner.results import BuildResult
from tests.compiler.workloads.test_primfunc_spec import fused_conv2d_add_relu
from tuner.search.space import rule_space

SPEC = {"op": "matmul", "params": {"M": 64, "N": 48, "K": 40}, "dtype": "float32"}


def tiled_trace(inner: int) -> dict:
    workload = workload_from_spec(SPEC)
    sch = Schedule(workload.func)
    block = sch.get_child_blocks(sch.get_block("root"))[0]
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, inner])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    return sch.trace.to_json()


@pytest.fixture(scope="module")
def runner():
    config = LocalRunnerConfig(
        timing=TimingConfig(repeat=3, min_repeat_ms=1), run_timeout_s=20, build_timeout_s=60
    )
    with LocalRunner(config, Target.host()) as r:
        yield r


def _crafted(body_for) -> PrimFunc:
    """A program with the workload's parameters but a body of our choosing (for failure cases)."""
    func = workload_from_spec(SPEC).func
    return PrimFunc(func.name, func.params, body_for(func.params))


def test_good_candidates_are_timed(runner):
    results = runner.run([Candidate(SPEC, tiled_trace(16)), Candidate(SPEC, tiled_trace(8))])
    for r in results:
        assert r.status is Status.OK, r.message
        assert len(r.run_secs) == 3 and all(s > 0 for s in r.run_secs)
        assert r.build_secs > 0


def test_a_candidate_may_ask_for_its_own_timing(runner):
    """A model's layer comes with the timing of a forward pass: 9 single calls, caches evicted."""
    results = runner.run([Candidate(SPEC, tiled_trace(16), MODEL_TIMING), Candidate(SPEC, tiled_trace(16))])
    assert [r.status for r in results] == [Status.OK, Status.OK]
    assert [len(r.run_secs) for r in results] == [MODEL_TIMING.repeat, runner.timing.repeat]


def test_a_candidate_slower_than_its_cutoff_is_timed_once(runner):
    """A candidate whose first call outlasts its cutoff (far slower than the best it competes with)
    is still checked and timed, for one repeat; within its cutoff, or with none, fully."""
    trace = tiled_trace(16)
    results = runner.run(
        [
            Candidate(SPEC, trace, cutoff_secs=1e-9),
            Candidate(SPEC, trace, cutoff_secs=10.0),
            Candidate(SPEC, trace),
        ]
    )
    assert [r.status for r in results] == [Status.OK] * 3
    assert [len(r.run_secs) for r in results] == [1, 3, 3]
    wrong = _crafted(
        lambda params: For(Var("i"), 1, BufferStore(params[2], const(0.0, "float32"), (const(0), const(0))))
    )
    built = BuildResult(Status.OK, compile_kernel(wrong, Target.host()), "", 0.0)
    (checked,) = runner._measurer.measure([Candidate(SPEC, {})], [built], cutoff_secs=1e-9)
    assert checked.status is Status.WRONG_RESULT


def test_candidates_timed_side_by_side_are_each_checked_and_timed(runner):
    """Side by side, each candidate is verified on its own: a wrong one is recorded as such and the
    others are still timed; a build error is its own result too."""
    wrong = _crafted(
        lambda params: For(Var("i"), 1, BufferStore(params[2], const(0.0, "float32"), (const(0), const(0))))
    )
    broken = tiled_trace(16)
    broken["instructions"][3]["args"]["factors"] = [2, 2]
    good = [Candidate(SPEC, tiled_trace(16)), Candidate(SPEC, tiled_trace(8))]
    results = runner.run_side_by_side([good[0], Candidate(SPEC, broken), good[1]])
    assert [r.status for r in results] == [Status.OK, Status.BUILD_ERROR, Status.OK]
    assert [len(r.run_secs) for r in results] == [3, 0, 3]
    built = [
        BuildResult(Status.OK, compile_kernel(f, Target.host()), "", 0.0)
        for f in (wrong, workload_from_spec(SPEC).func)
    ]
    checked = runner._measurer.measure([Candidate(SPEC, {})] * 2, built)
    assert [r.status for r in checked] == [Status.WRONG_RESULT, Status.OK]
    with pytest.raises(ValueError, match="one workload"):
        runner.run_side_by_side([good[0], Candidate({**SPEC, "params": {"M": 8, "N": 48, "K": 40}}, {})])


def test_a_program_just_built_is_timed_again_without_a_build(runner, monkeypatch):
    """A would-be best is timed again beside the best right after its first run: both were built
    moments ago, and neither is built again."""
    best, new = Candidate(SPEC, tiled_trace(16)), Candidate(SPEC, tiled_trace(8))
    runner.run([best])
    runner.run([new])

    def no_pool():
        raise AssertionError("built again")

    monkeypatch.setattr(runner, "_get_pool", no_pool)
    assert [r.status for r in runner.run_side_by_side([new, best])] == [Status.OK, Status.OK]


def test_schedule_error_is_a_build_error(runner):
    trace = tiled_trace(16)
    trace["instructions"][3]["args"]["factors"] = [2, 2]  # covers 4 of the 48 iterations
    (result,) = runner.run([Candidate(SPEC, trace)])
    assert result.status is Status.BUILD_ERROR
    assert "ScheduleError" in result.message and "cover" in result.message


def test_bad_spec_is_a_build_error(runner):
    (result,) = runner.run(
        [Candidate({"op": "matmul", "params": {"M": -1}}, {"version": 1, "instructions": []})]
    )
    assert result.status is Status.BUILD_ERROR and "params" in result.message


def _measure(runner, func, spec=SPEC):
    built = BuildResult(Status.OK, compile_kernel(func, Target.host()), "", 0.0)
    (result,) = runner._measurer.measure([Candidate(spec, {})], [built])
    return result


def test_wrong_numbers_are_caught(runner):
    def zeros(params):
        _, _, c = params
        i, j = Var("i"), Var("j")
        return For(i, c.shape[0], For(j, c.shape[1], BufferStore(c, const(0.0, "float32"), (i, j))))

    result = _measure(runner, _crafted(zeros))
    assert result.status is Status.WRONG_RESULT and "differ" in result.message


def test_unwritten_output_is_caught(runner):
    def half(params):
        _, _, c = params
        i, j = Var("i"), Var("j")
        return For(i, c.shape[0] // 2, For(j, c.shape[1], BufferStore(c, const(0.0, "float32"), (i, j))))

    result = _measure(runner, _crafted(half))
    assert result.status is Status.WRONG_RESULT and "never written" in result.message


def test_segfault_hang_and_memory_exhaustion_leave_the_runner_alive(runner):
    def segfault(params):
        _, _, c = params
        return BufferStore(c, const(1.0, "float32"), (Const(1 << 40, "int64"), const(0)))

    def hang(params):
        _, _, c = params
        i = Var("i")
        return For(i, 1 << 62, BufferStore(c, const(1.0, "float32"), (i % 64, const(0))))

    def exhaust(params):
        a, _, c = params
        huge = type(c)("huge", (1 << 22, 1 << 14), "float32")  # 256 GiB: more than the memory limit
        i, j = Var("i"), Var("j")
        fill = For(i, 64, BufferStore(huge, Load(a, (i, const(0))), (i * (1 << 15), const(0))))
        use = For(i, 64, For(j, 48, BufferStore(c, Load(huge, ((i * 7 % 64) * (1 << 15), const(0))), (i, j))))
        return Allocate(huge, SeqStmt((fill, use)))

    crashed = _measure(runner, _crafted(segfault))
    assert crashed.status is Status.RUNTIME_ERROR and "SIGSEGV" in crashed.message
    runner._measurer.config = LocalRunnerConfig(run_timeout_s=2)
    hung = _measure(runner, _crafted(hang))
    assert hung.status is Status.TIMEOUT
    runner._measurer.config = LocalRunnerConfig(run_timeout_s=20)
    exhausted = _measure(runner, _crafted(exhaust))
    assert exhausted.status is Status.RUNTIME_ERROR and "out of memory" in exhausted.message
    (after,) = runner.run([Candidate(SPEC, tiled_trace(16))])
    assert after.status is Status.OK


def test_reference_matches_runner_inputs():
    workload = workload_from_spec(SPEC)
    a, b = workload.random_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(workload.reference(a, b)[0], a @ b, rtol=1e-5)


def test_a_measurement_process_killed_between_candidates_is_replaced(runner):
    (first,) = runner.run([Candidate(SPEC, tiled_trace(16))])
    assert first.status is Status.OK
    process = runner._measurer.process
    process.kill()  # as a SIGSEGV or the OOM killer would, while it waits for the next candidate
    process.join()
    (after,) = runner.run([Candidate(SPEC, tiled_trace(8))])
    assert after.status is Status.OK, after.message
    assert runner._measurer.process is not process


def test_a_fused_primfunc_is_measured_and_checked_against_its_interpreted_reference(runner):
    """A fused conv2d + bias + relu travels as data: the workers rebuild it from the spec, replay a
    trace the tuner's space samples, and check the kernel against the function's own reference."""
    spec = primfunc_spec(fused_conv2d_add_relu(), 3)
    sch = Schedule(workload_from_spec(spec).func, seed=3)
    rule_space(RuleConfig.for_target(Target.host()))(sch)
    (result,) = runner.run([Candidate(spec, sch.trace.to_json())])
    assert result.status is Status.OK, result.message

    def no_relu(block: Block) -> Block:
        value = block.body.value
        if block.name != "T_relu":
            return block
        assert isinstance(value, Binary)
        return dataclasses.replace(block, body=dataclasses.replace(block.body, value=value.a))

    func = workload_from_spec(spec).func
    wrong = _measure(runner, dataclasses.replace(func, body=map_blocks(func.body, no_relu)), spec)
    assert wrong.status is Status.WRONG_RESULT and "T_relu" in wrong.message


class ScriptedConnection:
    """The parent's end of the measurement pipe, as a list of requests and a list of replies."""

    def __init__(self, requests: list) -> None:
        self.requests = list(requests)
        self.replies: list = []

    def recv(self):
        if not self.requests:
            raise EOFError
        return self.requests.pop(0)

    def send(self, reply) -> None:
        self.replies.append(reply)


def test_the_first_candidate_of_a_workload_runs_untimed_before_it_is_timed(monkeypatch):
    """A measurement process timed each workload's first candidate 2-40x slow until the kernel had
    run for some ms; the untimed warm-up runs once per workload, not per candidate."""
    calls = []

    def recording_evaluate(kernels, args, number=1, repeat=5, min_repeat_ms=0.0, *rest):
        calls.append((repeat, min_repeat_ms))
        return [[1e-6] * repeat for _ in kernels]

    monkeypatch.setattr(
        importlib.import_module("runner.evaluate"), "evaluate_side_by_side", recording_evaluate
    )
    monkeypatch.setattr(resource, "setrlimit", lambda *args: None)
    monkeypatch.setattr(local, "_ignore_sigint", lambda: None)
    compiled = compile_kernel(workload_from_spec(SPEC).func, Target.host())
    other = {"op": "matmul", "params": {"M": 8, "N": 16, "K": 4}, "dtype": "float32"}
    other_compiled = compile_kernel(workload_from_spec(other).func, Target.host())
    timing = TimingConfig(repeat=3, min_repeat_ms=1)
    conn = ScriptedConnection(
        [
            (SPEC, [compiled], timing, None),
            (SPEC, [compiled], timing, None),
            (other, [other_compiled], timing, None),
        ]
    )
    local.measure_loop(conn, 1 << 40, seed=0)
    assert [status for ((status, _, _),) in conn.replies] == [Status.OK] * 3
    warm_up = (1, local.WARM_UP_MS)
    assert calls == [warm_up, (3, 1), (3, 1), warm_up, (3, 1)]


def test_a_process_cuts_off_a_candidate_far_slower_than_the_quickest_it_timed(monkeypatch):
    """A task's first batch has no best to cut off by: the measurement process keeps the quickest
    median it has timed per workload and timing, and cuts off by that too (here at any first call,
    once one is known); another workload or another timing starts afresh."""
    repeats = []

    def recording_evaluate(kernels, args, number=1, repeat=5, min_repeat_ms=0.0, *rest):
        repeats.append(repeat)
        return [[1e-3] * repeat for _ in kernels]

    monkeypatch.setattr(
        importlib.import_module("runner.evaluate"), "evaluate_side_by_side", recording_evaluate
    )
    monkeypatch.setattr(local, "cutoff_above", lambda best: None if best is None else 0.0)
    monkeypatch.setattr(resource, "setrlimit", lambda *args: None)
    monkeypatch.setattr(local, "_ignore_sigint", lambda: None)
    compiled = compile_kernel(workload_from_spec(SPEC).func, Target.host())
    other = {"op": "matmul", "params": {"M": 8, "N": 16, "K": 4}, "dtype": "float32"}
    other_compiled = compile_kernel(workload_from_spec(other).func, Target.host())
    timing, cold = TimingConfig(repeat=3, min_repeat_ms=1), MODEL_TIMING
    conn = ScriptedConnection(
        [
            (SPEC, [compiled], timing, None),
            (SPEC, [compiled], timing, None),
            (SPEC, [compiled], cold, None),
            (other, [other_compiled], timing, None),
            (other, [other_compiled], timing, 10.0),
        ]
    )
    local.measure_loop(conn, 1 << 40, seed=0)
    warm_up = 1
    assert repeats == [warm_up, 3, 1, 9, warm_up, 3, 1]
