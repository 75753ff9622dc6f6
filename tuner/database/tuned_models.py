"""Models in the service: a whole model tuned under one trial budget, its layers member tasks.

A model row keeps the budget, the scheduler's name and its log: the batches given so far (which
member, how many trials, whether it has finished) and the estimated model latency after each finished
batch. Member tasks are ordinary tasks (`tasks.model_id`), measured by workers like any other; their
`trials` is what the model has given them so far, and they wait, still active, when it is measured,
until the model gives them another batch or ends (`tuner.service.model_loop` decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, defer

from runner.results import TimingKind
from tuner.database.database import Database, _task_info, _tasks_query, new_task
from tuner.database.owners import cancel_task
from tuner.database.quotas import Quota, Usage, check_quota
from tuner.database.records import ACTIVE, NewWorkload, TaskInfo, TaskStatus
from tuner.database.schema import HardwareRow, ModelRow, TaskRow

MEMBER_STRATEGY = "evolutionary"


@dataclass(frozen=True)
class NewMember:
    """A layer of a submitted model: its workload, calls per forward pass, and the estimated seconds
    of one of its candidates on a worker."""

    workload: NewWorkload
    weight: int
    candidate_secs: float


@dataclass(frozen=True)
class Batch:
    """Trials the model gave one member task; once measured (`done`), the member's best seconds then
    (None: no valid record yet), which the scheduler's history of the member is made of."""

    task_id: int
    trials: int
    done: bool = False
    best_secs: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task_id, "trials": self.trials, "done": self.done, "best": self.best_secs}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Batch:
        best = data.get("best")
        return Batch(
            int(data["task"]), int(data["trials"]), bool(data["done"]), None if best is None else float(best)
        )


@dataclass(frozen=True)
class ModelInfo:
    id: int
    name: str
    source_format: str
    hardware_id: int
    hardware_key: str
    scheduler: str
    trials: int
    trials_done: int
    seed: int
    status: TaskStatus
    message: str
    # A model tuned for ranges of sizes: the dims it was submitted with ({"sequence": [1, 512]});
    # None for static shapes.
    dims: dict[str, Any] | None
    batches: tuple[Batch, ...]
    curve: tuple[tuple[int, float | None], ...]  # (trials measured, estimated latency secs)
    token_id: int | None
    candidate_secs: float
    created_at: datetime
    updated_at: datetime

    @property
    def assigned(self) -> int:
        return sum(b.trials for b in self.batches)


def submit_model(
    db: Database,
    *,
    token_id: int,
    quota: Quota | None,
    name: str,
    source: bytes,
    source_format: str,
    hardware_id: int,
    scheduler: str,
    trials: int,
    seed: int,
    members: Sequence[NewMember],
    dims: dict[str, Any] | None = None,
) -> int:
    """A new pending model of token `token_id` with one member task per layer, none given trials
    yet, if it stays within `quota` (a model counts as one task holding its whole budget); raises
    quotas.OverQuota otherwise. `dims` for a model tuned for ranges of sizes (`ModelInfo.dims`)."""
    candidate_secs = max(m.candidate_secs for m in members)
    with db.transaction() as session:
        check_quota(session, token_id, Usage(1, trials, trials * candidate_secs), quota)
        model = ModelRow(
            name=name,
            source=source,
            source_format=source_format,
            dims=dims,
            hardware_id=hardware_id,
            scheduler=scheduler,
            trials=trials,
            trials_done=0,
            seed=seed,
            status=TaskStatus.PENDING.value,
            message="",
            batches=[],
            curve=[],
            token_id=token_id,
            candidate_secs=candidate_secs,
        )
        session.add(model)
        session.flush()
        for k, m in enumerate(members):
            task = new_task(
                workload_id=db.workload_in(session, m.workload),
                hardware_id=hardware_id,
                strategy=MEMBER_STRATEGY,
                trials=0,
                seed=seed + k,
                token_id=token_id,
                candidate_secs=m.candidate_secs,
                timing_kind=TimingKind.LAYER,
            )
            task.model_id, task.weight = model.id, m.weight
            session.add(task)
        return model.id


def get_model(db: Database, model_id: int) -> ModelInfo:
    """Raises KeyError for an unknown model."""
    with db.transaction() as session:
        row = session.execute(_models_query().where(ModelRow.id == model_id)).one_or_none()
        if row is None:
            raise KeyError(model_id)
        return _model_info(*row)


def models(
    db: Database,
    *,
    token_id: int | None = None,
    status: Sequence[str] | None = None,
    after: int | None = None,
    limit: int | None = None,
) -> list[ModelInfo]:
    """Every model, oldest first; those of one token, or in these statuses, if given; a page of them:
    ids above `after`, `limit` at most."""
    query = _models_query().order_by(ModelRow.id).limit(limit)
    if token_id is not None:
        query = query.where(ModelRow.token_id == token_id)
    if status is not None:
        query = query.where(ModelRow.status.in_(status))
    if after is not None:
        query = query.where(ModelRow.id > after)
    with db.transaction() as session:
        return [_model_info(*row) for row in session.execute(query)]


def drop_cancelled_sources(db: Database, *, before: datetime) -> int:
    """Drop the file of every model cancelled before `before` (its bytes, up to max_model_bytes, were
    kept forever: cancelled models filled the disk outside any quota). Returns how many."""
    with db.transaction() as session:
        dropped = session.execute(
            update(ModelRow)
            .where(
                ModelRow.status == TaskStatus.CANCELLED.value,
                ModelRow.updated_at < before,
                func.length(ModelRow.source) > 0,
            )
            .values(source=b"")
        )
        return int(dropped.rowcount)  # type: ignore[attr-defined]


def has_source(db: Database, model_id: int) -> bool:
    """Whether the model still has its file (a cancelled one's is dropped after a grace period)."""
    with db.transaction() as session:
        size = session.scalar(select(func.length(ModelRow.source)).where(ModelRow.id == model_id))
        return bool(size)


def source(db: Database, model_id: int) -> tuple[str, bytes]:
    """The model as submitted: (format, bytes). Raises KeyError for an unknown model."""
    with db.transaction() as session:
        row = session.execute(
            select(ModelRow.source_format, ModelRow.source).where(ModelRow.id == model_id)
        ).one_or_none()
        if row is None:
            raise KeyError(model_id)
        return row[0], row[1]


def members(db: Database, model_id: int) -> list[TaskInfo]:
    """The model's member tasks, in the order of its layers."""
    query = _tasks_query().where(TaskRow.model_id == model_id).order_by(TaskRow.id)
    with db.transaction() as session:
        return [_task_info(*row) for row in session.execute(query)]


def lock_model(session: Session, model_id: int, *, skip_locked: bool = False) -> ModelRow | None:
    """The model's row, locked for the rest of the transaction: one coordinator at a time decides
    its next batch. Taken before any of its tasks' rows (the order tasks are claimed in, by id, is
    unaffected: a model's lock is never waited for while a task row is held). With `skip_locked`,
    None if another transaction holds it (another coordinator is taking the same step)."""
    lock = {"skip_locked": True} if skip_locked else True
    return session.get(ModelRow, model_id, with_for_update=lock, populate_existing=True)


def active_model_ids(db: Database) -> list[int]:
    with db.transaction() as session:
        return list(
            session.scalars(select(ModelRow.id).where(ModelRow.status.in_(ACTIVE)).order_by(ModelRow.id))
        )


def cancel_model(db: Database, *, model_id: int, message: str) -> bool:
    """Stop an active model and every member task still active; False if it had already ended."""
    with db.transaction() as session:
        model = lock_model(session, model_id)
        if model is None:
            raise KeyError(model_id)
        if model.status not in ACTIVE:
            return False
        model.status, model.message = TaskStatus.CANCELLED.value, message
    end_members(db, model_id=model_id, status=TaskStatus.CANCELLED, message=message)
    return True


def fail_model(db: Database, *, model_id: int, message: str) -> None:
    """An error in the model's own step (a bug): it fails with the message, if it was still active."""
    with db.transaction() as session:
        model = lock_model(session, model_id)
        if model is not None and model.status in ACTIVE:
            model.status, model.message = TaskStatus.FAILED.value, message


def end_members(db: Database, *, model_id: int, status: TaskStatus, message: str) -> None:
    """End the model's member tasks that are still active, as `status` (each withdrawing its queued
    candidates, as a cancelled task does): the model has ended, and its members with it."""
    with db.transaction() as session:
        ids = list(
            session.scalars(
                select(TaskRow.id).where(TaskRow.model_id == model_id, TaskRow.status.in_(ACTIVE))
            )
        )
    for task_id in sorted(ids):
        cancel_task(db, task_id=task_id, message=message, status=status)


def set_member_trials(session: Session, task_id: int, trials: int) -> None:
    session.execute(update(TaskRow).where(TaskRow.id == task_id).values(trials=trials))


def _models_query() -> Any:
    """Without the source, which only the artifact's build reads (a model may be 64 MB)."""
    return (
        select(ModelRow, HardwareRow.key)
        .join(HardwareRow, ModelRow.hardware_id == HardwareRow.id)
        .options(defer(ModelRow.source))
    )


def _model_info(model: ModelRow, hardware_key: str) -> ModelInfo:
    return ModelInfo(
        id=model.id,
        name=model.name,
        source_format=model.source_format,
        hardware_id=model.hardware_id,
        hardware_key=hardware_key,
        scheduler=model.scheduler,
        trials=model.trials,
        trials_done=model.trials_done,
        seed=model.seed,
        status=TaskStatus(model.status),
        message=model.message,
        dims=model.dims,
        batches=tuple(Batch.from_json(b) for b in model.batches),
        curve=tuple((int(n), None if s is None else float(s)) for n, s in model.curve),
        token_id=model.token_id,
        candidate_secs=model.candidate_secs,
        created_at=model.created_at,
        updated_at=model.updated_at,
    )
