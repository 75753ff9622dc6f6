"""Tasks: submit a workload to tune on a kind of hardware, follow it, cancel it.

A task belongs to the token that submitted it: a client token lists, reads and cancels its own tasks
only, and another's task is a 404, as if it did not exist (its id says nothing); an admin token sees
every task. The best-record queries (`records`) are shared: records are the fleet's, whoever asked.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from compiler.workloads import Workload, WorkloadError, workload_from_spec
from compiler.workloads.probe import check_finite
from tuner.database import Database, HardwareInfo, NewWorkload, Role, TaskInfo, TaskStatus, quotas
from tuner.database import queue as q
from tuner.database.owners import cancel_task
from tuner.database.tokens import TokenInfo
from tuner.service import admission
from tuner.service.deps import ClientToken, DatabaseDep, PageDep, SettingsDep
from tuner.service.errors import AUTH, BODY, documented, field_error
from tuner.service.schemas import Best, IdPath, QueuePublic, TaskCreate, TaskDetail, TaskPublic

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=documented(*AUTH))


@router.post("", status_code=status.HTTP_201_CREATED, responses=documented(*BODY, 429))
def submit_task(body: TaskCreate, db: DatabaseDep, settings: SettingsDep, holder: ClientToken) -> TaskPublic:
    """Queue a tuning task; a coordinator's search loop picks it up within a tick. Refused (422) if one
    candidate of the workload could not finish within a worker's run timeout, or its reference is not
    finite; 429 if the token's quotas are used up."""
    if body.trials > settings.max_trials:
        raise field_error("trials", f"must be <= {settings.max_trials}")
    wl = parse_workload(body.workload, "workload")
    hardware = resolve_hardware(db, body.hardware, body.cpu_model)
    cost = admission.estimate(wl, hardware, settings)
    if not cost.fits:
        raise field_error("workload", admission.refusal(wl, hardware, settings, cost))
    try:
        check_finite(wl)
    except WorkloadError as e:
        raise field_error(f"workload.{e.field}", e.message) from None
    try:
        task_id = quotas.submit_task(
            db,
            token_id=holder.id,
            quota=admission.quota(holder, settings),
            workload=NewWorkload.of(wl),
            hardware_id=hardware.id,
            strategy=body.strategy,
            trials=body.trials,
            seed=body.seed,
            candidate_secs=cost.candidate_secs,
        )
    except quotas.OverQuota as e:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, f"over quota: {e}") from None
    return task_public(db, db.get_task(task_id))


@router.get("")
def list_tasks(
    response: Response, db: DatabaseDep, holder: ClientToken, page: PageDep, status: TaskStatus | None = None
) -> list[TaskPublic]:
    """This token's tasks (an admin token's: every task), oldest first, a page at a time: a full
    page's X-Next-After header is the `after` of the next."""
    owner = None if holder.role == Role.ADMIN else holder.id
    tasks = db.tasks(status, token_id=owner, after=page.after, limit=page.limit)
    page.answer(response, [t.id for t in tasks])
    best = db.best_of_tasks([t.id for t in tasks])
    return [task_with_best(db, t, best.get(t.id)) for t in tasks]


@router.get("/{task_id}", responses=documented(404))
def get_task(task_id: IdPath, db: DatabaseDep, holder: ClientToken) -> TaskDetail:
    task = find_task(db, task_id, holder)
    flops = db.workload(task.workload_id).flops
    counts = q.counts(db, task_id=task.id)
    return TaskDetail(
        **task_public(db, task).model_dump(),
        curve=best_so_far(db.task_timings(task.id), flops),
        queue=QueuePublic(pending=counts.pending, leased=counts.leased, done=counts.done),
        traceback=task.traceback,
    )


@router.post("/{task_id}/cancel", responses=documented(404, 409))
def cancel(task_id: IdPath, db: DatabaseDep, holder: ClientToken) -> TaskPublic:
    """Stop the task and withdraw its queued candidates; results already on their way are kept."""
    find_task(db, task_id, holder)
    if not cancel_task(db, task_id=task_id, message="cancelled by a client"):
        raise HTTPException(status.HTTP_409_CONFLICT, f"task {task_id} has already ended")
    return task_public(db, db.get_task(task_id))


def parse_workload(spec: object, field: str) -> Workload:
    try:
        return workload_from_spec(spec)
    except WorkloadError as e:
        raise field_error(f"{field}.{e.field}", e.message) from None


def resolve_hardware(db: Database, key: str | None, cpu_model: str | None) -> HardwareInfo:
    """The hardware a task is for: by key, by CPU model, or the only kind registered. Only hardware an
    admin approved counts: a key a worker registered on its own is nobody's default, nor a target."""
    known = [h for h in db.hardware_list() if h.approved]
    if key is not None:
        matches = [h for h in known if h.key == key]
        field = "hardware"
    elif cpu_model is not None:
        matches = [h for h in known if h.cpu_model == cpu_model]
        field = "cpu_model"
    else:
        matches, field = known, "hardware"
    if len(matches) == 1:
        return matches[0]
    keys = ", ".join(h.key for h in known) or "none yet: start a worker, and approve its hardware"
    if not matches:
        raise field_error(field, f"no approved hardware matches; approved hardware keys: {keys}")
    raise field_error(field, f"several kinds of hardware match; give one of: {keys}")


def find_task(db: Database, task_id: int, holder: TokenInfo) -> TaskInfo:
    """The task, if this token may see it: 404 for another token's, as for one that does not exist."""
    try:
        task = db.get_task(task_id)
    except KeyError:
        task = None
    if task is None or (holder.role != Role.ADMIN and task.token_id != holder.id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no task {task_id}")
    return task


def task_public(db: Database, task: TaskInfo) -> TaskPublic:
    return task_with_best(db, task, db.best_of_tasks([task.id]).get(task.id))


def task_with_best(db: Database, task: TaskInfo, best: tuple[int, float] | None) -> TaskPublic:
    """A task as clients see it, with the fastest record of its workload on its hardware (record id,
    median seconds), which the task list looks up for all its tasks at once."""
    workload = db.workload(task.workload_id)
    return TaskPublic(
        id=task.id,
        workload_name=task.workload_name,
        workload_hash=workload.hash,
        workload_spec=workload.spec,
        hardware_key=task.hardware_key,
        strategy=task.strategy,
        trials=task.trials,
        trials_done=task.trials_done,
        status=task.status,
        message=task.message,
        best=Best(record_id=best[0], gflops=gflops(workload.flops, best[1]), median_secs=best[1])
        if best and best[1]
        else None,
        created_at=task.created_at,
        updated_at=task.updated_at,
    )


def gflops(flops: float, secs: float) -> float:
    return flops / secs / 1e9


def best_so_far(timings: list[float | None], flops: float) -> list[float]:
    curve, best = [], 0.0
    for secs in timings:
        if secs:
            best = max(best, gflops(flops, secs))
        curve.append(best)
    return curve
