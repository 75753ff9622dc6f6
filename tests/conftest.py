"""Database fixtures: every database test runs on SQLite and on PostgreSQL, each on a fresh database."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.postgres import temporary_database
from tuner.database import Database


@contextmanager
def fresh_database(kind: str, directory: Path) -> Iterator[str]:
    """The URL of a new, empty database of `kind`: "sqlite" (a file in `directory`) or "postgresql"
    (dropped afterwards). Names are random, so pytest-xdist workers never share a database."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / f'tt_test_{uuid.uuid4().hex}.db'}"
        return
    with temporary_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new, empty database. An unreachable PostgreSQL is an error, never a skip: CI must
    prove both backends."""
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def tuning_db(database_url: str) -> Iterator[Database]:
    with Database.open(database_url) as db:
        yield db
