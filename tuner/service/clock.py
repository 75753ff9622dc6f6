"""The service's clock: now as an aware UTC datetime, the form every timestamp column stores, so the
API, the search loop and the commands compare times alike."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
