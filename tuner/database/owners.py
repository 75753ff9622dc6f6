"""Which coordinator process runs each active task's search loop.

A claim is a lease on the task row: the owner renews it while it lives; when it lapses (the process
died, or hung), any coordinator takes the task over and resumes it from the database. The claim is a
single conditional UPDATE, so two coordinators racing for a task on PostgreSQL cannot both win: the
second re-checks the row after the first commits and finds it owned.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import CursorResult, and_, case, func, or_, select, update
from sqlalchemy.orm import Session

from tuner.database.database import Database
from tuner.database.queue import lock_candidates
from tuner.database.records import ACTIVE, CandidateStatus, TaskStatus
from tuner.database.schema import CandidateRow, TaskRow


def claim_tasks(db: Database, *, owner: str, now: datetime, claim_secs: float) -> list[int]:
    """Own every active task that has no live owner, and renew the claims `owner` holds once half
    their time has passed; returns the ids of the tasks it owns now, which are running.

    The rows are locked in id order, the order in which results lock the tasks they count, so a claim
    and a result cannot deadlock on PostgreSQL. Renewing at half time rather than every tick keeps a
    task's row (and its updated_at, which says when the task last changed) still between results."""
    until = now + timedelta(seconds=claim_secs)
    stale = or_(
        TaskRow.owner.is_(None),
        TaskRow.owner_until < now,
        and_(TaskRow.owner == owner, TaskRow.owner_until < now + timedelta(seconds=claim_secs / 2)),
    )
    active = TaskRow.status.in_(ACTIVE)
    with db.transaction() as session:
        ids = session.scalars(
            select(TaskRow.id).where(active, stale).order_by(TaskRow.id).with_for_update()
        ).all()
        if ids:
            session.execute(
                update(TaskRow)
                .where(TaskRow.id.in_(ids), active, stale)
                .values(
                    owner=owner,
                    owner_until=until,
                    status=TaskStatus.RUNNING.value,
                    updated_at=case((TaskRow.owner == owner, TaskRow.updated_at), else_=func.now()),
                )
            )
        return sorted(session.scalars(select(TaskRow.id).where(active, TaskRow.owner == owner)))


def finish_task(
    db: Database,
    *,
    task_id: int,
    owner: str,
    status: TaskStatus,
    message: str = "",
    traceback: str | None = None,
) -> bool:
    """End a task its owner was running, withdrawing any candidate still queued; False if `owner` no
    longer owns it (it was cancelled, or taken over after the owner stalled). `traceback` is that of
    an error in its search, which failed it."""
    with db.transaction() as session:
        leftovers = _lock_unfinished(session, task_id)
        result = session.execute(
            update(TaskRow)
            .where(TaskRow.id == task_id, TaskRow.owner == owner, TaskRow.status.in_(ACTIVE))
            .values(status=status.value, message=message, traceback=traceback, owner=None, owner_until=None)
        )
        assert isinstance(result, CursorResult)  # as the ORM returns for an UPDATE without RETURNING
        if result.rowcount != 1:
            return False
        _withdraw(session, leftovers)
        return True


def disown(db: Database, *, owner: str) -> None:
    """Give up every claim of `owner` (a coordinator shutting down): another coordinator may take
    them at once."""
    with db.transaction() as session:
        session.execute(update(TaskRow).where(TaskRow.owner == owner).values(owner=None, owner_until=None))


def cancel_task(
    db: Database, *, task_id: int, message: str, status: TaskStatus = TaskStatus.CANCELLED
) -> bool:
    """Stop an active task whoever owns it, and withdraw its candidates that no worker has finished;
    False if it had already ended. Raises KeyError for an unknown task. `status` is what it ends as:
    cancelled, or done when the model it is a layer of has ended."""
    with db.transaction() as session:
        leftovers = _lock_unfinished(session, task_id)
        # NO KEY UPDATE: a concurrent cancel or finish holds the row FOR KEY SHARE too, and waits.
        task = session.get(TaskRow, task_id, with_for_update={"key_share": True})
        if task is None:
            raise KeyError(task_id)
        if task.status not in ACTIVE:
            return False
        task.status, task.message = status.value, message
        task.owner, task.owner_until = None, None
        _withdraw(session, leftovers)
        return True


def _lock_unfinished(session: Session, task_id: int) -> list[int]:
    """The task's queued candidates no worker has finished, locked before the task row is updated:
    the order in which every transaction of the queue locks them.

    The task row is held FOR KEY SHARE meanwhile: that waits for an `enqueue` in progress (which
    holds it FOR UPDATE) and keeps the next one out, so no candidate is added behind the list; and it
    does not conflict with the updates a result makes to the task's count, so it cannot deadlock."""
    session.execute(
        select(TaskRow.id).where(TaskRow.id == task_id).with_for_update(read=True, key_share=True)
    )
    unfinished = [CandidateStatus.PENDING.value, CandidateStatus.LEASED.value]
    return lock_candidates(session, CandidateRow.task_id == task_id, CandidateRow.status.in_(unfinished))


def _withdraw(session: Session, candidate_ids: list[int]) -> None:
    """No worker will be given them; a result already on its way is still stored, but not counted."""
    if candidate_ids:
        session.execute(
            update(CandidateRow)
            .where(CandidateRow.id.in_(candidate_ids))
            .values(status=CandidateStatus.CANCELLED.value, lease_expires_at=None)
        )
