"""The service's clock: now as an aware UTC datetime, the form every timestamp column stores, so the
API, the search loop and the commands compare times alike.

Leases, heartbeats and claims are timed by one clock that no coordinator's clock step moves: on
PostgreSQL, the database's (every coordinator of a fleet reads the same one); on SQLite (one
machine), this process's monotonic clock, set to the wall clock when the process started. The
probe stepped a coordinator's wall clock by an hour: back, a dead worker's leases were held an hour;
forward, a live worker's leases lapsed and its results were refused."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from tuner.database import Database

# The wall clock and the monotonic clock read together when this process started.
_WALL, _MONOTONIC = time.time(), time.monotonic()


def now(db: Database) -> datetime:
    if db.engine.dialect.name == "postgresql":
        return db.clock()
    return datetime.fromtimestamp(_WALL + time.monotonic() - _MONOTONIC, UTC)
