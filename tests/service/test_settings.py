"""The settings refuse combinations that would break the service at run time."""

import pytest
from pydantic import ValidationError

from tuner.service.settings import Settings


def test_a_lease_must_outlast_several_heartbeats():
    assert Settings(lease_seconds=30, heartbeat_seconds=10).lease_seconds == 30
    with pytest.raises(ValidationError, match=r"lease_seconds .* at least 3 times heartbeat_seconds"):
        Settings(lease_seconds=15, heartbeat_seconds=10)
