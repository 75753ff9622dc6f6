"""Recovery after faults (issue 14), on PostgreSQL with real processes: a `tuner serve` reaching the
database through a proxy of ours (tests/service/database_proxy.py), null-runner worker daemons, and
one fault after another, each timed from the fault (or from its end, for an outage) to the service
working again:

(a) kill -9 of a worker holding leases: until its leases are taken back, and until its candidates
    are measured by the other workers;
(b) SIGTERM of a worker holding leases: until it exits, its exit code, and the leases it still
    holds after (none: it submits what it measured and gives the rest back);
(c) kill -9 of the coordinator, restarted at once: the restart, then until the first new result and
    the first new candidate (the search loop resumed);
(d) the database unreachable (connections refused and reset) and (e) frozen (connections accepted,
    nothing answered), each for `--outage` seconds: how /healthz answers meanwhile, then from the
    end of the outage until /healthz is 200 and until the first new result;
(f) two coordinators on the database and the one in use killed: until the first result through the
    other, and until it has taken over the killed one's tasks.

The workers that are killed or stopped in (a) and (b) measure with the local runner, slowly (a few
seconds a candidate), so they hold their leases when the signal comes. (b) comes first, before the
null workers start, so that they cannot drain the task before the stopped worker leases its second
batch. Every fault gets a task of its own, submitted just before it, so there is work to resume. At
the end every task must be done with exactly its budget: one record per trial, no program measured
twice, no result lost. The service runs with the shipped settings (printed first: heartbeats, leases,
claims, the database timeout, the workers' longest backoff), so the times are what a deployment sees.

    python -m bench.recovery [--outage 20] [--logs DIR]
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from compiler.target import host_hardware
from tests.postgres import temporary_database
from tests.service.database_proxy import DatabaseProxy
from tests.service.processes import Coordinator, Process, start_worker, wait_until
from tuner.database import Database
from tuner.database.schema import CandidateRow, RecordRow, TaskRow, WorkerRow
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.settings import Settings

# Slow enough to be caught holding leases: two timed repeats of a second each per candidate.
SLOW = ("--runner", "local", "--batch", "4", "--repeat", "2", "--min-repeat-ms", "1000")
NULL = ("--runner", "null")
TRIALS = 1000  # each task's budget: seconds of work for the null workers
POLL = 0.05


def spec(i: int) -> dict:
    """The i-th task's workload: a matmul of its own shape (no two tasks share a workload)."""
    return {"op": "matmul", "params": {"M": 32 + 8 * i, "N": 48, "K": 32}}


def timed(t0: float, conditions: dict[str, Callable[[], object]], timeout: float = 180) -> dict[str, float]:
    """Seconds from `t0` until each condition first holds: all polled together, every 50 ms, so one
    that holds first is not timed late for being waited on second."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(conditions):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {set(conditions) - set(seen)}")
        for name, condition in conditions.items():
            if name not in seen and condition():
                seen[name] = time.monotonic() - t0
        time.sleep(POLL)
    return seen


def healthz(http: httpx.Client) -> int | str:
    """/healthz's status, or the error that stood in for an answer."""
    try:
        return http.get("/healthz").status_code
    except httpx.HTTPError as e:
        return type(e).__name__


@dataclass
class Fleet:
    """The service under faults, and the bench's own view of its database (a direct connection, which
    no fault reaches)."""

    db: Database
    proxy: DatabaseProxy
    coordinator: Coordinator  # the one in use: the second one once the first is killed in (f)
    admin: str
    worker_token: str
    logs: Path
    workers: dict[str, Process] = field(default_factory=dict)
    budgets: dict[int, int] = field(default_factory=dict)  # task id -> trials
    spare: Coordinator | None = None  # the second coordinator of (f), while the first still runs

    def worker(self, name: str, *flags: str, also: Coordinator | None = None) -> Process:
        """Start a worker daemon and wait for it to register; `also` is a second coordinator it knows."""
        more = ("--coordinator", also.url) if also else ()
        self.workers[name] = start_worker(self.coordinator, self.worker_token, name, self.logs, *more, *flags)
        wait_until(lambda: self.worker_id(name), 120, f"worker {name} registered")
        return self.workers[name]

    def submit(self, trials: int) -> int:
        with Client(self.coordinator.url, self.admin) as api:
            i = len(self.budgets)
            task = api.submit(spec(i), trials=trials, strategy="random", seed=i).id
        self.budgets[task] = trials
        return task

    def _scalar(self, query: Any) -> int:
        with self.db.transaction() as session:
            return session.scalar(query) or 0

    def stored(self) -> int:
        return self._scalar(select(func.count()).select_from(RecordRow))

    def proposed(self) -> int:
        return self._scalar(select(func.count()).select_from(CandidateRow))

    def trials_done(self, task: int) -> int:
        return self._scalar(select(TaskRow.trials_done).where(TaskRow.id == task))

    def owner(self, task: int) -> str | None:
        with self.db.transaction() as session:
            return session.scalar(select(TaskRow.owner).where(TaskRow.id == task))

    def worker_id(self, name: str) -> int:
        return self._scalar(
            select(WorkerRow.id).where(WorkerRow.name == name).order_by(WorkerRow.id.desc()).limit(1)
        )

    def held(self, worker_id: int) -> list[int]:
        """The candidates leased to the worker, lease not expired."""
        held = (
            (CandidateRow.worker_id == worker_id)
            & (CandidateRow.status == "leased")
            & (CandidateRow.lease_expires_at >= datetime.now(UTC))
        )
        with self.db.transaction() as session:
            return list(session.scalars(select(CandidateRow.id).where(held)))

    def done(self, candidates: list[int]) -> int:
        where = CandidateRow.id.in_(candidates) & (CandidateRow.status == "done")
        return self._scalar(select(func.count()).where(where))

    def finished(self) -> bool:
        with self.db.transaction() as session:
            statuses = session.scalars(select(TaskRow.status).where(TaskRow.id.in_(self.budgets)))
            return all(status in ("done", "failed", "cancelled") for status in statuses)

    def settle(self, stall: float = 60.0) -> bool:
        """Wait until every task is finished (True), or no result has come for `stall` seconds."""
        last, since = self.stored(), time.monotonic()
        while not self.finished():
            if (n := self.stored()) != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > stall:
                return False
            time.sleep(0.5)
        return True

    def running(self) -> dict[str, Process]:
        return {name: w for name, w in self.workers.items() if w.popen.poll() is None}

    def started(self, task: int) -> None:
        wait_until(lambda: self.trials_done(task), 120, f"the first result of task {task}", interval=POLL)

    def holding(self, name: str, at_least: int, besides: Sequence[int] = ()) -> list[int]:
        """Wait for the worker to hold `at_least` leases, none of them of the candidates `besides`."""
        wid = self.worker_id(name)

        def held() -> list[int]:
            h = [c for c in self.held(wid) if c not in besides]
            return h if len(h) >= at_least else []

        return wait_until(held, 180, f"{at_least} new leases held by {name}")


def killed_worker(fleet: Fleet) -> str:
    doomed = fleet.worker("doomed", *SLOW)
    fleet.submit(TRIALS)
    fleet.holding("doomed", 2)
    doomed.stop(signal.SIGKILL)
    t0 = time.monotonic()
    wid = fleet.worker_id("doomed")
    held = fleet.held(wid)  # as the kill left them
    t = timed(t0, {"taken": lambda: not fleet.held(wid), "measured": lambda: fleet.done(held) == len(held)})
    return (
        f"(a) kill -9 of a worker holding {len(held)} leases: leases taken back after {t['taken']:.1f} s, "
        f"its candidates measured by the other workers after {t['measured']:.1f} s"
    )


def stopped_worker(fleet: Fleet) -> str:
    leaver = fleet.worker("leaver", *SLOW)
    fleet.submit(TRIALS)
    first = fleet.holding("leaver", 2)
    held = fleet.holding("leaver", 2, besides=first)  # its second batch: its build processes are warm
    t0 = time.monotonic()
    code = leaver.stop(signal.SIGTERM, timeout=60)
    seconds = time.monotonic() - t0
    still = len(fleet.held(fleet.worker_id("leaver")))
    return (
        f"(b) SIGTERM of a worker holding {len(held)} leases (its second batch): exit {code} after "
        f"{seconds:.1f} s, holding {still} leases after it"
    )


def restarted_coordinator(fleet: Fleet) -> str:
    fleet.started(fleet.submit(TRIALS))
    fleet.coordinator.stop(signal.SIGKILL)
    t0 = time.monotonic()
    fleet.coordinator.start()
    up = time.monotonic()
    stored, proposed = fleet.stored(), fleet.proposed()
    t = timed(
        up, {"result": lambda: fleet.stored() > stored, "candidate": lambda: fleet.proposed() > proposed}
    )
    return (
        f"(c) kill -9 of the coordinator, restarted at once: answering again {up - t0:.1f} s after the "
        f"kill; from then, first new result after {t['result']:.1f} s, first new candidate after "
        f"{t['candidate']:.1f} s"
    )


def outage(fleet: Fleet, kind: str, seconds: float) -> str:
    fleet.started(fleet.submit(TRIALS))
    (fleet.proxy.cut if kind == "cut" else fleet.proxy.freeze)()
    t0 = time.monotonic()
    answers: list[tuple[int | str, float]] = []
    with httpx.Client(base_url=fleet.coordinator.url, timeout=10) as http:
        while time.monotonic() - t0 < seconds:
            start = time.monotonic()
            answers.append((healthz(http), time.monotonic() - start))
            time.sleep(max(0.0, start + 0.5 - time.monotonic()))
        fleet.proxy.restore()
        end, stored = time.monotonic(), fleet.stored()
        t = timed(end, {"healthy": lambda: healthz(http) == 200, "result": lambda: fleet.stored() > stored})
    statuses = dict(Counter(status for status, _ in answers))
    slowest = max(s for _, s in answers)
    label = "unreachable (cut)" if kind == "cut" else "frozen"
    return (
        f"({'d' if kind == 'cut' else 'e'}) database {label} for {seconds:.0f} s: /healthz answered "
        f"{len(answers)} times, {statuses}, slowest {slowest:.2f} s; after it, /healthz 200 after "
        f"{t['healthy']:.1f} s, first new result after {t['result']:.1f} s"
    )


def second_coordinator_killed(fleet: Fleet) -> str:
    """A task the first coordinator's search loop owns; a second coordinator; workers that know both,
    using the first; the first killed for good."""
    task = fleet.submit(TRIALS)
    fleet.started(task)
    first = fleet.coordinator
    (fleet.logs / "b").mkdir(exist_ok=True)
    second = fleet.spare = Coordinator(first.settings, fleet.logs / "b").start()
    old = fleet.running()
    for i in range(2):
        fleet.worker(f"pair-{i}", *NULL, also=second)
    codes = [w.stop() for w in old.values()]
    owner = fleet.owner(task)
    first.stop(signal.SIGKILL)
    t0 = time.monotonic()
    fleet.coordinator, fleet.spare = second, None
    stored = fleet.stored()
    t = timed(
        t0,
        {"result": lambda: fleet.stored() > stored, "taken": lambda: fleet.owner(task) not in (owner, None)},
    )
    return (
        f"(f) two coordinators, the one in use killed: first result through the other {t['result']:.1f} s "
        f"after the kill, its search taken over after {t['taken']:.1f} s (the workers replaced by ones "
        f"that know both exited {codes})"
    )


def audit(fleet: Fleet) -> str:
    """Every task done with exactly its budget: one record per trial and per candidate, every candidate
    done, no program measured twice (records = distinct (workload, hardware, trace))."""
    wrong = []
    with fleet.db.transaction() as session:
        for task, trials in fleet.budgets.items():
            row = session.execute(select(TaskRow.status, TaskRow.trials_done).where(TaskRow.id == task)).one()
            of_task = RecordRow.task_id == task
            records = session.scalar(select(func.count()).where(of_task))
            traces = session.scalar(select(func.count(func.distinct(RecordRow.trace_hash))).where(of_task))
            linked = session.scalar(select(func.count(func.distinct(RecordRow.candidate_id))).where(of_task))
            states = dict(
                session.execute(
                    select(CandidateRow.status, func.count())
                    .where(CandidateRow.task_id == task)
                    .group_by(CandidateRow.status)
                ).all()
            )
            expected = ("done", trials, trials, trials, trials, {"done": trials})
            if (row.status, row.trials_done, records, traces, linked, states) != expected:
                holders = session.execute(
                    select(
                        WorkerRow.name, CandidateRow.id, CandidateRow.lease_expires_at, CandidateRow.attempts
                    )
                    .join(WorkerRow, WorkerRow.id == CandidateRow.worker_id)
                    .where(CandidateRow.task_id == task, CandidateRow.status == "leased")
                ).all()
                leases = ", ".join(f"{c.id} to {c.name} until {c.lease_expires_at:%H:%M:%S}" for c in holders)
                wrong.append(
                    f"task {task} of {trials}: {row.status}, {row.trials_done} done, {records} records, "
                    f"{traces} traces, {linked} candidates recorded, candidates {states}"
                    + (f", leased: {leases}" if leases else "")
                )
        pairs = select(RecordRow.workload_id, RecordRow.hardware_id, RecordRow.trace_hash).distinct()
        distinct = session.scalar(select(func.count()).select_from(pairs.subquery()))
        records = session.scalar(select(func.count()).select_from(RecordRow))
    verdict = (
        f"NOT COMPLETE at {datetime.now(UTC):%H:%M:%S} UTC: " + "; ".join(wrong)
        if wrong
        else "every task done with exactly its budget"
    )
    return (
        f"after the faults: {len(fleet.budgets)} tasks, {verdict}; {records} records, {distinct} distinct "
        f"programs ({records - distinct} measured twice); total budget {sum(fleet.budgets.values())}"
    )


def recover(url: str, logs: Path, outage_seconds: float) -> None:
    with DatabaseProxy(url) as proxy, Database.open(url) as db:
        settings = Settings(database_url=proxy.url)
        print(
            f"settings: heartbeat {settings.heartbeat_seconds:g} s, lease {settings.lease_seconds:g} s, "
            f"claim {settings.claim_seconds:g} s, database timeout {settings.database_timeout_seconds:g} s, "
            f"worker backoff up to {settings.worker_max_backoff_seconds:g} s"
        )
        admin = create_token(db, role="admin", name="recovery")[1]
        worker_token = create_token(db, role="worker", name="recovery")[1]
        db.add_hardware(host_hardware(), approved=True)
        fleet = Fleet(db, proxy, Coordinator(settings, logs).start(), admin, worker_token, logs)
        start = time.monotonic()

        def done(line: str) -> None:
            print(f"[{time.monotonic() - start:4.0f} s] {line}", flush=True)

        try:
            done(stopped_worker(fleet))
            for i in range(2):
                fleet.worker(f"null-{i}", *NULL)
            done(killed_worker(fleet))
            done(restarted_coordinator(fleet))
            done(outage(fleet, "cut", outage_seconds))
            done(outage(fleet, "freeze", outage_seconds))
            done(second_coordinator_killed(fleet))
            if not fleet.settle():
                done("no result for 60 s, and not every task is finished")
        finally:
            codes = [w.stop() for w in fleet.running().values()]
            for coordinator in (fleet.coordinator, fleet.spare):
                if coordinator is not None:
                    coordinator.stop()
        print(audit(fleet))
        print(f"workers at the end exited {codes}; {time.monotonic() - start:.0f} s in all")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage", type=float, default=20.0, help="seconds the database is cut, then frozen")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here (default: thrown away)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, temporary_database() as url:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        recover(url, logs, args.outage)


if __name__ == "__main__":
    main()
