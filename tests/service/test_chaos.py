"""Chaos on PostgreSQL, with real processes (issue 14): two coordinators on one database, null-runner
workers that know both, and faults one after another while tasks of two clients run: a worker killed
with SIGKILL (a new one takes its place), a coordinator killed with SIGKILL, the database cut off for a
few seconds (a proxy of ours in front of the server). At the end every task is done with exactly its
trial budget: one record per candidate, no trace measured twice, no result lost."""

import signal
import time
from pathlib import Path

from sqlalchemy import func, select

from tests.postgres import temporary_database
from tests.service.conftest import service_settings
from tests.service.database_proxy import DatabaseProxy
from tests.service.processes import Coordinator, Process, start_worker, wait_until
from tests.service.test_end_to_end import assert_complete, wait_for_task, wait_for_workers
from tuner.database import Database
from tuner.database.schema import RecordRow
from tuner.database.tokens import create_token
from tuner.service.client import Client

TASKS, TRIALS = 4, 120
CUT_SECONDS = 5.0


def spec(i: int) -> dict:
    return {"op": "matmul", "params": {"M": 32 + 8 * i, "N": 32, "K": 32}}


def test_workers_and_coordinators_killed_and_the_database_cut(tmp_path: Path):
    start = time.monotonic()
    with temporary_database() as url, DatabaseProxy(url) as proxy:
        settings = service_settings(proxy.url).model_copy(
            update={"database_timeout_seconds": 2.0, "worker_max_backoff_seconds": 2.0}
        )
        with Database.open(url) as db:
            admin = create_token(db, role="admin", name="admin")[1]
            worker_token = create_token(db, role="worker", name="workers")[1]
            clients = [create_token(db, role="client", name=f"client {i}")[1] for i in range(2)]
        coordinators = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            coordinators.append(Coordinator(settings, tmp_path / name).start())
        a, b = coordinators
        workers: list[Process] = []

        def worker(name: str, first: Coordinator, second: Coordinator) -> Process:
            urls = ("--coordinator", second.url, "--runner", "null", "--batch", "4")
            process = start_worker(first, worker_token, name, tmp_path, *urls)
            workers.append(process)
            return process

        try:
            doomed = worker("w0", a, b)
            worker("w1", b, a)
            worker("w2", a, b)
            with Client(b.url, admin) as api:
                wait_for_workers(api, 3)
                tasks = []
                for i in range(TASKS):
                    with Client(b.url, clients[i % 2]) as client:
                        tasks.append(client.submit(spec(i), trials=TRIALS, strategy="random").id)

                def measured() -> int:
                    return sum(api.task(t).trials_done for t in tasks)

                total = TASKS * TRIALS
                wait_until(lambda: measured() >= total // 8, 60, "the first results")
                doomed.stop(signal.SIGKILL)
                worker("w3", b, a)
                wait_until(lambda: measured() >= total // 4, 60, "results after a worker was killed")
                a.stop(signal.SIGKILL)
                wait_until(lambda: measured() >= 3 * total // 8, 60, "results after a coordinator was killed")
                proxy.cut()
                time.sleep(CUT_SECONDS)
                proxy.restore()
                finished = [wait_for_task(api, t, timeout=90) for t in tasks]
        finally:
            codes = [w.stop() for w in workers[1:]]
            b.stop()
        for task in finished:
            assert_complete(settings.model_copy(update={"database_url": url}), task, TRIALS)
        with Database.open(url) as db, db.transaction() as session:
            pairs = select(RecordRow.workload_id, RecordRow.hardware_id, RecordRow.trace_hash)
            distinct = session.scalar(select(func.count()).select_from(pairs.distinct().subquery()))
            records = session.scalar(select(func.count()).select_from(RecordRow))
        assert records == distinct == TASKS * TRIALS
    assert codes == [0] * len(codes), [w.output()[-2000:] for w in workers]
    assert any(f"moving to {b.url}" in w.output() for w in workers), "no worker moved to b"
    print(f"chaos: {TASKS} tasks of {TRIALS} trials complete in {time.monotonic() - start:.0f} s")
