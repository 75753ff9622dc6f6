"""Tasks: submit a workload to tune on a kind of hardware, follow it, cancel it."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from compiler.workloads import Workload, WorkloadError, workload_from_spec
from tuner.database import Database, TaskInfo, TaskStatus
from tuner.database import queue as q
from tuner.database.owners import cancel_task
from tuner.service.deps import ClientToken, DatabaseDep, SettingsDep
from tuner.service.errors import AUTH, BODY, documented, field_error
from tuner.service.schemas import Best, IdPath, QueuePublic, TaskCreate, TaskDetail, TaskPublic

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=documented(*AUTH))


@router.post("", status_code=status.HTTP_201_CREATED, responses=documented(*BODY))
def submit_task(body: TaskCreate, db: DatabaseDep, settings: SettingsDep, _: ClientToken) -> TaskPublic:
    """Queue a tuning task; a coordinator's search loop picks it up within a tick."""
    if body.trials > settings.max_trials:
        raise field_error("trials", f"must be <= {settings.max_trials}")
    wl = parse_workload(body.workload, "workload")
    hardware_id = resolve_hardware(db, body.hardware, body.cpu_model)
    workload_id = db.add_workload(hash=wl.func.structural_hash(), name=wl.name, spec=wl.spec, flops=wl.flops)
    task_id = db.add_task(
        workload_id=workload_id,
        hardware_id=hardware_id,
        strategy=body.strategy,
        trials=body.trials,
        seed=body.seed,
    )
    return task_public(db, db.get_task(task_id))


@router.get("")
def list_tasks(db: DatabaseDep, _: ClientToken, status: TaskStatus | None = None) -> list[TaskPublic]:
    tasks = db.tasks(status)
    best = db.best_of_tasks([t.id for t in tasks])
    return [task_with_best(db, t, best.get(t.id)) for t in tasks]


@router.get("/{task_id}", responses=documented(404))
def get_task(task_id: IdPath, db: DatabaseDep, _: ClientToken) -> TaskDetail:
    task = find_task(db, task_id)
    flops = db.workload(task.workload_id).flops
    counts = q.counts(db, task_id=task.id)
    return TaskDetail(
        **task_public(db, task).model_dump(),
        curve=best_so_far(db.task_timings(task.id), flops),
        queue=QueuePublic(pending=counts.pending, leased=counts.leased, done=counts.done),
        traceback=task.traceback,
    )


@router.post("/{task_id}/cancel", responses=documented(404, 409))
def cancel(task_id: IdPath, db: DatabaseDep, _: ClientToken) -> TaskPublic:
    """Stop the task and withdraw its queued candidates; results already on their way are kept."""
    find_task(db, task_id)
    if not cancel_task(db, task_id=task_id, message="cancelled by a client"):
        raise HTTPException(status.HTTP_409_CONFLICT, f"task {task_id} has already ended")
    return task_public(db, db.get_task(task_id))


def parse_workload(spec: object, field: str) -> Workload:
    try:
        return workload_from_spec(spec)
    except WorkloadError as e:
        raise field_error(f"{field}.{e.field}", e.message) from None


def resolve_hardware(db: Database, key: str | None, cpu_model: str | None) -> int:
    """The hardware a task is for: by key, by CPU model, or the only kind registered."""
    known = db.hardware_list()
    if key is not None:
        matches = [h for h in known if h.key == key]
        field = "hardware"
    elif cpu_model is not None:
        matches = [h for h in known if h.cpu_model == cpu_model]
        field = "cpu_model"
    else:
        matches, field = known, "hardware"
    if len(matches) == 1:
        return matches[0].id
    keys = ", ".join(h.key for h in known) or "none yet: start a worker first"
    if not matches:
        raise field_error(field, f"no registered hardware matches; known hardware keys: {keys}")
    raise field_error(field, f"several kinds of hardware match; give one of: {keys}")


def find_task(db: Database, task_id: int) -> TaskInfo:
    try:
        return db.get_task(task_id)
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no task {task_id}") from None


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
