"""The candidate queue of the service: traces a task's search proposed, leased to workers of the task's
hardware with an expiry, and done once, by the first result that comes back.

Leases make the queue outlive its workers: a worker's heartbeats renew its leases; a worker killed in
the middle of a batch stops renewing, its leases expire, and its candidates go back to the queue for
the next worker that asks. A candidate whose lease `max_attempts` different workers lost is given up
and recorded as a timeout, so a program that kills whoever measures it cannot stall a task forever;
one worker losing it again and again (leasing and never answering) burns no trial. A worker holds at
most `max_leases` candidates, a lease lasts at most `max_age_secs` however it is renewed, and a
worker that lets `strikes` leases in a row expire gets no lease for `throttle_secs` (`LeasePolicy`).

A result counts only from the worker holding the candidate's lease (by worker, not by hardware: a
second machine of the same kind cannot complete another's lease), and only once: the candidate row is
locked while its record is written, so a retried submission finds it done and stores nothing. A
measurement faster than the hardware can run is refused, as is one timed another way than its
candidate asks. A result that would be the new best of its workload, hardware and timing kind is not
stored at once: it is held on its candidate, which goes back to the queue for a second lease (any
worker's) to re-measure, side by side with the best record, whose program the lease names; the record
is then written from both measurements by the new-best rule the embedded tuner applies too
(`runner.confirm`: it ranks by the slower of the two medians, or by the ratio to the best timed beside
it), so no single result, forged or lucky, ever becomes the best.
Rows are always locked in id order, candidates before tasks, so concurrent transactions on PostgreSQL
cannot deadlock; SKIP LOCKED lets several coordinators lease from one queue without waiting. Two
exceptions keep that true: `enqueue` locks its task first, but then only inserts rows nobody else
holds; ending a task holds its row FOR KEY SHARE before it locks the candidates, a lock that the
count updates of results never wait for.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta
from math import inf
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, func, select, update
from sqlalchemy.orm import Session

from runner.confirm import Versus, confirm, would_be_best
from runner.protocol import LeasedBest, LeasedCandidate, ResultIn
from runner.results import MODEL_TIMING, RunResult, Status, TimingConfig, TimingKind
from tuner.database.database import Database
from tuner.database.records import ACTIVE, CandidateStatus, NewRecord, trace_hash
from tuner.database.schema import CandidateRow, HardwareRow, RecordRow, TaskRow, WorkerRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeasePolicy:
    """How long a lease lasts, and what a worker may hold and lose (the coordinator's settings)."""

    lease_secs: float
    max_attempts: int = 3  # different workers that may lose a candidate's lease before it is given up
    max_leases: int = 16  # candidates one worker may hold at once
    max_age_secs: float = 1800.0  # a lease's life, however often it is renewed
    strikes: int = 8  # leases a worker may let expire in a row before it is throttled
    throttle_secs: float = 600.0


class Outcome(enum.StrEnum):
    ACCEPTED = "accepted"  # stored
    CONFIRMING = "confirming"  # would be the new best: held until a second lease re-measures it
    DUPLICATE = "duplicate"  # its lease holder sent it again, and it is done: nothing changed
    UNKNOWN = "unknown"  # no such candidate
    REFUSED = "refused"  # not from the lease holder, or timed another way than asked: nothing stored
    IMPOSSIBLE = "impossible"  # faster than its hardware can run: refused, nothing stored


# What a held would-be best keeps of its first measurement (the fields of a ResultIn but the id and
# the status, which is ok).
_HELD = ("run_secs", "build_secs", "message", "timing")


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
    timing_kind: str,
    programs: Sequence[Proposed],
) -> set[str]:
    """Queue programs for measurement, timed as `timing_kind` (the task's kind), if the task is still
    active and `owner` still runs it: a search proposes for seconds, and the task may be cancelled or
    taken over meanwhile. A program already queued for the workload, hardware and kind (by any task)
    is skipped. Returns the program hashes queued.

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
            "timing_kind": TimingKind(timing_kind).value,
            "status": CandidateStatus.PENDING.value,
            "attempts": 0,
        }
        for p in programs
    ]
    conflict = [
        CandidateRow.workload_id,
        CandidateRow.hardware_id,
        CandidateRow.timing_kind,
        CandidateRow.program_hash,
    ]
    with db.transaction() as session:
        connection = session.connection()
        runs = select(TaskRow.id).where(
            TaskRow.id == task_id, TaskRow.owner == owner, TaskRow.status.in_(ACTIVE)
        )
        if connection.scalar(runs.with_for_update()) is None:
            return set()
        insert = db.insert(CandidateRow).values(rows).on_conflict_do_nothing(index_elements=conflict)
        return set(connection.scalars(insert.returning(CandidateRow.program_hash)))


def lease(
    db: Database, *, worker_id: int, hardware_id: int, limit: int, now: datetime, policy: LeasePolicy
) -> list[LeasedCandidate]:
    """Up to `limit` pending candidates for a worker of this hardware, in fair order (`_fair_order`),
    within what the worker may hold (`LeasePolicy.max_leases`; nothing while it is throttled). The
    hardware's expired leases are taken back first (`_reclaim`)."""
    expires = now + timedelta(seconds=policy.lease_secs)
    with db.transaction() as session:
        connection = session.connection()  # plain Core execution: the ORM's bulk machinery costs more
        _reclaim(db, connection, now, policy, hardware_id)
        room = min(limit, _room(connection, worker_id, now, policy))
        rows = connection.execute(_take(hardware_id, room, worker_id, now, expires)).all() if room > 0 else []
        kinds = {(r.workload_id, r.timing_kind) for r in rows}
        best = {(w, k): _best_secs(connection, w, hardware_id, k) for w, k in kinds}
        confirming = {(r.workload_id, r.timing_kind) for r in rows if r.held_result is not None}
        versus = {(w, k): _best_record(connection, w, hardware_id, k) for w, k in confirming}
    return [
        LeasedCandidate(
            id=r.id,
            task_id=r.task_id,
            spec=db.workload(r.workload_id).spec,
            trace=r.trace,
            versus=versus.get((r.workload_id, r.timing_kind)) if r.held_result is not None else None,
            best_secs=best[r.workload_id, r.timing_kind],
            lease_expires_at=expires,
            timing=_TIMING_OF_KIND[TimingKind(r.timing_kind)],
        )
        for r in sorted(rows)
    ]


def _room(connection: Connection, worker_id: int, now: datetime, policy: LeasePolicy) -> int:
    """How many more candidates the worker may hold: none while it is throttled."""
    throttled = connection.scalar(select(WorkerRow.throttled_until).where(WorkerRow.id == worker_id))
    if throttled is not None and throttled > now:
        return 0
    held = connection.scalar(
        select(func.count()).where(
            CandidateRow.worker_id == worker_id, CandidateRow.status == CandidateStatus.LEASED.value
        )
    )
    return max(0, policy.max_leases - (held or 0))


# How a worker must time a candidate of each kind (None: its own way, warm): a model's layer as a
# forward pass runs it, as `tune_model` times it.
_TIMING_OF_KIND: dict[TimingKind, dict[str, Any] | None] = {
    TimingKind.WARM: None,
    TimingKind.COLD: asdict(TimingConfig(flush_cache=True)),
    TimingKind.LAYER: asdict(MODEL_TIMING),
}


def _take(hardware_id: int, limit: int, worker_id: int, now: datetime, expires: datetime) -> Any:
    """UPDATE ... RETURNING that leases the first `limit` pending candidates in fair order; rows
    another transaction holds are skipped, never waited for. No candidate of an ended task is
    pending: ending a task withdraws its candidates, and `enqueue` adds none to a task that ended."""
    pending = and_(
        CandidateRow.hardware_id == hardware_id, CandidateRow.status == CandidateStatus.PENDING.value
    )
    query = _fair_order(select(CandidateRow.id).where(pending), hardware_id, pending)
    chosen = query.limit(limit).with_for_update(skip_locked=True, of=CandidateRow).scalar_subquery()
    return (
        update(CandidateRow)
        .where(CandidateRow.id.in_(chosen))
        .values(
            status=CandidateStatus.LEASED.value,
            worker_id=worker_id,
            leased_at=now,
            lease_expires_at=expires,
            attempts=CandidateRow.attempts + 1,
        )
        .returning(
            CandidateRow.id,
            CandidateRow.task_id,
            CandidateRow.trace,
            CandidateRow.workload_id,
            CandidateRow.timing_kind,
            CandidateRow.held_result,
        )
    )


def _fair_order(query: Select[int], hardware_id: int, available: ColumnElement[bool]) -> Select[int]:
    """The queue in the order that shares the hardware's workers fairly: clients (tokens) first, then
    their tasks. A would-be best waiting for its re-measurement goes before all (its task learns of it
    only then), then the candidates of the token with the fewest candidates being measured right now
    (its share of the fleet at this moment; tasks without a token count as one client), then those
    of the task least advanced: measured, being measured, and ahead of it in its task's queue, so a
    task that just started goes first and a batch spreads over the tasks that wait. Ordering by
    candidate id alone served tasks in the order they were submitted: 200 tasks submitted at once left
    the last ones waiting for all the others' queued candidates."""
    client = func.coalesce(TaskRow.token_id, 0)
    leased = and_(
        CandidateRow.hardware_id == hardware_id, CandidateRow.status == CandidateStatus.LEASED.value
    )
    by_task = (
        select(CandidateRow.task_id, func.count().label("n"))
        .where(leased)
        .group_by(CandidateRow.task_id)
        .subquery()
    )
    by_client = (
        select(client.label("client"), func.count().label("n"))
        .select_from(CandidateRow)
        .join(TaskRow, TaskRow.id == CandidateRow.task_id)
        .where(leased)
        .group_by(client)
        .subquery()
    )
    # Row locks and window functions do not mix in one SELECT: the places in line are a subquery.
    place = func.row_number().over(partition_by=CandidateRow.task_id, order_by=CandidateRow.id)
    ahead = (
        select(CandidateRow.id, place.label("place"))
        .where(CandidateRow.hardware_id == hardware_id, available)
        .subquery()
    )
    return (
        query.join(ahead, ahead.c.id == CandidateRow.id)
        .join(TaskRow, TaskRow.id == CandidateRow.task_id)
        .outerjoin(by_client, by_client.c.client == client)
        .outerjoin(by_task, by_task.c.task_id == CandidateRow.task_id)
        .order_by(
            CandidateRow.held_result.is_(None),
            func.coalesce(by_client.c.n, 0),
            TaskRow.trials_done + func.coalesce(by_task.c.n, 0) + ahead.c.place,
            CandidateRow.id,
        )
    )


def _best_secs(connection: Connection, workload_id: int, hardware_id: int, timing_kind: str) -> float | None:
    return connection.scalar(
        select(func.min(RecordRow.median_secs)).where(
            RecordRow.workload_id == workload_id,
            RecordRow.hardware_id == hardware_id,
            RecordRow.timing_kind == timing_kind,
            RecordRow.status == Status.OK.value,
        )
    )


def _best_record(
    connection: Connection, workload_id: int, hardware_id: int, timing_kind: str
) -> LeasedBest | None:
    """The best record's id and program, for a would-be best's second lease to time beside."""
    row = connection.execute(
        select(RecordRow.id, RecordRow.trace)
        .where(
            RecordRow.workload_id == workload_id,
            RecordRow.hardware_id == hardware_id,
            RecordRow.timing_kind == timing_kind,
            RecordRow.status == Status.OK.value,
        )
        .order_by(RecordRow.median_secs, RecordRow.id)
        .limit(1)
    ).one_or_none()
    return None if row is None else LeasedBest(record_id=row.id, trace=row.trace)


def _versus(connection: Connection, c: Any, result: ResultIn, fastest_secs: float) -> Versus | None:
    """The best's times beside a would-be best's second run, with the time that best ranks by; left
    out (the plain rule) unless they are of a record of the candidate's own workload, hardware and
    timing, and possible on the hardware."""
    if c.held_result is None or result.versus_record_id is None or min(result.versus_run_secs) < fastest_secs:
        return None
    best_secs = connection.scalar(
        select(RecordRow.median_secs).where(
            RecordRow.id == result.versus_record_id,
            RecordRow.workload_id == c.workload_id,
            RecordRow.hardware_id == c.hardware_id,
            RecordRow.timing_kind == c.timing_kind,
            RecordRow.status == Status.OK.value,
        )
    )
    if best_secs is None:
        return None
    return Versus(RunResult(Status.OK, list(result.versus_run_secs)), best_secs)


def renew_leases(
    db: Database, *, worker_id: int, now: datetime, policy: LeasePolicy, holding: Sequence[int] | None = None
) -> int:
    """Extend the leases the worker holds (its heartbeat), each to at most `max_age_secs` after it was
    given; returns how many it renewed.

    `holding` names the candidates the worker knows it holds (None: all, as older workers beat). A
    lease it does not name is not renewed: one whose answer never reached the worker (its
    coordinator killed mid-request, the connection cut after the commit) then expires as a lease
    does, instead of being kept alive by the worker's heartbeats for as long as it runs."""
    where = [CandidateRow.worker_id == worker_id, CandidateRow.status == CandidateStatus.LEASED]
    if holding is not None:
        where.append(CandidateRow.id.in_(holding))
    renewed = now + timedelta(seconds=policy.lease_secs)
    age = timedelta(seconds=policy.max_age_secs)
    with db.transaction() as session:
        held = session.execute(
            select(CandidateRow.id, CandidateRow.leased_at)
            .where(*where)
            .order_by(CandidateRow.id)
            .with_for_update()
        ).all()
        young = [r.id for r in held if r.leased_at is None or r.leased_at + age >= renewed]
        if young:
            session.execute(
                update(CandidateRow).where(CandidateRow.id.in_(young)).values(lease_expires_at=renewed)
            )
        for r in held:
            if r.id not in young:  # renewed to its end of life, no further
                session.execute(
                    update(CandidateRow)
                    .where(CandidateRow.id == r.id)
                    .values(lease_expires_at=r.leased_at + age)
                )
        return len(held)


def release(db: Database, *, worker_id: int, candidate_ids: Sequence[int] | None = None) -> int:
    """Give leases back (a worker stopping before it measured them): pending again at once, and the
    attempt not counted. None releases every lease the worker holds. Returns how many were released."""
    where = [CandidateRow.worker_id == worker_id, CandidateRow.status == CandidateStatus.LEASED]
    if candidate_ids is not None:
        where.append(CandidateRow.id.in_(candidate_ids))
    with db.transaction() as session:
        held = lock_candidates(session, *where)
        if held:
            session.execute(
                update(CandidateRow)
                .where(CandidateRow.id.in_(held))
                .values(
                    status=CandidateStatus.PENDING.value,
                    worker_id=None,
                    leased_at=None,
                    lease_expires_at=None,
                    attempts=CandidateRow.attempts - 1,
                )
            )
        return len(held)


def submit(
    db: Database,
    *,
    worker_id: int,
    worker: str,
    submissions: Sequence[ResultIn],
    gflops_per_core: float,
) -> list[Outcome]:
    """Judge and store each result, in one transaction: the records, the candidates done or held,
    the tasks' counts. `worker` is how records name the worker; `gflops_per_core` bounds what a core
    of hardware without a registered peak can do. The best a result is compared with may be a moment
    old (another transaction confirming a new one): bests only fall, so a stale one only makes this
    hold a result that then needs no confirmation, never store one that did.

    A result for a cancelled task's candidate is kept (it is a real measurement) but not counted."""
    by_id = {s.candidate_id: s for s in submissions}
    outcomes: dict[int, Outcome] = {}
    with db.transaction() as session:
        connection = session.connection()
        ceiling = _ceiling(connection, worker_id, gflops_per_core)
        rows = connection.execute(
            select(*_CANDIDATE_COLUMNS)
            .where(CandidateRow.id.in_(by_id))
            .order_by(CandidateRow.id)
            .with_for_update()
        ).all()
        best: dict[tuple[int, str], float | None] = {}
        done: list[tuple[Any, NewRecord]] = []
        for r in rows:
            result = by_id[r.id]
            fastest_secs = db.workload(r.workload_id).flops / ceiling
            outcome = _judge(r, result, worker_id, fastest_secs)
            if outcome is Outcome.ACCEPTED and r.held_result is None and result.ok:
                kind = r.workload_id, r.timing_kind
                if kind not in best:
                    best[kind] = _best_secs(connection, r.workload_id, r.hardware_id, r.timing_kind)
                if would_be_best(result.run_result(), best[kind]):
                    outcome = Outcome.CONFIRMING
            outcomes[r.id] = outcome
            if outcome is Outcome.CONFIRMING:
                _hold(connection, r, result, worker)
            elif outcome is Outcome.ACCEPTED:
                done.append((r, _record(r, result, worker, _versus(connection, r, result, fastest_secs))))
        _finish(connection, db, done)
        if any(o in (Outcome.ACCEPTED, Outcome.CONFIRMING) for o in outcomes.values()):
            # A result: the worker answers, whatever leases it lost before.
            connection.execute(
                update(WorkerRow).where(WorkerRow.id == worker_id, WorkerRow.strikes > 0).values(strikes=0)
            )
    return [outcomes.get(s.candidate_id, Outcome.UNKNOWN) for s in submissions]


def _ceiling(connection: Connection, worker_id: int, gflops_per_core: float) -> float:
    """The most flops per second the worker's hardware can run: its registered peak, else a generous
    ceiling per core (inf for an unknown worker, whose results are refused anyway)."""
    row = connection.execute(
        select(HardwareRow.cores, HardwareRow.peak_gflops)
        .join(WorkerRow, WorkerRow.hardware_id == HardwareRow.id)
        .where(WorkerRow.id == worker_id)
    ).one_or_none()
    if row is None:
        return inf
    return 1e9 * (row.peak_gflops if row.peak_gflops is not None else gflops_per_core * row.cores)


def _judge(r: Any, result: ResultIn, worker_id: int, fastest_secs: float) -> Outcome:
    """Whether the result counts: from the lease's holder, not done before, physically possible.
    `fastest_secs` is the least time the workload can take on the hardware."""
    if r.worker_id != worker_id or r.status == CandidateStatus.PENDING.value:
        return Outcome.REFUSED
    if r.status == CandidateStatus.DONE.value:
        return Outcome.DUPLICATE
    if result.ok and min(result.run_secs) < fastest_secs:
        return Outcome.IMPOSSIBLE
    if result.timing and TimingConfig.from_dict(result.timing).kind != r.timing_kind:
        return Outcome.REFUSED  # timed warm when a layer's time was asked for, or the reverse
    return Outcome.ACCEPTED


def _hold(connection: Connection, r: Any, result: ResultIn, worker: str) -> None:
    """Keep a would-be best on its candidate and put the candidate back in the queue, for a second
    lease to re-measure, with attempts of its own; a candidate withdrawn meanwhile (its task ended)
    keeps the result, unranked, and is not measured again."""
    held = {name: getattr(result, name) for name in _HELD} | {"worker": worker}
    leased = r.status == CandidateStatus.LEASED.value
    connection.execute(
        update(CandidateRow)
        .where(CandidateRow.id == r.id)
        .values(
            held_result=held,
            status=CandidateStatus.PENDING.value if leased else r.status,
            worker_id=None,
            lease_expires_at=None,
            attempts=0,
        )
    )


def _record(c: Any, result: ResultIn, worker: str, versus: Versus | None = None) -> NewRecord:
    """The record of a result: on its own, or with the held result it re-measures (`runner.confirm`:
    both runs' repeats, ranked by the slower median or, timed beside the best (`versus`), by their
    ratio; a failed re-measurement is the record's failure).
    A confirmed record names the worker of the first measurement, its message the second; a failed one
    names the worker that saw it fail."""
    held = c.held_result
    measured, ranked, timing = result.run_result(), None, result.timing
    if held is not None:
        first = RunResult(Status.OK, held["run_secs"], held["message"], held["build_secs"])
        confirmed = confirm(first, measured, by=worker, versus=versus)
        measured, ranked = confirmed.result, confirmed.ranked_secs
        if ranked is not None:
            timing, worker = held["timing"], held["worker"]
    return NewRecord(
        workload_id=c.workload_id,
        hardware_id=c.hardware_id,
        task_id=c.task_id,
        candidate_id=c.id,
        trace=c.trace,
        program_hash=c.program_hash,
        timing_kind=c.timing_kind,
        status=measured.status.value,
        run_secs=measured.run_secs,
        build_secs=measured.build_secs,
        message=measured.message,
        timing=timing,
        worker=worker,
        remeasured=held is not None,
        ranked_secs=ranked,
    )


_CANDIDATE_COLUMNS = (
    CandidateRow.id,
    CandidateRow.task_id,
    CandidateRow.workload_id,
    CandidateRow.hardware_id,
    CandidateRow.trace,
    CandidateRow.program_hash,
    CandidateRow.timing_kind,
    CandidateRow.status,
    CandidateRow.worker_id,
    CandidateRow.held_result,
)


def _finish(connection: Connection, db: Database, done: Sequence[tuple[Any, NewRecord]]) -> None:
    """Store the records of locked, unfinished candidates; mark them done; count them for their tasks
    (tasks in id order, after the candidates: the queue's locking order)."""
    if not done:
        return
    db.insert_records(connection, [record for _, record in done])
    connection.execute(
        update(CandidateRow)
        .where(CandidateRow.id.in_([c.id for c, _ in done]))
        .values(status=CandidateStatus.DONE.value, lease_expires_at=None)
    )
    counted = Counter(c.task_id for c, _ in done if c.status != CandidateStatus.CANCELLED.value)
    for task_id in sorted(counted):
        connection.execute(
            update(TaskRow)
            .where(TaskRow.id == task_id)
            .values(trials_done=TaskRow.trials_done + counted[task_id])
        )


def reclaim_expired(db: Database, *, now: datetime, policy: LeasePolicy) -> int:
    """Take back every expired lease (`_reclaim`), whatever its hardware; returns how many candidates
    were given up."""
    with db.transaction() as session:
        return _reclaim(db, session.connection(), now, policy)


def _reclaim(
    db: Database, connection: Connection, now: datetime, policy: LeasePolicy, hardware_id: int | None = None
) -> int:
    """Leases that expired (their worker died, hung, or held them without answering) go back to the
    queue, their worker noted on the candidate (`lost_by`) and struck (`_strike`); a candidate that
    `max_attempts` different workers lost becomes a timeout record. Returns how many were given up."""
    where = [CandidateRow.status == CandidateStatus.LEASED.value, CandidateRow.lease_expires_at < now]
    if hardware_id is not None:
        where.append(CandidateRow.hardware_id == hardware_id)
    rows = connection.execute(
        select(*_CANDIDATE_COLUMNS, CandidateRow.lost_by)
        .where(*where)
        .order_by(CandidateRow.id)
        .with_for_update(skip_locked=True)
    ).all()
    given_up = []
    for r in rows:
        lost = sorted({*(r.lost_by or []), r.worker_id})
        if len(lost) >= policy.max_attempts:
            message = (
                f"gave up after {len(lost)} different workers lost its lease: each died, hung or did not "
                "answer while measuring it"
            )
            timeout = ResultIn(candidate_id=r.id, status=Status.TIMEOUT, message=message)
            given_up.append((r, _record(r, timeout, "")))
            continue
        connection.execute(
            update(CandidateRow)
            .where(CandidateRow.id == r.id)
            .values(
                status=CandidateStatus.PENDING.value,
                worker_id=None,
                leased_at=None,
                lease_expires_at=None,
                lost_by=lost,
            )
        )
    _finish(connection, db, given_up)
    _strike(connection, Counter(r.worker_id for r in rows), now, policy)
    return len(given_up)


def _strike(connection: Connection, lost: Counter[int], now: datetime, policy: LeasePolicy) -> None:
    """Count the leases each worker let expire; one that reaches `policy.strikes` without a result in
    between is throttled (no lease until `throttle_secs` from now) and logged: a worker that leases
    and never answers, or one cut off from the coordinator, should be looked at."""
    for worker_id in sorted(lost):  # workers in id order: concurrent reclaims cannot deadlock
        struck = connection.execute(
            update(WorkerRow)
            .where(WorkerRow.id == worker_id)
            .values(strikes=WorkerRow.strikes + lost[worker_id])
            .returning(WorkerRow.strikes, WorkerRow.name)
        ).one_or_none()
        if struck is None or struck.strikes < policy.strikes:
            continue
        until = now + timedelta(seconds=policy.throttle_secs)
        connection.execute(
            update(WorkerRow).where(WorkerRow.id == worker_id).values(strikes=0, throttled_until=until)
        )
        log.warning(
            "worker %s#%d let %d leases expire without a result: it gets no lease until %s",
            struck.name,
            worker_id,
            struck.strikes,
            f"{until:%Y-%m-%d %H:%M:%S} UTC",
        )


def counts(db: Database, *, task_id: int) -> QueueCounts:
    with db.transaction() as session:
        rows = session.execute(
            select(CandidateRow.status, func.count())
            .where(CandidateRow.task_id == task_id)
            .group_by(CandidateRow.status)
        ).all()
    by_status = {status: n for status, n in rows}
    return QueueCounts(**{f.name: by_status.get(f.name, 0) for f in fields(QueueCounts)})


@dataclass(frozen=True)
class TaskProgress:
    """Where a task stands, for the search loop to choose what to advance: its budget, its client,
    its candidates by status."""

    task_id: int
    token_id: int | None
    trials: int
    counts: QueueCounts


def progress(db: Database, *, task_ids: Sequence[int]) -> list[TaskProgress]:
    """Each of these tasks' progress, in two queries whatever their number (the loop asks every tick)."""
    with db.transaction() as session:
        budgets = select(TaskRow.id, TaskRow.token_id, TaskRow.trials).where(TaskRow.id.in_(task_ids))
        tasks = session.execute(budgets).all()
        rows = session.execute(
            select(CandidateRow.task_id, CandidateRow.status, func.count())
            .where(CandidateRow.task_id.in_(task_ids))
            .group_by(CandidateRow.task_id, CandidateRow.status)
        ).all()
    by_task: dict[int, dict[str, int]] = {}
    for task_id, status, n in rows:
        by_task.setdefault(task_id, {})[status] = n
    return [
        TaskProgress(
            t.id,
            t.token_id,
            t.trials,
            QueueCounts(**{f.name: by_task.get(t.id, {}).get(f.name, 0) for f in fields(QueueCounts)}),
        )
        for t in sorted(tasks)
    ]


def queued_program_hashes(db: Database, *, workload_id: int, hardware_id: int, timing_kind: str) -> set[str]:
    """Every program queued for the pair timed as `timing_kind`, in any state: a search must not
    propose them again."""
    query = select(CandidateRow.program_hash).where(
        CandidateRow.workload_id == workload_id,
        CandidateRow.hardware_id == hardware_id,
        CandidateRow.timing_kind == timing_kind,
    )
    with db.transaction() as session:
        return set(session.scalars(query))


def lock_candidates(session: Session, *where: Any) -> list[int]:
    """Lock the matching candidate rows in id order, and return their ids: every transaction that
    locks candidates does it this way, before it touches a task row, so none can deadlock."""
    return list(
        session.scalars(select(CandidateRow.id).where(*where).order_by(CandidateRow.id).with_for_update())
    )
