"""The candidate queue of the service: traces a task's search proposed, leased to workers of the task's
hardware with an expiry, and done once, by the first result that comes back.

Leases make the queue outlive its workers: a worker's heartbeats renew its leases; a worker killed in
the middle of a batch stops renewing, its leases expire, and its candidates go to the next worker that
asks. A candidate that loses its worker `max_attempts` times is given up and recorded as a timeout, so
a program that kills whoever measures it cannot stall a task forever.

A result is accepted once: the candidate row is locked while its record is written, so a retried or
late submission (a worker that lost its lease but finished anyway) finds it done and stores nothing.
Rows are always locked in id order, candidates before tasks, so concurrent transactions on PostgreSQL
cannot deadlock; SKIP LOCKED lets several coordinators lease from one queue without waiting. Two
exceptions keep that true: `enqueue` locks its task first, but then only inserts rows nobody else
holds; ending a task holds its row FOR KEY SHARE before it locks the candidates, a lock that the
count updates of results never wait for.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, and_, func, select, update
from sqlalchemy.orm import Session

from runner.results import Status
from tuner.database.database import Database
from tuner.database.records import ACTIVE, CandidateStatus, NewRecord, trace_hash
from tuner.database.schema import Candidate, Task, TuningRecord, Worker


@dataclass(frozen=True)
class LeasedCandidate:
    id: int
    task_id: int
    spec: dict[str, Any]
    trace: dict[str, Any]
    # The workload's best median on this hardware when leased: a result beating it is re-measured.
    best_secs: float | None
    lease_expires_at: datetime


@dataclass(frozen=True, kw_only=True)
class Submission:
    """A worker's result for one leased candidate."""

    candidate_id: int
    status: str  # a runner.Status value
    run_secs: list[float] = field(default_factory=list)
    build_secs: float = 0.0
    message: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    remeasured: bool = False


class Outcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"  # the candidate was already done: nothing stored
    UNKNOWN = "unknown"  # no such candidate
    REFUSED = "refused"  # not leased to a worker of this hardware (or given back): nothing stored


@dataclass(frozen=True)
class QueueCounts:
    """A task's candidates by status (a CandidateStatus value each field is named after)."""

    pending: int
    leased: int
    done: int


@dataclass(frozen=True)
class Proposed:
    """A program to queue: its trace, and the program's structural hash (its identity)."""

    trace: dict[str, Any]
    program_hash: str


def enqueue(
    db: Database,
    *,
    task_id: int,
    owner: str,
    workload_id: int,
    hardware_id: int,
    programs: Sequence[Proposed],
) -> set[str]:
    """Queue programs for measurement, if the task is still active and `owner` still runs it: a search
    proposes for seconds, and the task may be cancelled or taken over meanwhile. A program already
    queued for the workload and hardware (by any task) is skipped. Returns the program hashes
    queued.

    The task row is locked first (FOR UPDATE, which also waits out a cancel or finish that holds it
    FOR KEY SHARE while it withdraws the task's candidates): the check and the insert are one step."""
    if not programs:
        return set()
    rows = [
        {
            "task_id": task_id,
            "workload_id": workload_id,
            "hardware_id": hardware_id,
            "trace": p.trace,
            "trace_hash": trace_hash(p.trace),
            "program_hash": p.program_hash,
            "status": CandidateStatus.PENDING.value,
            "attempts": 0,
        }
        for p in programs
    ]
    conflict = [Candidate.workload_id, Candidate.hardware_id, Candidate.program_hash]
    with db.transaction() as session:
        connection = session.connection()
        runs = select(Task.id).where(Task.id == task_id, Task.owner == owner, Task.status.in_(ACTIVE))
        if connection.scalar(runs.with_for_update()) is None:
            return set()
        insert = db.insert(Candidate).values(rows).on_conflict_do_nothing(index_elements=conflict)
        return set(connection.scalars(insert.returning(Candidate.program_hash)))


def lease(
    db: Database,
    *,
    worker_id: int,
    hardware_id: int,
    limit: int,
    lease_secs: float,
    now: datetime,
    max_attempts: int,
) -> list[LeasedCandidate]:
    """Up to `limit` candidates for a worker of this hardware: first leased ones whose lease expired
    (unless they have used up their attempts: their tasks have waited longest), then pending ones,
    oldest first. Each group is one UPDATE that walks the queue index in order and stops at `limit`;
    one query for both, with an OR, made PostgreSQL read and sort the whole queue every time."""
    expires = now + timedelta(seconds=lease_secs)
    expired = and_(
        Candidate.status == CandidateStatus.LEASED.value,
        Candidate.lease_expires_at < now,
        Candidate.attempts < max_attempts,
    )
    pending = Candidate.status == CandidateStatus.PENDING.value
    with db.transaction() as session:
        connection = session.connection()  # plain Core execution: the ORM's bulk machinery costs more
        rows: list[Row[*tuple[Any, ...]]] = []
        for available in (expired, pending):
            if len(rows) < limit:
                take = _take(hardware_id, available, limit - len(rows), worker_id, expires)
                rows += connection.execute(take).all()
        best = {wid: _best_secs(connection, wid, hardware_id) for wid in {r.workload_id for r in rows}}
    return [
        LeasedCandidate(
            r.id, r.task_id, db.workload(r.workload_id).spec, r.trace, best[r.workload_id], expires
        )
        for r in sorted(rows)
    ]


def _take(
    hardware_id: int, available: ColumnElement[bool], limit: int, worker_id: int, expires: datetime
) -> Any:
    """UPDATE ... RETURNING that leases the first `limit` available candidates; rows another
    transaction holds are skipped, never waited for. No candidate of an ended task is available:
    ending a task withdraws its candidates, and `enqueue` adds none to a task that ended."""
    chosen = (
        select(Candidate.id)
        .where(Candidate.hardware_id == hardware_id, available)
        .order_by(Candidate.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(Candidate)
        .where(Candidate.id.in_(chosen))
        .values(
            status=CandidateStatus.LEASED.value,
            worker_id=worker_id,
            lease_expires_at=expires,
            attempts=Candidate.attempts + 1,
        )
        .returning(Candidate.id, Candidate.task_id, Candidate.trace, Candidate.workload_id)
    )


def _best_secs(connection: Connection, workload_id: int, hardware_id: int) -> float | None:
    return connection.scalar(
        select(func.min(TuningRecord.median_secs)).where(
            TuningRecord.workload_id == workload_id,
            TuningRecord.hardware_id == hardware_id,
            TuningRecord.status == Status.OK.value,
        )
    )


def renew_leases(db: Database, *, worker_id: int, lease_secs: float, now: datetime) -> int:
    """Extend every lease the worker holds (its heartbeat); returns how many it holds."""
    with db.transaction() as session:
        held = lock_candidates(
            session, Candidate.worker_id == worker_id, Candidate.status == CandidateStatus.LEASED
        )
        if held:
            session.execute(
                update(Candidate)
                .where(Candidate.id.in_(held))
                .values(lease_expires_at=now + timedelta(seconds=lease_secs))
            )
        return len(held)


def release(db: Database, *, worker_id: int, candidate_ids: Sequence[int] | None = None) -> int:
    """Give leases back (a worker stopping before it measured them): pending again at once, and the
    attempt not counted. None releases every lease the worker holds. Returns how many were released."""
    where = [Candidate.worker_id == worker_id, Candidate.status == CandidateStatus.LEASED]
    if candidate_ids is not None:
        where.append(Candidate.id.in_(candidate_ids))
    with db.transaction() as session:
        held = lock_candidates(session, *where)
        if held:
            session.execute(
                update(Candidate)
                .where(Candidate.id.in_(held))
                .values(
                    status=CandidateStatus.PENDING.value,
                    worker_id=None,
                    lease_expires_at=None,
                    attempts=Candidate.attempts - 1,
                )
            )
        return len(held)


def submit(db: Database, *, worker_id: int, worker: str, submissions: Sequence[Submission]) -> list[Outcome]:
    """Store each result once, in one transaction: the records, the candidates done, the tasks' counts.

    A result counts only from a worker registered with the candidate's hardware, for a candidate that
    was leased and not given back (to that worker or, late, to another): a worker cannot store
    timings for candidates of another kind of machine, nor for candidates nobody was measuring. It
    can lie about its own hardware when it registers: worker tokens are the fleet's credentials,
    given to trusted machines. A result for a cancelled task's candidate is kept (it is a real
    measurement) but not counted."""
    by_id = {s.candidate_id: s for s in submissions}
    outcomes: dict[int, Outcome] = {}
    with db.transaction() as session:
        connection = session.connection()
        hardware_id = connection.scalar(select(Worker.hardware_id).where(Worker.id == worker_id))
        rows = connection.execute(
            select(*_CANDIDATE_COLUMNS)
            .where(Candidate.id.in_(by_id))
            .order_by(Candidate.id)
            .with_for_update()
        ).all()
        fresh = []
        for r in rows:
            if r.status == CandidateStatus.DONE.value:
                outcomes[r.id] = Outcome.DUPLICATE
            elif r.hardware_id != hardware_id or r.worker_id is None:
                outcomes[r.id] = Outcome.REFUSED
            else:
                outcomes[r.id] = Outcome.ACCEPTED
                fresh.append((r, by_id[r.id]))
        _finish(db, connection, fresh, worker)
    return [outcomes.get(s.candidate_id, Outcome.UNKNOWN) for s in submissions]


_CANDIDATE_COLUMNS = (
    Candidate.id,
    Candidate.task_id,
    Candidate.workload_id,
    Candidate.hardware_id,
    Candidate.trace,
    Candidate.program_hash,
    Candidate.status,
    Candidate.worker_id,
)


def _finish(
    db: Database, connection: Connection, done: Sequence[tuple[Any, Submission]], worker: str
) -> None:
    """Store the results of locked, unfinished candidates; mark them done; count them for their tasks
    (tasks in id order, after the candidates: the queue's locking order)."""
    if not done:
        return
    records = [
        NewRecord(
            workload_id=c.workload_id,
            hardware_id=c.hardware_id,
            task_id=c.task_id,
            candidate_id=c.id,
            trace=c.trace,
            program_hash=c.program_hash,
            worker=worker,
            **{f.name: getattr(result, f.name) for f in fields(result) if f.name != "candidate_id"},
        )
        for c, result in done
    ]
    db.insert_records(connection, records)
    connection.execute(
        update(Candidate)
        .where(Candidate.id.in_([c.id for c, _ in done]))
        .values(status=CandidateStatus.DONE.value, lease_expires_at=None)
    )
    counted = Counter(c.task_id for c, _ in done if c.status != CandidateStatus.CANCELLED.value)
    for task_id in sorted(counted):
        connection.execute(
            update(Task).where(Task.id == task_id).values(trials_done=Task.trials_done + counted[task_id])
        )


def give_up_expired(db: Database, *, now: datetime, max_attempts: int) -> int:
    """Candidates whose lease expired `max_attempts` times become timeout records: each of their
    workers died or stopped answering while measuring them."""
    message = f"gave up after {max_attempts} leases expired: its workers died or hung while measuring it"
    with db.transaction() as session:
        connection = session.connection()
        rows = connection.execute(
            select(*_CANDIDATE_COLUMNS)
            .where(
                Candidate.status == CandidateStatus.LEASED.value,
                Candidate.lease_expires_at < now,
                Candidate.attempts >= max_attempts,
            )
            .order_by(Candidate.id)
            .with_for_update(skip_locked=True)
        ).all()
        lost = [
            (r, Submission(candidate_id=r.id, status=Status.TIMEOUT.value, message=message)) for r in rows
        ]
        _finish(db, connection, lost, "")
        return len(rows)


def counts(db: Database, *, task_id: int) -> QueueCounts:
    with db.transaction() as session:
        rows = session.execute(
            select(Candidate.status, func.count())
            .where(Candidate.task_id == task_id)
            .group_by(Candidate.status)
        ).all()
    by_status = {status: n for status, n in rows}
    return QueueCounts(**{f.name: by_status.get(f.name, 0) for f in fields(QueueCounts)})


def queued_program_hashes(db: Database, *, workload_id: int, hardware_id: int) -> set[str]:
    """Every program queued for the pair, in any state: a search must not propose them again."""
    query = select(Candidate.program_hash).where(
        Candidate.workload_id == workload_id, Candidate.hardware_id == hardware_id
    )
    with db.transaction() as session:
        return set(session.scalars(query))


def lock_candidates(session: Session, *where: Any) -> list[int]:
    """Lock the matching candidate rows in id order, and return their ids: every transaction that
    locks candidates does it this way, before it touches a task row, so none can deadlock."""
    return list(session.scalars(select(Candidate.id).where(*where).order_by(Candidate.id).with_for_update()))
