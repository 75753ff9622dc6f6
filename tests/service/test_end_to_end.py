"""The service end to end, and under faults, with real processes on loopback: `tuner serve` and
`tuner worker` daemons that really build and time candidates, on SQLite and on PostgreSQL.

Faults: a worker killed with SIGKILL while it holds leases, the coordinator killed mid-task and
started again, a measurement process that dies of SIGSEGV in the middle of a candidate, and a worker
that submits the same results twice. Every task must still complete with exactly one record per
trial: nothing lost, nothing duplicated.
"""

import io
import os
import signal
import tarfile
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlalchemy import func, select

from bench.proc import search_loop_pid
from compiler import Trace, build
from compiler.graph import load_library
from compiler.workloads import workload_from_spec
from tests.service.onnx_models import mlp, reference
from tests.service.processes import Coordinator, start_worker, wait_until
from tuner.database import Database
from tuner.database.schema import CandidateRow, RecordRow
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.schemas import TaskDetail
from tuner.service.settings import Settings
from tuner.service.task_loop import SEARCH_NICENESS

SPEC = {"op": "matmul", "params": {"M": 48, "N": 64, "K": 32}}
FAST = ("--repeat", "2", "--min-repeat-ms", "1")
# About a second of timing per candidate: long enough to be caught in the middle of one.
SLOW = ("--repeat", "2", "--min-repeat-ms", "300")


@pytest.fixture
def tokens(settings: Settings) -> dict[str, str]:
    with Database.open(settings.database_url) as db:
        return {role: create_token(db, role=role, name=role)[1] for role in ("admin", "worker")}


@pytest.fixture
def service(settings: Settings, tmp_path: Path):
    """A running coordinator; stopped (and its log shown) at the end."""
    coordinator = Coordinator(settings, tmp_path).start()
    try:
        yield coordinator
    finally:
        if coordinator.process and coordinator.process.popen.poll() is None:
            coordinator.stop()


def wait_for_workers(api: Client, n: int) -> None:
    """Wait for `n` live workers, then approve their hardware as the operator does (`api` is an
    admin's): a kind of machine registered with a worker token is no task's target until then."""
    wait_until(lambda: sum(w["alive"] for w in api.http.get("/v1/workers").json()) >= n, 60, f"{n} workers")
    for hardware in api.http.get("/v1/hardware").json():
        if not hardware["approved"]:
            api.http.post(f"/v1/hardware/{hardware['id']}/approve").raise_for_status()


def wait_for_task(api: Client, task_id: int, timeout: float = 240) -> TaskDetail:
    last: list[TaskDetail] = []

    def finished() -> TaskDetail | None:
        last[:] = [api.task(task_id)]
        return last[0] if last[0].status in ("done", "failed", "cancelled") else None

    try:
        return wait_until(finished, timeout, f"task {task_id} to finish", interval=0.25)
    except AssertionError as e:
        if not last:
            raise
        task = last[0]
        seen = f"{task.status}, {task.trials_done}/{task.trials} trials, {task.queue}"
        raise AssertionError(f"{e}; last seen: {seen}") from None


def assert_complete(settings: Settings, task: TaskDetail, trials: int) -> None:
    """Done, with exactly one record per trial: one per candidate, every candidate done, no trace twice."""
    assert task.status == "done", task
    assert task.trials_done == trials
    with Database.open(settings.database_url) as db:
        records = db.task_records(task.id)
        with db.transaction() as session:
            states = dict(
                session.execute(
                    select(CandidateRow.status, func.count())
                    .where(CandidateRow.task_id == task.id)
                    .group_by(CandidateRow.status)
                ).all()
            )
            linked = session.scalar(
                select(func.count(func.distinct(RecordRow.candidate_id))).where(RecordRow.task_id == task.id)
            )
    assert len(records) == trials and len({r.trace_hash for r in records}) == trials
    assert states == {"done": trials} and linked == trials


def test_the_search_loop_yields_its_cores_to_the_api_and_to_a_worker_beside_it(service):
    """A worker on the coordinator's machine timed kernels up to 8x slow while the search proposed."""
    coordinator = service.process.pid
    loop = wait_until(lambda: search_loop_pid(coordinator), 60, "the search loop")
    niceness = min(os.getpriority(os.PRIO_PROCESS, coordinator) + SEARCH_NICENESS, 19)
    # The child lowers its priority once started (spawn imports the modules first).
    wait_until(lambda: os.getpriority(os.PRIO_PROCESS, loop) == niceness, 60, f"niceness {niceness}")


def test_sigterm_stops_the_coordinator_whatever_its_search_loop_did(service):
    """The probe killed the search loop with SIGKILL, and `tuner serve` then never exited on SIGTERM:
    the stop set a multiprocessing Event whose waiter had died in its wait. The loop is told to stop
    by a signal now."""
    coordinator = service.process.pid
    loop = wait_until(lambda: search_loop_pid(coordinator), 60, "the search loop")
    time.sleep(1.0)  # the loop waits between its ticks
    os.kill(loop, signal.SIGKILL)
    start = time.monotonic()
    assert service.stop() == 0, service.process.output()[-2000:]
    assert time.monotonic() - start < 20


def test_a_search_loop_that_dies_is_replaced_and_tasks_still_advance(settings, service, tokens, tmp_path):
    """The kernel's OOM killer or a crash in native code may end the search loop's process: the
    coordinator starts another, or its API would take tasks that never advance."""
    coordinator = service.process.pid
    first = wait_until(lambda: search_loop_pid(coordinator), 60, "the search loop")
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: search_loop_pid(coordinator) not in (None, first), 60, "another search loop")
    worker = start_worker(service, tokens["worker"], "w", tmp_path, *FAST)
    try:
        with Client(service.url, tokens["admin"]) as api:
            wait_for_workers(api, 1)
            task = wait_for_task(api, api.submit(SPEC, trials=4, strategy="random").id)
            assert_complete(settings, task, 4)
    finally:
        assert worker.stop() == 0, worker.output()[-2000:]
    assert "the search loop died (exit code -9); starting another" in service.process.output()


def test_two_workers_tune_a_task_and_the_best_kernel_computes_right(settings, service, tokens, tmp_path):
    workers = [start_worker(service, tokens["worker"], f"w{i}", tmp_path, *FAST) for i in range(2)]
    try:
        with Client(service.url, tokens["admin"]) as api:
            wait_for_workers(api, 2)
            task = api.submit(SPEC, trials=10, strategy="random")
            task = wait_for_task(api, task.id)
            assert_complete(settings, task, 10)
            assert task.best and len(task.curve) == 10 and task.best.gflops == max(task.curve)
            (best,) = api.best(SPEC)
            assert best.id == task.best.record_id and best.status == "ok"
            # A worker that submits the same result again (its first answer was lost): stored once.
            candidate_id, holder = best_candidate(settings, best.id)
            again = {"results": [{"candidate_id": candidate_id, "status": "ok", "run_secs": [1e-9]}]}
            reply = httpx.post(
                f"{service.url}/v1/workers/{holder}/results",
                json=again,
                headers={"Authorization": f"Bearer {tokens['admin']}"},
            )
            assert reply.json() == {"outcomes": ["duplicate"]}
            assert api.best(SPEC)[0].median_secs == best.median_secs
        workload = workload_from_spec(SPEC)
        kernel = build(Trace.from_json(best.trace).apply(workload.func).func, listings=False)
        a, b = workload.random_inputs(np.random.default_rng(1))
        (c,) = workload.empty_outputs()
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        names = {r.worker.split("#")[0] for r in Database.open(settings.database_url).task_records(task.id)}
        assert names <= {"w0", "w1"}
    finally:
        codes = [w.stop() for w in workers]
    assert codes == [0, 0], [w.output()[-2000:] for w in workers]


def best_candidate(settings: Settings, record_id: int) -> tuple[int, int]:
    """The candidate a record measured, and the worker whose lease delivered it (a best record's
    candidate: the worker that re-measured it)."""
    with Database.open(settings.database_url) as db:
        candidate_id = db.get_record(record_id).candidate_id
        with db.transaction() as session:
            return candidate_id, session.get(CandidateRow, candidate_id).worker_id


def test_a_worker_killed_while_holding_leases(settings, service, tokens, tmp_path):
    doomed = start_worker(service, tokens["worker"], "doomed", tmp_path, "--batch", "4", *SLOW)
    survivor = None
    try:
        with Client(service.url, tokens["admin"]) as api:
            wait_for_workers(api, 1)
            task = api.submit(SPEC, trials=8, strategy="random")
            wait_until(lambda: api.task(task.id).queue.leased >= 2, 60, "leases held by the doomed worker")
            doomed.stop(signal.SIGKILL)
            survivor = start_worker(service, tokens["worker"], "survivor", tmp_path, *FAST)
            task = wait_for_task(api, task.id)
            assert_complete(settings, task, 8)
    finally:
        if survivor is not None:
            assert survivor.stop() == 0, survivor.output()[-2000:]


def test_the_coordinator_killed_mid_task_and_restarted(settings, service, tokens, tmp_path):
    worker = start_worker(service, tokens["worker"], "w", tmp_path, *FAST)
    try:
        with Client(service.url, tokens["admin"]) as api:
            wait_for_workers(api, 1)
            task = api.submit(SPEC, trials=12, strategy="random")
            wait_until(lambda: api.task(task.id).trials_done >= 3, 120, "a few results")
        service.stop(signal.SIGKILL)  # no clean shutdown: its claim on the task must lapse
        service.start()
        with Client(service.url, tokens["admin"]) as api:
            task = wait_for_task(api, task.id)
            assert_complete(settings, task, 12)
    finally:
        assert worker.stop() == 0, worker.output()[-2000:]
    assert "Traceback" not in worker.output()


def test_a_measurement_that_dies_of_sigsegv_is_recorded_and_the_worker_goes_on(
    settings, service, tokens, tmp_path
):
    worker = start_worker(service, tokens["worker"], "w", tmp_path, "--batch", "2", *SLOW)
    try:
        with Client(service.url, tokens["admin"]) as api:
            wait_for_workers(api, 1)
            task = api.submit(SPEC, trials=6, strategy="random")

            def crashed() -> bool:
                for pid in measurement_processes(worker.pid):
                    os.kill(pid, signal.SIGSEGV)
                return any("SIGSEGV" in r.message for r in records_of(settings, task.id))

            wait_until(crashed, 120, "a record of a measurement killed by SIGSEGV", interval=0.7)
            task = wait_for_task(api, task.id)
            assert_complete(settings, task, 6)
        crashes = [r for r in records_of(settings, task.id) if r.status == "runtime_error"]
        assert crashes and all("SIGSEGV" in r.message for r in crashes)
        assert worker.popen.poll() is None  # still serving
    finally:
        assert worker.stop() == 0, worker.output()[-2000:]


def records_of(settings: Settings, task_id: int) -> list:
    with Database.open(settings.database_url) as db:
        return db.task_records(task_id)


def measurement_processes(worker_pid: int) -> list[int]:
    """The worker's measurement process: the child that limits its address space (build workers do not)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            limits = (entry / "limits").read_text()
        except (OSError, IndexError, ValueError):
            continue
        address_space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
        if ppid == worker_pid and "unlimited" not in address_space:
            found.append(int(entry.name))
    return found


def test_a_model_is_tuned_by_a_real_worker_and_its_artifact_computes_the_model(
    settings, service, tokens, tmp_path
):
    """`tuner serve` and a `tuner worker` that really builds and times the layers' candidates: the
    model ends with its budget measured, and its artifact, built from those records, runs the MLP."""
    worker = start_worker(service, tokens["worker"], "w0", tmp_path, *FAST)
    try:
        with Client(service.url, tokens["admin"]) as api:
            wait_for_workers(api, 1)
            model = api.submit_model(mlp(), trials=8, name="mlp")
            done = wait_until(
                lambda: (m := api.model(model.id)).status not in ("pending", "running") and m,
                240,
                f"model {model.id} to end",
                interval=0.5,
            )
            assert done.status == "done" and done.trials_done == 8, done
            assert done.estimated_secs and all(layer.best_secs for layer in done.layers)
            with tarfile.open(fileobj=io.BytesIO(api.model_artifact(model.id))) as tar:
                tar.extractall(tmp_path / "artifact", filter="data")
        x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
        (y,) = load_library(tmp_path / "artifact" / "model.so")(x)
        np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-4)
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-2000:]
