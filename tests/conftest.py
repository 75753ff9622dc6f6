"""Database fixtures: every database test runs on SQLite and on PostgreSQL, each on a fresh database."""

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from tuner.database import Database

# A PostgreSQL server with trust auth; the tests create and drop their own databases on it.
POSTGRES = os.environ.get("TENSOR_TUNER_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


@contextmanager
def fresh_database(kind: str, directory: Path, copy_of: str | None = None) -> Iterator[str]:
    """The URL of a new database of `kind` ("sqlite", a file in `directory`, or "postgresql"), empty
    or a copy of the closed database at `copy_of` (a URL this function gave). Names are random, so
    pytest-xdist workers never share a database; a PostgreSQL database is dropped afterwards."""
    name = f"tt_test_{uuid.uuid4().hex}"
    if kind == "sqlite":
        path = directory / f"{name}.db"
        if copy_of:
            shutil.copyfile(copy_of.removeprefix("sqlite:///"), path)
        yield f"sqlite:///{path}"
        return
    admin = create_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT", poolclass=NullPool)
    template = f' TEMPLATE "{copy_of.rsplit("/", 1)[1]}"' if copy_of else ""
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"{template}')
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


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
