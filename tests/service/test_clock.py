"""The service's clock, by which leases, heartbeats and claims are timed: a step of this machine's
wall clock (an NTP jump, a restored VM) moves it not at all; on PostgreSQL it is the database's, which
every coordinator of a fleet shares."""

import time
from datetime import UTC, datetime

from tuner.database import Database
from tuner.service import clock


def test_a_step_of_the_wall_clock_does_not_move_the_service_clock(tuning_db: Database, monkeypatch):
    before = clock.now(tuning_db)
    assert before.tzinfo is UTC and abs((before - datetime.now(UTC)).total_seconds()) < 5
    stepped = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: stepped)  # an hour forward
    after = clock.now(tuning_db)
    assert 0 <= (after - before).total_seconds() < 5
