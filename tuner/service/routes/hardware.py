"""Kinds of hardware: the keys workers registered, and an admin's approval, without which no task
targets a kind and it is nobody's default (a worker token may register any kind of machine; which
kinds the service tunes for is an admin's decision)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from tuner.database import HardwareInfo
from tuner.service.deps import AdminToken, ClientToken, DatabaseDep
from tuner.service.errors import AUTH, BODY, documented
from tuner.service.schemas import HardwareApproval, HardwarePublic, IdPath

router = APIRouter(prefix="/v1/hardware", tags=["hardware"], responses=documented(*AUTH))


@router.get("")
def list_hardware(db: DatabaseDep, _: ClientToken) -> list[HardwarePublic]:
    """Every kind of hardware registered, approved or waiting for an admin."""
    return [hardware_public(h) for h in db.hardware_list()]


@router.post("/{hardware_id}/approve", responses=documented(404, *BODY))
def approve(
    hardware_id: IdPath, db: DatabaseDep, _: AdminToken, body: HardwareApproval | None = None
) -> HardwarePublic:
    """Let tasks target this kind of hardware; optionally register its peak GFLOPS, which no result
    may beat. Approving again only updates the peak."""
    peak = body.peak_gflops if body else None
    try:
        return hardware_public(db.approve_hardware(hardware_id, peak_gflops=peak))
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no hardware {hardware_id}") from None


def hardware_public(h: HardwareInfo) -> HardwarePublic:
    return HardwarePublic(
        id=h.id,
        key=h.key,
        cpu_model=h.cpu_model,
        cores=h.cores,
        approved=h.approved,
        peak_gflops=h.peak_gflops,
        created_at=h.created_at,
    )
