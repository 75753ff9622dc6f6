"""A flood of tasks (issue 14, item 7): a real `tuner serve` and 2 null-runner worker daemons, 200
tasks of 40 trials submitted within seconds (each a matmul of its own shape, the default evolutionary
search, an admin token: no quotas). Every 10 s: how many tasks have results, how many are done, the
trials measured, and the resident memory of the coordinator's search-loop process. The workers measure
nothing, so the search loop is what is measured: whether it starts every task early, and whether its
memory stays bounded.

    python -m bench.task_flood [--database sqlite|postgresql] [--tasks 200] [--trials 40]
                               [--seconds 600] [--interval 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.proc import rss_mb, search_loop_pid
from compiler.target import host_hardware
from tests.postgres import temporary_database
from tests.service.processes import Coordinator, Process, start_worker
from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.settings import Settings

WORKERS = 2


def spec(i: int) -> dict:
    """The i-th task's workload: small matmuls, each of its own shape, so no two tasks share one."""
    return {"op": "matmul", "params": {"M": 16 + 8 * (i % 25), "N": 16 + 8 * (i // 25), "K": 64}}


def progress(db: Database, task_ids: list[int]) -> tuple[int, int, int]:
    """Tasks with a result, tasks done, trials measured."""
    tasks = [t for t in db.tasks() if t.id in set(task_ids)]
    return (
        sum(t.trials_done > 0 for t in tasks),
        sum(t.status == "done" for t in tasks),
        sum(t.trials_done for t in tasks),
    )


def flood(url: str, workdir: Path, tasks: int, trials: int, seconds: float, interval: float) -> None:
    settings = Settings(database_url=url, max_trials=max(trials, 1))
    with Database.open(url) as db:
        admin = create_token(db, role="admin", name="flood")[1]
        worker_token = create_token(db, role="worker", name="flood")[1]
        db.add_hardware(host_hardware(), approved=True)
    coordinator = Coordinator(settings, workdir).start()
    workers: list[Process] = []
    try:
        assert coordinator.process is not None
        loop = search_loop_pid(coordinator.process.pid)
        assert loop is not None, "no search-loop process"
        workers = [
            start_worker(coordinator, worker_token, f"null-{i}", workdir, "--runner", "null")
            for i in range(WORKERS)
        ]
        print(f"search loop RSS before the flood: {rss_mb(loop):.0f} MB")
        start = time.monotonic()
        with Client(coordinator.url, admin) as api:
            ids = [api.submit(spec(i), trials=trials).id for i in range(tasks)]
        print(f"{tasks} tasks of {trials} trials submitted in {time.monotonic() - start:.1f} s")
        print(f"{'s':>5} {'started':>8} {'done':>6} {'trials':>8} {'loop RSS MB':>12}")
        with Database.open(url) as db:
            while True:
                time.sleep(interval)
                started, done, measured = progress(db, ids)
                elapsed = time.monotonic() - start
                print(f"{elapsed:5.0f} {started:8d} {done:6d} {measured:8d} {rss_mb(loop):12.0f}", flush=True)
                if done == tasks or elapsed > seconds:
                    break
    finally:
        for w in workers:
            w.stop()
        coordinator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=600.0, help="stop sampling after this long")
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        run = (workdir, args.tasks, args.trials, args.seconds, args.interval)
        if args.database == "sqlite":
            flood(f"sqlite:///{workdir / 'flood.db'}", *run)
        else:
            with temporary_database() as url:
                flood(url, *run)


if __name__ == "__main__":
    main()
