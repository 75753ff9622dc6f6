"""Database fixtures: every database test runs on SQLite and on PostgreSQL, each on a fresh database."""

from collections.abc import Iterator

import pytest

from tests.postgres import temporary_database
from tuner.database import Database


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The URL of a new, empty database. An unreachable PostgreSQL is an error, never a skip: CI must
    prove both backends."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tuning.db'}"
        return
    with temporary_database() as url:
        yield url


@pytest.fixture
def tuning_db(database_url: str) -> Iterator[Database]:
    with Database.open(database_url) as db:
        yield db
