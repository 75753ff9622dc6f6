"""The worker daemon against a coordinator played in memory (httpx's MockTransport): what it
re-measures, and how it delivers results the coordinator refuses or answers it cannot read."""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from itertools import pairwise

import httpx
import pytest

from runner.null import NullRunner
from runner.protocol import MESSAGE_LIMIT
from runner.results import (
    CUTOFF_RATIO,
    MIN_CUTOFF_SECS,
    MODEL_TIMING,
    Candidate,
    RunResult,
    Status,
    TimingConfig,
    TimingKind,
)
from runner.worker import Worker, WorkerConfig

SPEC = {"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}
Answer = Callable[[str, dict], httpx.Response | None]


def item(candidate_id: int, task_id: int, secs: float, best_secs: float | None = None) -> dict:
    """A leased candidate whose (null-runner) time is `secs`."""
    trace = {"secs": secs, "n": candidate_id}
    return {
        "id": candidate_id,
        "task_id": task_id,
        "spec": SPEC,
        "trace": trace,
        "best_secs": best_secs,
        "lease_expires_at": "2026-11-28T00:00:00Z",
    }


class FakeCoordinator:
    """The worker protocol in memory: each lease hands out the next batch, and the worker is told to
    stop once they are gone. `answer` may replace any reply (None: the normal one)."""

    def __init__(self, batches: list[list[dict]], answer: Answer = lambda path, body: None) -> None:
        self.batches, self.answer = list(batches), answer
        self.requests: list[tuple[str, dict]] = []
        self.accepted: list[dict] = []
        self.worker: Worker | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path, body = request.url.path, json.loads(request.content or b"{}")
        reply = self.answer(path, body) or self._reply(path, body)
        self.requests.append((path, body))  # when answered: the order the coordinator acts in
        return reply

    def _reply(self, path: str, body: dict) -> httpx.Response:
        if path == "/v1/workers":
            return httpx.Response(201, json={"id": 1, "lease_seconds": 60.0, "heartbeat_seconds": 60.0})
        if path.endswith("/lease"):
            if not self.batches:
                self.worker.stopping.set()
            return httpx.Response(200, json={"candidates": self.batches.pop(0) if self.batches else []})
        if path.endswith("/results"):
            self.accepted += body["results"]
            return httpx.Response(200, json={"outcomes": ["accepted"] * len(body["results"])})
        return httpx.Response(200, json={"count": 0})

    def paths(self, suffix: str) -> list[dict]:
        return [body for path, body in self.requests if path.endswith(suffix)]


def run(coordinator: FakeCoordinator, runner: object | None = None) -> int:
    config = WorkerConfig(
        coordinator_url="http://coordinator", token="t", idle_poll_s=0.01, max_backoff_s=0.1
    )
    worker = Worker(config, runner or NullRunner(lambda c: c.trace["secs"]))
    worker.coordinator.http = httpx.Client(transport=httpx.MockTransport(coordinator))
    coordinator.worker = worker
    return worker.run()


def test_each_candidate_is_measured_once_the_coordinator_arranges_any_remeasurement():
    """A would-be best is re-measured by a second lease the coordinator hands out (to any worker), not
    by the worker that found it: a worker's own second run would prove nothing of a forged first."""
    measured: list[int] = []
    runner = NullRunner(lambda c: measured.append(c.trace["n"]) or c.trace["secs"])
    coordinator = FakeCoordinator(
        [[item(1, task_id=1, secs=1e-3), item(2, task_id=2, secs=2e-3, best_secs=5e-3)]]
    )
    assert run(coordinator, runner) == 0
    assert measured == [1, 2] and [r["candidate_id"] for r in coordinator.accepted] == [1, 2]
    assert all("remeasured" not in r for r in coordinator.accepted)


def test_a_candidate_is_cut_off_by_the_best_it_was_leased_against():
    """A candidate leased with the best's time carries the cutoff beyond which its first call gets it
    one repeat (`cutoff_above`); one with no best yet is timed fully."""
    cutoffs: list[float | None] = []
    runner = NullRunner(lambda c: cutoffs.append(c.cutoff_secs) or c.trace["secs"])
    leased = [
        item(1, 1, secs=1e-3),
        item(2, 1, secs=1e-3, best_secs=1e-4),
        item(3, 1, secs=1e-3, best_secs=0.5),
    ]
    assert run(FakeCoordinator([leased]), runner) == 0
    assert cutoffs == [None, MIN_CUTOFF_SECS, 0.5 * CUTOFF_RATIO]


def test_a_second_lease_is_timed_beside_the_best_it_names_and_reports_both():
    """A would-be best's second lease names the best record's program: the worker times the two side
    by side and sends the best's times with the record's id; other candidates are timed alone."""
    sides: list[list[int]] = []

    class Recording(NullRunner):
        def run_side_by_side(self, candidates):
            sides.append([c.trace["n"] for c in candidates])
            return super().run_side_by_side(candidates)

    best_trace = {"secs": 4e-3, "n": 90}
    second = {**item(1, task_id=1, secs=1e-3), "versus": {"record_id": 7, "trace": best_trace}}
    coordinator = FakeCoordinator([[second, item(2, task_id=2, secs=2e-3)]])
    assert run(coordinator, Recording(lambda c: c.trace["secs"])) == 0
    assert sides == [[1, 90]]
    by_id = {r["candidate_id"]: r for r in coordinator.accepted}
    assert (by_id[1]["versus_record_id"], by_id[1]["versus_run_secs"]) == (7, [4e-3] * 3)
    assert by_id[1]["run_secs"] == [1e-3] * 3
    assert (by_id[2]["versus_record_id"], by_id[2]["versus_run_secs"]) == (None, [])


def test_a_candidate_is_timed_as_the_coordinator_asks_and_the_result_says_how():
    """A model's layer is leased with the timing of a forward pass; other candidates are timed the
    worker's way. Keys the worker does not know (a newer coordinator's) are left out."""
    asked: list[TimingConfig | None] = []
    runner = NullRunner(lambda c: asked.append(c.timing) or c.trace["secs"])
    layer = {**item(1, task_id=1, secs=1e-3), "timing": {**asdict(MODEL_TIMING), "newer": True}}
    coordinator = FakeCoordinator([[layer, item(2, task_id=2, secs=1e-3)]])
    assert run(coordinator, runner) == 0
    assert asked == [MODEL_TIMING, None]
    assert [r["timing"] for r in coordinator.accepted] == [asdict(MODEL_TIMING), asdict(TimingConfig())]


def test_a_timings_kind_says_what_its_time_means():
    assert TimingConfig().kind == TimingKind.WARM
    assert TimingConfig(flush_cache=True).kind == TimingKind.COLD
    assert MODEL_TIMING.kind == TimingKind.LAYER
    assert TimingConfig(repeat=3, number=7).kind == TimingKind.WARM  # how many repeats does not matter


def test_a_worker_of_hardware_awaiting_approval_says_so(caplog: pytest.LogCaptureFixture):
    registered = {"id": 1, "lease_seconds": 60.0, "heartbeat_seconds": 60.0, "hardware_approved": False}
    coordinator = FakeCoordinator(
        [], lambda path, body: httpx.Response(201, json=registered) if path == "/v1/workers" else None
    )
    with caplog.at_level("WARNING", logger="tuner.worker"):
        assert run(coordinator) == 0
    assert any("awaits an admin's approval" in r.getMessage() for r in caplog.records)


def test_a_batch_over_the_size_limit_is_sent_in_halves():
    too_large = httpx.Response(413, json={"detail": "request body over the limit"})
    coordinator = FakeCoordinator(
        [[item(n, 1, 1e-3) for n in range(1, 5)]],
        lambda path, body: too_large if len(body.get("results", [])) > 2 else None,
    )
    assert run(coordinator) == 0
    assert [len(b["results"]) for b in coordinator.paths("/results")] == [4, 2, 2]
    assert sorted(r["candidate_id"] for r in coordinator.accepted) == [1, 2, 3, 4]


def test_a_refused_result_is_sent_as_a_runtime_error_and_the_rest_as_they_are():
    def refuse_2(path: str, body: dict) -> httpx.Response | None:
        if any(r["candidate_id"] == 2 and r["status"] == "ok" for r in body.get("results", [])):
            return httpx.Response(422, json={"detail": [{"loc": ["body", "results", 0], "msg": "no"}]})
        return None

    coordinator = FakeCoordinator([[item(n, 1, 1e-3) for n in range(1, 4)]], refuse_2)
    assert run(coordinator) == 0
    by_id = {r["candidate_id"]: r for r in coordinator.accepted}
    assert [by_id[n]["status"] for n in (1, 2, 3)] == ["ok", "runtime_error", "ok"]
    assert (
        by_id[2]["message"].startswith("the coordinator refused the result")
        and len(by_id[2]["message"]) <= 500
    )


class Crashing:
    """Every candidate crashes with a long message holding a NUL (a program's own output, say)."""

    def iter_run(self, candidates: list[Candidate]):
        for _ in candidates:
            yield RunResult(Status.RUNTIME_ERROR, message="SIGSEGV\x00" + "x" * (2 * MESSAGE_LIMIT))

    def close(self) -> None:
        pass


def test_messages_are_cleaned_before_they_are_sent():
    coordinator = FakeCoordinator([[item(1, 1, 1e-3)]])
    assert run(coordinator, Crashing()) == 0
    (result,) = coordinator.accepted
    assert result["message"].startswith("SIGSEGVxxx") and len(result["message"]) == MESSAGE_LIMIT


def test_a_time_the_protocol_cannot_carry_is_reported_as_a_runtime_error():
    """A broken clock's 0 s is not a time (the coordinator refuses under a picosecond): the candidate
    is done as an error saying why, not a crash of the worker nor a lease that goes round the fleet."""
    coordinator = FakeCoordinator([[item(1, 1, 0.0), item(2, 1, 1e-3)]])
    assert run(coordinator) == 0
    by_id = {r["candidate_id"]: r for r in coordinator.accepted}
    assert [by_id[n]["status"] for n in (1, 2)] == ["runtime_error", "ok"]
    assert (
        by_id[1]["message"].startswith("the measurement cannot be reported")
        and "run_secs" in by_id[1]["message"]
    )


def test_an_answer_that_is_not_its_model_is_retried():
    """A lease answer without its candidates' fields (another version's, a proxy's JSON) is not read
    as a batch: the worker asks again."""
    pages = iter([httpx.Response(200, json={"candidates": [{"id": 1}]})])
    coordinator = FakeCoordinator(
        [[item(1, 1, 1e-3)]], lambda path, body: next(pages, None) if path.endswith("/lease") else None
    )
    assert run(coordinator) == 0
    assert [r["candidate_id"] for r in coordinator.accepted] == [1]


def test_an_answer_that_is_not_json_is_retried():
    pages = iter([httpx.Response(200, text="<html>a proxy's page</html>")])
    coordinator = FakeCoordinator(
        [[item(1, 1, 1e-3)]], lambda path, body: next(pages, None) if path.endswith("/lease") else None
    )
    assert run(coordinator) == 0
    assert [r["candidate_id"] for r in coordinator.accepted] == [1]


@pytest.mark.parametrize("status", [401, 404])
def test_no_heartbeat_follows_the_goodbye_when_the_coordinator_refuses_us(status: int):
    def refuse(path: str, body: dict) -> httpx.Response | None:
        if path == "/v1/workers":
            return httpx.Response(201, json={"id": 1, "lease_seconds": 60.0, "heartbeat_seconds": 0.01})
        if path.endswith("/heartbeat"):
            time.sleep(0.05)  # slow: one is always on its way when the worker stops
        if path.endswith("/lease"):
            time.sleep(0.05)
            return httpx.Response(status, json={"detail": "no"})
        return None

    coordinator = FakeCoordinator([], refuse)
    assert run(coordinator) == 2
    time.sleep(0.1)
    assert coordinator.paths("/heartbeat") and coordinator.requests[-1][0] == "/v1/workers/1/stop"
    assert coordinator.worker.stopping.is_set()


def test_a_worker_fails_over_to_the_next_coordinator_and_registers_there_if_unknown():
    """FakeCoordinator a goes away after the first batch; b serves another database (it answers 404 for
    worker 1): the worker moves to b, registers there as worker 7, and goes on."""
    a = FakeCoordinator([[item(1, 1, 1e-3)], [item(2, 1, 1e-3)]])
    b = FakeCoordinator([[item(3, 1, 1e-3)]])
    calls: list[str] = []

    def route(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.url.host} {request.url.path}")
        if request.url.host == "a":
            if a.paths("/results"):  # a answered one batch, then went away
                raise httpx.ConnectError("connection refused")
            return a(request)
        if request.url.path.startswith("/v1/workers/1/"):
            return httpx.Response(404, json={"detail": "no worker 1"})
        if request.url.path == "/v1/workers":
            b.requests.append((request.url.path, {}))
            return httpx.Response(201, json={"id": 7, "lease_seconds": 60.0, "heartbeat_seconds": 60.0})
        return b(request)

    config = WorkerConfig(
        coordinator_url="http://a, http://b/", token="t", idle_poll_s=0.01, max_backoff_s=0.1
    )
    worker = Worker(config, NullRunner(lambda c: c.trace["secs"]))
    worker.coordinator.http = httpx.Client(transport=httpx.MockTransport(route))
    a.worker = b.worker = worker
    assert worker.run() == 0
    assert [r["candidate_id"] for r in a.accepted] == [1]
    assert [r["candidate_id"] for r in b.accepted] == [3]
    assert calls[:2] == ["a /v1/workers", "a /v1/workers/1/lease"]
    assert "b /v1/workers" in calls and calls[-1] == "b /v1/workers/7/stop"
    assert worker.coordinator.url == "http://b" and worker.coordinator.worker_id == 7


def test_every_coordinator_away_means_backoff_not_a_busy_loop():
    """With both coordinators unreachable the worker tries each once, then waits, doubling the wait."""
    tries: list[float] = []

    def away(request: httpx.Request) -> httpx.Response:
        tries.append(time.monotonic())
        raise httpx.ConnectError("connection refused")

    config = WorkerConfig(coordinator_url="http://a,http://b", token="t", max_backoff_s=0.4)
    worker = Worker(config, NullRunner())
    worker.coordinator.http = httpx.Client(transport=httpx.MockTransport(away))
    threading.Timer(1.5, worker.stopping.set).start()
    assert worker.run() == 2  # stopped before any coordinator could be reached
    gaps = [later - earlier for earlier, later in pairwise(tries)]
    # In pairs, a then b at once; between pairs 0.25 s, then 0.4 s (the longest); the last wait is cut
    # short by the stop, and one more pair follows it.
    assert len(tries) <= 12 and max(gaps[::2]) < 0.1 and min(gaps[1:-2:2]) >= 0.2, gaps


def test_heartbeats_name_the_leases_the_worker_holds():
    """The coordinator renews only the leases a heartbeat names, so a lease whose answer was lost
    expires: each heartbeat names the batch being measured, and nothing once it is submitted."""

    def fast_beats(path: str, body: dict) -> httpx.Response | None:
        if path == "/v1/workers":
            return httpx.Response(201, json={"id": 1, "lease_seconds": 60.0, "heartbeat_seconds": 0.01})
        return None

    coordinator = FakeCoordinator([[item(1, 1, 1e-3), item(2, 1, 1e-3)], [item(3, 1, 1e-3)]], fast_beats)
    assert run(coordinator, NullRunner(lambda c: time.sleep(0.1) or c.trace["secs"])) == 0
    named = [tuple(body["holding"]) for body in coordinator.paths("/heartbeat")]
    assert set(named) <= {(), (1, 2), (3,)} and {(1, 2), (3,)} <= set(named)
