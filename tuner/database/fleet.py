"""Workers: the measuring daemons on benchmark machines, known by name and hardware, alive while
their heartbeats arrive. A worker that is no longer alive loses its leases: its candidates go to the
next worker that asks, a few heartbeats after it died rather than a whole lease later."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, select, update

from tuner.database.database import Database
from tuner.database.queue import LeasePolicy, lock_candidates, release, renew_leases
from tuner.database.records import CandidateStatus
from tuner.database.schema import CandidateRow, HardwareRow, WorkerRow


class WorkerStopped(Exception):
    """The worker said goodbye: it is not alive again until it registers anew, as a new worker."""


# Heartbeats a worker may miss (a slow request, a busy machine) before it no longer counts as alive.
MISSED_HEARTBEATS = 3


def alive_since(now: datetime, heartbeat_secs: float) -> datetime:
    """Workers seen since then, and not stopped, are alive: the one definition the API's worker list
    and the metrics share."""
    return now - timedelta(seconds=MISSED_HEARTBEATS * heartbeat_secs)


def expire_silent(db: Database, *, now: datetime, heartbeat_secs: float) -> int:
    """End now the leases of workers that are no longer alive (killed, hung, cut off): they are
    taken back at once, as expired leases, by the next lease request or `reclaim_expired`. Returns
    how many ended. The caller must have seen the database for as long as a worker may stay silent:
    heartbeats that could not arrive while it was away say nothing about the workers."""
    silent = select(WorkerRow.id).where(WorkerRow.last_seen_at < alive_since(now, heartbeat_secs))
    with db.transaction() as session:
        held = lock_candidates(
            session,
            CandidateRow.status == CandidateStatus.LEASED.value,
            CandidateRow.lease_expires_at >= now,
            CandidateRow.worker_id.in_(silent),
        )
        if held:
            session.execute(
                update(CandidateRow)
                .where(CandidateRow.id.in_(held))
                .values(lease_expires_at=alive_since(now, heartbeat_secs))
            )
        return len(held)


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    name: str
    hardware_id: int
    hardware_key: str
    token_id: int | None
    registered_at: datetime
    last_seen_at: datetime
    stopped: bool
    throttled_until: datetime | None  # no lease for it before then: it kept letting leases expire


def register_worker(
    db: Database, *, name: str, hardware_id: int, now: datetime, token_id: int | None = None
) -> int:
    """A new worker row per start: a restarted daemon is a new worker (its old leases expire)."""
    with db.transaction() as session:
        worker = WorkerRow(
            name=name, hardware_id=hardware_id, token_id=token_id, last_seen_at=now, stopped=False, strikes=0
        )
        session.add(worker)
        session.flush()
        return worker.id


def get_worker(db: Database, worker_id: int) -> WorkerInfo:
    """Raises KeyError for an unknown worker."""
    with db.transaction() as session:
        row = session.execute(_workers_query().where(WorkerRow.id == worker_id)).one_or_none()
        if row is None:
            raise KeyError(worker_id)
        return _info(*row)


def heartbeat(
    db: Database, *, worker_id: int, policy: LeasePolicy, now: datetime, holding: Sequence[int] | None = None
) -> int:
    """The worker is alive: note the time and extend the leases it names (`holding`; None: all).
    Returns how many it renewed; raises WorkerStopped if it said goodbye (a heartbeat that arrives
    late must not revive it)."""
    _seen(db, worker_id, now, stopped=False)
    return renew_leases(db, worker_id=worker_id, now=now, policy=policy, holding=holding)


def stop_worker(db: Database, *, worker_id: int, now: datetime) -> int:
    """A worker says goodbye: its leases go back to the queue at once. Returns how many."""
    _seen(db, worker_id, now, stopped=True)
    return release(db, worker_id=worker_id)


def _seen(db: Database, worker_id: int, now: datetime, *, stopped: bool) -> None:
    """Raises KeyError for an unknown worker, WorkerStopped for news of a stopped one but another
    goodbye."""
    with db.transaction() as session:
        worker = session.get(WorkerRow, worker_id)
        if worker is None:
            raise KeyError(worker_id)
        if worker.stopped and not stopped:
            raise WorkerStopped(worker_id)
        worker.last_seen_at, worker.stopped = now, stopped


def workers(
    db: Database, *, seen_since: datetime | None = None, after: int | None = None, limit: int | None = None
) -> list[WorkerInfo]:
    """Every worker (or those seen since a time and not stopped: with `alive_since`, the live ones),
    oldest first; a page of them: ids above `after`, `limit` at most."""
    query = _workers_query().order_by(WorkerRow.id).limit(limit)
    if seen_since is not None:
        query = query.where(WorkerRow.last_seen_at >= seen_since, WorkerRow.stopped.is_(False))
    if after is not None:
        query = query.where(WorkerRow.id > after)
    with db.transaction() as session:
        return [_info(*row) for row in session.execute(query)]


def _workers_query() -> Select[WorkerRow, str]:
    return select(WorkerRow, HardwareRow.key).join(HardwareRow, WorkerRow.hardware_id == HardwareRow.id)


def _info(worker: WorkerRow, hardware_key: str) -> WorkerInfo:
    return WorkerInfo(
        worker.id,
        worker.name,
        worker.hardware_id,
        hardware_key,
        worker.token_id,
        worker.registered_at,
        worker.last_seen_at,
        worker.stopped,
        worker.throttled_until,
    )
