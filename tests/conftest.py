"""Database fixtures: every database test runs on SQLite and on PostgreSQL, each on a fresh database."""

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from tuner.database import Database

# A PostgreSQL server with trust auth; the tests create and drop their own databases on it.
POSTGRES = os.environ.get("TENSOR_TUNER_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The URL of a new, empty database. An unreachable PostgreSQL is an error, never a skip: CI must
    prove both backends. Names are random, so pytest-xdist workers never share a database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tuning.db'}"
        return
    name = f"tt_test_{uuid.uuid4().hex}"
    admin = create_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def tuning_db(database_url: str) -> Iterator[Database]:
    with Database.open(database_url) as db:
        yield db
