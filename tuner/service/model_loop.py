"""The coordinator's model loop: it spends each model's trial budget over its member tasks, a batch at
a time, by the scheduler the embedded `tune_model` uses (`tuner.task_scheduler.next_batches`).

Each tick, for each active model: a batch is finished when its member has measured every trial it
was given and has nothing queued (or its search ended); the member's best seconds then join the
scheduler's history of it, and the model's estimated latency (sum of calls x best seconds) joins the
latency curve. Every member first gets one batch, all at once; after that a few batches are out at
a time (`model_batches_in_flight`), each given to the member the scheduler picks: the gradient
scheduler decides from the batches that came back, and counts a batch still out as one that brought
nothing, so a second batch goes to the same member only if it still promises the most. The model
ends when its budget is spent (or every member's search is exhausted); a member whose search failed
fails the model. The task loop measures the members like any other task.

Every decision is made from the database, in one transaction that holds the model's row: any
coordinator may take the step, and a restart loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from math import inf

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runner.results import Status
from tuner.database import CandidateStatus, Database, TaskStatus
from tuner.database.outage import is_outage
from tuner.database.records import ACTIVE
from tuner.database.schema import CandidateRow, ModelRow, RecordRow, TaskRow
from tuner.database.tuned_models import (
    Batch,
    active_model_ids,
    end_members,
    fail_model,
    lock_model,
    set_member_trials,
)
from tuner.task_scheduler import BatchHistory, next_batches

log = logging.getLogger(__name__)
# Trials per batch, as `tune_model` (and MetaSchedule's task scheduler) measures them by default.
BATCH_TRIALS = 16
# Batches a model keeps out at once after its first round: while one is measured the search of the
# next proposes, so the fleet is not idle between batches (the `model_batches_in_flight` setting).
BATCHES_IN_FLIGHT = 2


@dataclass(frozen=True)
class MemberState:
    """One member task as the step sees it, read in the step's transaction."""

    id: int
    status: str
    trials: int  # given so far
    done: int  # measured
    outstanding: int  # queued or leased
    weight: int
    message: str
    best_secs: float | None

    @property
    def ended(self) -> bool:
        return self.status not in ACTIVE

    @property
    def spent(self) -> int:
        """Trials of the budget it holds: what it was given, or what it measured if it ended first."""
        return min(self.trials, self.done) if self.ended else self.trials

    def idle(self) -> bool:
        """Its last batch is measured (or it can measure no more)."""
        return self.ended or (self.done >= self.trials and self.outstanding == 0)


def step_models(db: Database, batch_trials: int = BATCH_TRIALS, in_flight: int = BATCHES_IN_FLIGHT) -> None:
    """One step of every active model, then the members of ended models are ended too (a
    coordinator that died between ending a model and its members leaves them running)."""
    for model_id in active_model_ids(db):
        try:
            ended = step_model(db, model_id, batch_trials, in_flight)
        except Exception as e:
            if is_outage(e):
                raise  # not the model's fault: the next tick tries again
            # A bug, or a row the database refuses: that model fails, and the others still step.
            log.exception("model %d failed", model_id)
            fail_model(db, model_id=model_id, message=f"{type(e).__name__}: {e}")
            ended = TaskStatus.CANCELLED, "its model failed"
        if ended is not None:
            end_members(db, model_id=model_id, status=ended[0], message=ended[1])
    for model_id, status in _models_with_active_members(db):
        end_members(db, model_id=model_id, status=TaskStatus(status), message="its model has ended")


def step_model(
    db: Database, model_id: int, batch_trials: int, in_flight: int = BATCHES_IN_FLIGHT
) -> tuple[TaskStatus, str] | None:
    """Finish the model's measured batches and give out the next; returns how its members must end
    if the model ended in this step (None while it runs)."""
    with db.transaction() as session:
        model = lock_model(session, model_id, skip_locked=True)
        if model is None or model.status not in ACTIVE:
            return None
        members = _members(session, model)
        by_id = {m.id: m for m in members}
        batches = _finish_batches([Batch.from_json(b) for b in model.batches], by_id, model, members)
        model.trials_done = sum(m.done for m in members)
        model.status = TaskStatus.RUNNING.value
        failed = next((m for m in members if m.status == TaskStatus.FAILED.value), None)
        if failed is not None:
            model.status = TaskStatus.FAILED.value
            model.message = f"the search of its task {failed.id} failed: {failed.message}"
        else:
            batches += _next_batches(session, model, members, batches, batch_trials, in_flight)
            if not any(not b.done for b in batches):
                model.status = TaskStatus.DONE.value
                model.message = _done_message(model, members)
        model.batches = [b.to_json() for b in batches]
        if model.status == TaskStatus.RUNNING.value:
            return None
        status = TaskStatus.CANCELLED if model.status == TaskStatus.FAILED.value else TaskStatus.DONE
        return status, f"its model ended: {model.message or model.status}"


def _finish_batches(
    batches: list[Batch], by_id: dict[int, MemberState], model: ModelRow, members: Sequence[MemberState]
) -> list[Batch]:
    """Mark the batches whose member is idle as done, each adding a point to the latency curve."""
    out = []
    for b in batches:
        member = by_id[b.task_id]
        if not b.done and member.idle():
            b = replace(b, done=True, best_secs=member.best_secs)
            model.curve = [*model.curve, [sum(m.done for m in members), estimated_latency(members)]]
        out.append(b)
    return out


def _next_batches(
    session: Session,
    model: ModelRow,
    members: Sequence[MemberState],
    batches: list[Batch],
    batch_trials: int,
    in_flight: int,
) -> list[Batch]:
    """The scheduler's next batches (`next_batches`): each member as the finished batches and the
    batches out say. Nothing once the budget is spent."""
    left = model.trials - sum(m.spent for m in members)
    views = [
        BatchHistory(
            m.weight,
            tuple(
                inf if b.best_secs is None else b.best_secs for b in batches if b.task_id == m.id and b.done
            ),
            sum(b.task_id == m.id and not b.done for b in batches),
            m.ended,
        )
        for m in members
    ]
    out = []
    added: dict[int, int] = {}
    for i, n in next_batches(
        model.scheduler, views, left=left, batch_trials=batch_trials, in_flight=in_flight
    ):
        m = members[i]
        added[m.id] = added.get(m.id, 0) + n
        set_member_trials(session, m.id, m.trials + added[m.id])
        out.append(Batch(m.id, n))
    return out


def estimated_latency(members: Sequence[MemberState]) -> float | None:
    """The model's latency from its members' best records: sum of calls x best seconds (None until
    every member has a valid record)."""
    if any(m.best_secs is None for m in members):
        return None
    return sum(m.weight * (m.best_secs or 0.0) for m in members)


def _done_message(model: ModelRow, members: Sequence[MemberState]) -> str:
    if sum(m.spent for m in members) < model.trials:
        return "every layer's search space is exhausted before the budget"
    return ""


def _members(session: Session, model: ModelRow) -> list[MemberState]:
    rows = session.execute(
        select(
            TaskRow.id,
            TaskRow.status,
            TaskRow.trials,
            TaskRow.weight,
            TaskRow.message,
            TaskRow.workload_id,
            TaskRow.timing_kind,
        )
        .where(TaskRow.model_id == model.id)
        .order_by(TaskRow.id)
    ).all()
    ids = [r.id for r in rows]
    counts: dict[tuple[int, str], int] = {
        (task, status): n
        for task, status, n in session.execute(
            select(CandidateRow.task_id, CandidateRow.status, func.count())
            .where(CandidateRow.task_id.in_(ids))
            .group_by(CandidateRow.task_id, CandidateRow.status)
        )
    }
    out = []
    for r in rows:
        best = session.scalar(
            select(func.min(RecordRow.median_secs)).where(
                RecordRow.workload_id == r.workload_id,
                RecordRow.hardware_id == model.hardware_id,
                RecordRow.timing_kind == r.timing_kind,
                RecordRow.status == Status.OK.value,
            )
        )
        outstanding = counts.get((r.id, CandidateStatus.PENDING.value), 0) + counts.get(
            (r.id, CandidateStatus.LEASED.value), 0
        )
        done = counts.get((r.id, CandidateStatus.DONE.value), 0)
        out.append(MemberState(r.id, r.status, r.trials, done, outstanding, r.weight, r.message, best))
    return out


def _models_with_active_members(db: Database) -> list[tuple[int, str]]:
    query = (
        select(ModelRow.id, ModelRow.status)
        .join(TaskRow, TaskRow.model_id == ModelRow.id)
        .where(ModelRow.status.not_in(ACTIVE), TaskRow.status.in_(ACTIVE))
        .distinct()
    )
    with db.transaction() as session:
        return [
            (
                model_id,
                TaskStatus.DONE.value if status == TaskStatus.DONE.value else TaskStatus.CANCELLED.value,
            )
            for model_id, status in session.execute(query)
        ]
