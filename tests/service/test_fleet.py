"""The fleet under faults, with real processes on loopback (issue 14, item 8): a worker killed in the
middle of a lease loses it a few heartbeats later, not a whole lease later; workers given two
coordinators of one database move to the other when theirs is killed. Every task still completes
with exactly one record per trial."""

import signal
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select

from tests.service.processes import Coordinator, start_worker, wait_until
from tests.service.test_end_to_end import FAST, assert_complete, wait_for_task, wait_for_workers
from tuner.database import Database
from tuner.database.schema import CandidateRow
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.settings import Settings

SPEC = {"op": "matmul", "params": {"M": 48, "N": 64, "K": 32}}
# A few seconds of timing per candidate: a batch of 4 is held long enough to be killed in.
SLOWER = ("--repeat", "2", "--min-repeat-ms", "1000")


def make_tokens(settings: Settings) -> dict[str, str]:
    with Database.open(settings.database_url) as db:
        return {role: create_token(db, role=role, name=role)[1] for role in ("admin", "worker")}


def held_by(settings: Settings, worker_id: int) -> int:
    """Leases the worker still holds: leased to it and not expired."""
    with Database.open(settings.database_url) as db, db.transaction() as session:
        held = (
            (CandidateRow.worker_id == worker_id)
            & (CandidateRow.status == "leased")
            & (CandidateRow.lease_expires_at >= datetime.now(UTC))
        )
        return session.scalar(select(func.count()).where(held)) or 0


def coordinator(settings: Settings, logs: Path) -> Coordinator:
    """A coordinator with its own log directory (each names its logs by its starts)."""
    logs.mkdir()
    return Coordinator(settings, logs).start()


def worker_id(api: Client, name: str) -> int:
    return next(w["id"] for w in api.http.get("/v1/workers").json() if w["name"] == name)


def test_a_killed_worker_loses_its_leases_after_missed_heartbeats_not_the_lease(
    settings: Settings, tmp_path: Path
):
    settings = settings.model_copy(update={"lease_seconds": 60.0, "heartbeat_seconds": 1.0})
    tokens = make_tokens(settings)
    coordinator = Coordinator(settings, tmp_path).start()
    doomed = start_worker(coordinator, tokens["worker"], "doomed", tmp_path, "--batch", "4", *SLOWER)
    survivor = start_worker(coordinator, tokens["worker"], "survivor", tmp_path, "--batch", "1", *FAST)
    try:
        with Client(coordinator.url, tokens["admin"]) as api:
            wait_for_workers(api, 2)
            doomed_id = worker_id(api, "doomed")
            task = api.submit(SPEC, trials=12, strategy="random")
            wait_until(lambda: held_by(settings, doomed_id) >= 2, 60, "leases held by the doomed worker")
            doomed.stop(signal.SIGKILL)
            killed = time.monotonic()
            wait_until(lambda: held_by(settings, doomed_id) == 0, 50, "the leases taken from it")
            seconds = time.monotonic() - killed
            print(f"a killed worker lost its leases after {seconds:.1f} s")
            # 3 missed heartbeats (3 s) and a tick; far from the lease's 60 s.
            assert seconds < 10, seconds
            assert_complete(settings, wait_for_task(api, task.id), 12)
    finally:
        assert survivor.stop() == 0, survivor.output()[-2000:]
        coordinator.stop()


def test_workers_fail_over_to_the_other_coordinator_when_theirs_is_killed(settings: Settings, tmp_path: Path):
    tokens = make_tokens(settings)
    first, second = (coordinator(settings, tmp_path / name) for name in ("first", "second"))
    urls = ("--coordinator", second.url, "--runner", "null")
    workers = [start_worker(first, tokens["worker"], f"w{i}", tmp_path, *urls) for i in range(2)]
    try:
        with Client(second.url, tokens["admin"]) as api:
            wait_for_workers(api, 2)
            task = api.submit(SPEC, trials=200, strategy="random")
            wait_until(lambda: api.task(task.id).trials_done >= 20, 60, "results through the first")
            first.stop(signal.SIGKILL)
            assert_complete(settings, wait_for_task(api, task.id), 200)
    finally:
        codes = [w.stop() for w in workers]
        second.stop()
    assert codes == [0, 0], [w.output()[-2000:] for w in workers]
    moved = [w for w in workers if f"moving to {second.url}" in w.output()]
    assert moved, [w.output()[-2000:] for w in workers]
