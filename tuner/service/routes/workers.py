"""The worker protocol: register, heartbeat, lease candidates, submit results, give leases back.

A worker token acts only for the workers it registered (an admin token for any), and a result counts
only from the worker holding the candidate's lease: one benchmark machine cannot submit results in
another's name, nor for another's lease. It may register as a kind of hardware nobody registered
before, but no task targets that kind until an admin approves it. A time faster than the hardware can
run is refused and flagged (logged once per worker, counted in /metrics), and a would-be best counts
only once a second lease has re-measured it. A worker token can still lie consistently about its own
measurements within those bounds: give worker tokens to trusted machines only.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import cast

from fastapi import APIRouter, HTTPException, Request, Response, status

from runner.protocol import (
    Count,
    HeartbeatIn,
    Lease,
    LeaseRequest,
    PublicOutcome,
    ReleaseIn,
    ResultIn,
    ResultsIn,
    ResultsOut,
    WorkerRegister,
    WorkerRegistered,
)
from tuner.database import Role
from tuner.database import queue as q
from tuner.database.fleet import (
    WorkerInfo,
    WorkerStopped,
    alive_since,
    get_worker,
    heartbeat,
    register_worker,
    stop_worker,
    workers,
)
from tuner.database.tokens import TokenInfo
from tuner.service.clock import now as clock_now
from tuner.service.deps import ClientToken, DatabaseDep, PageDep, SettingsDep, WorkerToken
from tuner.service.errors import AUTH, BODY, documented
from tuner.service.metrics import LEASED, RESULTS
from tuner.service.schemas import IdPath, WorkerPublic

router = APIRouter(prefix="/v1/workers", tags=["workers"], responses=documented(*AUTH))
log = logging.getLogger(__name__)


@router.post("", status_code=status.HTTP_201_CREATED, responses=documented(*BODY))
def register(
    body: WorkerRegister, db: DatabaseDep, settings: SettingsDep, holder: WorkerToken
) -> WorkerRegistered:
    """A worker starting on a machine: its hardware is recorded (a new kind waits for an admin's
    approval, unless an admin token registers it), and it learns the lease timings."""
    hardware_id = db.add_hardware(body.hardware.hardware(), approved=holder.role == Role.ADMIN)
    worker_id = register_worker(
        db, name=body.name, hardware_id=hardware_id, now=clock_now(db), token_id=holder.id
    )
    approved = next(h.approved for h in db.hardware_list() if h.id == hardware_id)
    return WorkerRegistered(
        id=worker_id,
        lease_seconds=settings.lease_seconds,
        heartbeat_seconds=settings.heartbeat_seconds,
        hardware_approved=approved,
    )


@router.get("")
def list_workers(
    response: Response, db: DatabaseDep, settings: SettingsDep, _: ClientToken, page: PageDep
) -> list[WorkerPublic]:
    """Every worker (a daemon started again is a new one), oldest first, a page at a time: a full
    page's X-Next-After header is the `after` of the next."""
    found = workers(db, after=page.after, limit=page.limit)
    page.answer(response, [w.id for w in found])
    alive = {w.id for w in workers(db, seen_since=alive_since(clock_now(db), settings.heartbeat_seconds))}
    return [
        WorkerPublic(
            id=w.id,
            name=w.name,
            hardware_key=w.hardware_key,
            registered_at=w.registered_at,
            last_seen_at=w.last_seen_at,
            alive=w.id in alive,
            throttled_until=w.throttled_until,
        )
        for w in found
    ]


@router.post("/{worker_id}/heartbeat", responses=documented(404, 409, *BODY))
def beat(
    request: Request,
    worker_id: IdPath,
    db: DatabaseDep,
    settings: SettingsDep,
    holder: WorkerToken,
    body: HeartbeatIn | None = None,
) -> Count:
    """Alive: extends the leases the worker names (no body, or `holding` null: all it holds).
    Returns how many it renewed; 409 once the worker has stopped (a daemon starting again registers
    as a new worker)."""
    own_worker(request, db, worker_id, holder)
    holding = body.holding if body is not None else None
    try:
        held = heartbeat(
            db, worker_id=worker_id, policy=settings.lease_policy(), now=clock_now(db), holding=holding
        )
    except WorkerStopped:
        raise HTTPException(status.HTTP_409_CONFLICT, f"worker {worker_id} has stopped") from None
    return Count(count=held)


@router.post("/{worker_id}/lease", responses=documented(404, *BODY))
def lease(
    request: Request,
    worker_id: IdPath,
    body: LeaseRequest,
    db: DatabaseDep,
    settings: SettingsDep,
    holder: WorkerToken,
) -> Lease:
    """Up to `max` candidates for this worker's hardware; an empty list when there is nothing to do,
    when the worker holds max_leases_per_worker already, or while it is throttled (it let
    worker_strikes leases in a row expire without a result). Asking is a sign of life: it counts
    as a heartbeat that renews nothing."""
    worker = own_worker(request, db, worker_id, holder)
    now = clock_now(db)
    policy = settings.lease_policy()
    # Else a worker whose heartbeats lag (a loaded machine, a client that never beats) counts as
    # dead to the search loop's next tick, which ends the leases just given: its results are then
    # refused, and one lost batch of worker_strikes leases throttles it for worker_throttle_seconds.
    # A stopped worker stays stopped: its leases end with its silence, as before.
    with suppress(WorkerStopped):
        heartbeat(db, worker_id=worker_id, policy=policy, now=now, holding=[])
    leased = q.lease(
        db, worker_id=worker_id, hardware_id=worker.hardware_id, limit=body.max, now=now, policy=policy
    )
    LEASED.inc(len(leased))
    return Lease(candidates=leased)


@router.post("/{worker_id}/results", responses=documented(404, *BODY))
def submit(
    request: Request,
    worker_id: IdPath,
    body: ResultsIn,
    db: DatabaseDep,
    settings: SettingsDep,
    holder: WorkerToken,
) -> ResultsOut:
    """Results of candidates leased to this worker, each accepted once: a repeated submission is a
    'duplicate' and stores nothing, so a worker may retry a submission whose answer it never
    received. A would-be best is 'confirming' until a second lease re-measures it."""
    worker = own_worker(request, db, worker_id, holder)
    submissions = body.results
    outcomes = q.submit(
        db,
        worker_id=worker.id,
        worker=f"{worker.name}#{worker.id}",
        submissions=submissions,
        gflops_per_core=settings.max_gflops_per_core,
    )
    for outcome in outcomes:
        RESULTS.labels(outcome=outcome.value).inc()
    impossible = [s for s, o in zip(submissions, outcomes) if o is q.Outcome.IMPOSSIBLE]
    if impossible:
        flag(request, worker, impossible[0])
    return ResultsOut(outcomes=[_public(o) for o in outcomes])


def _public(outcome: q.Outcome) -> PublicOutcome:
    """An impossible time is refused like any result that does not count; /metrics tells them apart."""
    public = q.Outcome.REFUSED if outcome is q.Outcome.IMPOSSIBLE else outcome
    return cast(PublicOutcome, public.value)


def flag(request: Request, worker: WorkerInfo, result: ResultIn) -> None:
    """Log a worker's first impossible time (in this process): a broken clock or a forger, which an
    operator should look at; the rest are only counted, so a flood of them cannot flood the log."""
    flagged: set[int] = request.app.state.flagged
    if worker.id in flagged:
        return
    flagged.add(worker.id)
    log.warning(
        "worker %s#%d (hardware %s, token %s) reported candidate %d in %.3g s, faster than its hardware "
        "can run: refused. Its further impossible results are counted in /metrics "
        '(tuner_results_total{outcome="impossible"}), not logged.',
        worker.name,
        worker.id,
        worker.hardware_key,
        worker.token_id,
        result.candidate_id,
        min(result.run_secs),
    )


@router.post("/{worker_id}/release", responses=documented(404, *BODY))
def release(
    request: Request, worker_id: IdPath, body: ReleaseIn, db: DatabaseDep, holder: WorkerToken
) -> Count:
    """Give leases back unmeasured: they are dispatched again at once."""
    own_worker(request, db, worker_id, holder)
    return Count(count=q.release(db, worker_id=worker_id, candidate_ids=body.candidate_ids))


@router.post("/{worker_id}/stop", responses=documented(404))
def stop(request: Request, worker_id: IdPath, db: DatabaseDep, holder: WorkerToken) -> Count:
    """A worker shutting down: every lease it still holds goes back. Returns how many."""
    own_worker(request, db, worker_id, holder)
    return Count(count=stop_worker(db, worker_id=worker_id, now=clock_now(db)))


def own_worker(request: Request, db: DatabaseDep, worker_id: int, holder: TokenInfo) -> WorkerInfo:
    """The worker, if this token may act for it. Registrations never change, so they are cached."""
    known: dict[int, WorkerInfo] = request.app.state.workers
    worker = known.get(worker_id)
    if worker is None:
        try:
            worker = known[worker_id] = get_worker(db, worker_id)
        except KeyError:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no worker {worker_id}") from None
    if holder.role != Role.ADMIN and worker.token_id != holder.id:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"worker {worker_id} was registered with another token"
        )
    return worker
