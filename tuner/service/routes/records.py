"""The best-schedule database: the fastest records of a workload on a kind of hardware, and any record
with its trace (replay it on the workload to get the program)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status

from runner import Status
from tuner.database import Database, Record
from tuner.service.deps import ClientToken, DatabaseDep
from tuner.service.errors import AUTH, BODY, documented, field_error
from tuner.service.routes.tasks import gflops, parse_workload
from tuner.service.schemas import NO_NUL, BestQuery, IdPath, RecordPublic

router = APIRouter(prefix="/v1", tags=["records"], responses=documented(*AUTH))


@router.post("/best", responses=documented(*BODY))
def best_records(body: BestQuery, db: DatabaseDep, _: ClientToken) -> list[RecordPublic]:
    """The k fastest correct records of a workload (by spec or structural hash), fastest first."""
    if (body.workload is None) == (body.workload_hash is None):
        raise field_error("workload", "give exactly one of workload (a spec) and workload_hash")
    key = body.workload_hash or parse_workload(body.workload, "workload").func.structural_hash()
    return ranked(db, key, body.hardware, body.k)


@router.get("/workloads/{workload_hash}/best")
def best_by_hash(
    workload_hash: Annotated[str, Path(max_length=64, pattern=NO_NUL)],
    db: DatabaseDep,
    _: ClientToken,
    hardware: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
    k: Annotated[int, Query(ge=1, le=100)] = 1,
) -> list[RecordPublic]:
    return ranked(db, workload_hash, hardware, k)


@router.get("/records/{record_id}", responses=documented(404))
def get_record(record_id: IdPath, db: DatabaseDep, _: ClientToken) -> RecordPublic:
    try:
        return record_public(db.get_record(record_id))
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no record {record_id}") from None


def ranked(db: Database, workload_hash: str, hardware: str | None, k: int) -> list[RecordPublic]:
    if hardware is None:  # the only approved kind: one a worker registered on its own is no default
        keys = [h.key for h in db.hardware_list() if h.approved]
        if len(keys) != 1:
            raise field_error("hardware", f"give a hardware key, one of: {', '.join(keys) or 'none yet'}")
        hardware = keys[0]
    return [record_public(r) for r in db.top_k(workload_hash, hardware, k)]


def record_public(r: Record) -> RecordPublic:
    return RecordPublic(
        id=r.id,
        workload_hash=r.workload_hash,
        workload_spec=r.workload_spec,
        hardware_key=r.hardware_key,
        task_id=r.task_id,
        status=Status(r.status),
        median_secs=r.median_secs,
        gflops=gflops(r.workload_flops, r.median_secs) if r.median_secs else None,
        run_secs=r.run_secs,
        build_secs=r.build_secs,
        message=r.message,
        timing=r.timing,
        worker=r.worker,
        remeasured=r.remeasured,
        trace=r.trace,
        created_at=r.created_at,
    )
