"""Health and metrics: /healthz for load balancers and orchestrators (no token), /metrics for
Prometheus (any token)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, HTTPException, Request, Response, status
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from tuner.database import Database
from tuner.service.deps import AnyToken, DatabaseDep, SettingsDep
from tuner.service.errors import RETRY_AFTER_SECONDS, documented
from tuner.service.metrics import render
from tuner.service.schemas import Health

router = APIRouter(tags=["system"])

# The longest /healthz waits for the database: it answers within a second (load balancers time a check
# out after one or two), and a database that needs longer for SELECT 1 is not healthy.
HEALTH_SECONDS = 0.5
_PLAIN_TEXT: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {"schema": {"type": "string"}}}}
}


@router.get("/healthz", responses=documented(503))
async def healthz(request: Request, db: DatabaseDep) -> Health:
    """200 while the coordinator can reach its database (and, on SQLite, its file is still the one at
    its path: not deleted nor replaced), 503 within a second otherwise: the probe
    runs in a thread of its own, and is abandoned (left to the database timeout) if the database does
    not answer in time. One probe at a time, so a frozen database holds one thread, whatever the
    rate of health checks."""
    reason = f"no answer within {HEALTH_SECONDS:g} s"
    problem = db.file_problem()
    if problem is not None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, problem, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )
    with anyio.move_on_after(HEALTH_SECONDS):
        try:
            await anyio.to_thread.run_sync(
                _probe, db, abandon_on_cancel=True, limiter=request.app.state.health_probes
            )
            return Health(status="ok", database=db.engine.dialect.name)
        except SQLAlchemyError as e:
            reason = type(e).__name__
    raise HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        f"database unreachable: {reason}",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def _probe(db: Database) -> None:
    with db.engine.connect() as connection:
        connection.execute(text("SELECT 1"))


@router.get(
    "/metrics",
    response_class=Response,
    responses=_PLAIN_TEXT | documented(401),
)
def metrics(db: DatabaseDep, settings: SettingsDep, _: AnyToken) -> Response:
    body, content_type = render(db, settings.heartbeat_seconds)
    return Response(body, media_type=content_type)
