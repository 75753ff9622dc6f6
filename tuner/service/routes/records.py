"""The best-schedule database: the fastest records of a workload on a kind of hardware, and any record
with its trace (replay it on the workload to get the program). Records are shared by every client
token: they are the fleet's measurements, worth the same to whoever asks. Only which task measured a
record is the task's owner's to know (another token's task id would tell that the task exists)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status

from runner import Status, TimingKind
from tuner.database import Database, Record, Role
from tuner.database.tokens import TokenInfo
from tuner.service.deps import ClientToken, DatabaseDep
from tuner.service.errors import AUTH, BODY, documented, field_error
from tuner.service.routes.tasks import gflops, parse_workload
from tuner.service.schemas import NO_NUL, BestQuery, IdPath, RecordPublic, Timing

router = APIRouter(prefix="/v1", tags=["records"], responses=documented(*AUTH))


@router.post("/best", responses=documented(*BODY))
def best_records(body: BestQuery, db: DatabaseDep, holder: ClientToken) -> list[RecordPublic]:
    """The k fastest correct records of a workload (by spec or structural hash), fastest first."""
    if (body.workload is None) == (body.workload_hash is None):
        raise field_error("workload", "give exactly one of workload (a spec) and workload_hash")
    key = body.workload_hash or parse_workload(body.workload, "workload").func.structural_hash()
    return ranked(db, key, body.hardware, body.k, body.timing, holder)


@router.get("/workloads/{workload_hash}/best")
def best_by_hash(
    workload_hash: Annotated[str, Path(max_length=64, pattern=NO_NUL)],
    db: DatabaseDep,
    holder: ClientToken,
    hardware: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
    k: Annotated[int, Query(ge=1, le=100)] = 1,
    timing: Timing = "warm",
) -> list[RecordPublic]:
    return ranked(db, workload_hash, hardware, k, timing, holder)


@router.get("/records/{record_id}", responses=documented(404))
def get_record(record_id: IdPath, db: DatabaseDep, holder: ClientToken) -> RecordPublic:
    try:
        record = db.get_record(record_id)
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no record {record_id}") from None
    return shown(db, [record], holder)[0]


def ranked(
    db: Database, workload_hash: str, hardware: str | None, k: int, timing: Timing, holder: TokenInfo
) -> list[RecordPublic]:
    if hardware is None:  # the only approved kind: one a worker registered on its own is no default
        keys = [h.key for h in db.hardware_list() if h.approved]
        if len(keys) != 1:
            raise field_error("hardware", f"give a hardware key, one of: {', '.join(keys) or 'none yet'}")
        hardware = keys[0]
    return shown(db, db.top_k(workload_hash, hardware, k, timing_kind=timing), holder)


def shown(db: Database, records: list[Record], holder: TokenInfo) -> list[RecordPublic]:
    """The records as `holder` sees them: the task of each only if it is the holder's (an admin's:
    every one)."""
    tasks = {r.task_id for r in records if r.task_id is not None}
    if holder.role != Role.ADMIN:
        owners = db.task_owners(tasks) if tasks else {}
        tasks = {t for t in tasks if owners.get(t) == holder.id}
    return [record_public(r, r.task_id if r.task_id in tasks else None) for r in records]


def record_public(r: Record, task_id: int | None) -> RecordPublic:
    return RecordPublic(
        id=r.id,
        workload_hash=r.workload_hash,
        workload_spec=r.workload_spec,
        hardware_key=r.hardware_key,
        task_id=task_id,
        status=Status(r.status),
        median_secs=r.median_secs,
        gflops=gflops(r.workload_flops, r.median_secs) if r.median_secs else None,
        run_secs=r.run_secs,
        build_secs=r.build_secs,
        message=r.message,
        timing=r.timing,
        timing_kind=TimingKind(r.timing_kind).value,
        worker=r.worker,
        remeasured=r.remeasured,
        trace=r.trace,
        created_at=r.created_at,
    )
