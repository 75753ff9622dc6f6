"""Per-token quotas: how much of the fleet one token's active tasks and models may hold at once (tasks,
trials still to measure, and the worker time those trials are estimated to take), so one client cannot
occupy every worker. What ended no longer counts: a quota frees up as tasks finish or are cancelled.

A submission is checked and inserted in one transaction that first locks the token's row, so two
submissions of one token at once (on PostgreSQL; SQLite runs write transactions one at a time anyway)
cannot both pass the check on the same count.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from tuner.database.database import Database, new_task
from tuner.database.records import ACTIVE, NewWorkload
from tuner.database.schema import ModelRow, TaskRow, TokenRow


@dataclass(frozen=True)
class Usage:
    """What a token's active tasks hold: the tasks, their trials still to measure, and the worker
    seconds those trials are estimated to take."""

    tasks: int
    trials: int
    worker_secs: float


Quota = Usage  # the same three numbers, as limits


class OverQuota(Exception):
    """A submission that would take a token past one of its limits; the message says which and how
    far, and what frees it."""


def usage(session: Session, token_id: int) -> Usage:
    """A model counts as one task holding its whole budget (its member tasks do not count again)."""
    left = case((TaskRow.trials > TaskRow.trials_done, TaskRow.trials - TaskRow.trials_done), else_=0)
    tasks, trials, secs = session.execute(
        select(func.count(), func.sum(left), func.sum(left * TaskRow.candidate_secs)).where(
            TaskRow.token_id == token_id, TaskRow.status.in_(ACTIVE), TaskRow.model_id.is_(None)
        )
    ).one()
    model_left = case(
        (ModelRow.trials > ModelRow.trials_done, ModelRow.trials - ModelRow.trials_done), else_=0
    )
    models, model_trials, model_secs = session.execute(
        select(func.count(), func.sum(model_left), func.sum(model_left * ModelRow.candidate_secs)).where(
            ModelRow.token_id == token_id, ModelRow.status.in_(ACTIVE)
        )
    ).one()
    return Usage(
        tasks + models,
        int(trials or 0) + int(model_trials or 0),
        float(secs or 0.0) + float(model_secs or 0.0),
    )


def check_quota(session: Session, token_id: int, asked: Usage, quota: Quota | None) -> None:
    """Lock the token's row (two submissions of one token at once cannot both pass on the same
    count), then raise OverQuota if `asked` would take it past `quota` (None: no limit)."""
    session.execute(select(TokenRow.id).where(TokenRow.id == token_id).with_for_update())
    if quota is not None:
        _check(usage(session, token_id), asked, quota)


def precheck(db: Database, *, token_id: int, asked: Usage, quota: Quota | None) -> None:
    """Raise OverQuota if `asked` is already over the token's quota, before any work is done for it
    (a model's import costs seconds of CPU): `check_quota` decides again, under the lock, when the
    submission is written."""
    if quota is not None:
        with db.transaction() as session:
            _check(usage(session, token_id), asked, quota)


def submit_task(
    db: Database,
    *,
    token_id: int,
    quota: Quota | None,
    workload: NewWorkload,
    hardware_id: int,
    strategy: str,
    trials: int,
    seed: int,
    candidate_secs: float,
) -> int:
    """A new pending task of token `token_id` (and its workload's row, if new), if it stays within
    `quota` (None: no limit, an admin's token); raises OverQuota otherwise, and writes nothing."""
    with db.transaction() as session:
        check_quota(session, token_id, Usage(1, trials, trials * candidate_secs), quota)
        task = new_task(
            workload_id=db.workload_in(session, workload),
            hardware_id=hardware_id,
            strategy=strategy,
            trials=trials,
            seed=seed,
            token_id=token_id,
            candidate_secs=candidate_secs,
        )
        session.add(task)
        session.flush()
        return task.id


def _check(used: Usage, asked: Usage, quota: Quota) -> None:
    if used.tasks + asked.tasks > quota.tasks:
        raise OverQuota(
            f"this token has {used.tasks} active tasks, its quota is {quota.tasks}: wait for one to "
            "finish, or cancel one"
        )
    if used.trials + asked.trials > quota.trials:
        raise OverQuota(
            f"{asked.trials} more trials would give this token's active tasks {used.trials + asked.trials} "
            f"trials to measure, over its quota of {quota.trials}"
        )
    if used.worker_secs + asked.worker_secs > quota.worker_secs:
        raise OverQuota(
            f"this task is estimated at {asked.worker_secs / 3600:.2f} worker-hours, and this token's "
            f"active tasks hold {used.worker_secs / 3600:.2f}: over its quota of "
            f"{quota.worker_secs / 3600:.2f} (fewer trials, or a smaller workload)"
        )
