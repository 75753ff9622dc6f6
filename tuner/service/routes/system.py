"""Health and metrics: /healthz for load balancers and orchestrators (no token), /metrics for
Prometheus (any token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Response, status
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from tuner.service.deps import AnyToken, DatabaseDep, SettingsDep
from tuner.service.errors import documented
from tuner.service.metrics import render
from tuner.service.schemas import Health

router = APIRouter(tags=["system"])

_PLAIN_TEXT: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {"schema": {"type": "string"}}}}
}


@router.get("/healthz", responses=documented(503))
def healthz(db: DatabaseDep) -> Health:
    """200 while the coordinator can reach its database, 503 otherwise."""
    try:
        with db.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as e:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"database unreachable: {type(e).__name__}"
        ) from None
    return Health(status="ok", database=db.engine.dialect.name)


@router.get(
    "/metrics",
    response_class=Response,
    responses=_PLAIN_TEXT | documented(401),
)
def metrics(db: DatabaseDep, settings: SettingsDep, _: AnyToken) -> Response:
    body, content_type = render(db, settings.heartbeat_seconds)
    return Response(body, media_type=content_type)
