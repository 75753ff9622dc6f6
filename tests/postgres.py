"""A temporary PostgreSQL database on the server the tests use (127.0.0.1:5432, trust auth, or
TENSOR_TUNER_TEST_POSTGRES): created with a random name, dropped afterwards. Used by the test
fixtures and by the benchmarks."""

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

POSTGRES = os.environ.get("TENSOR_TUNER_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


@contextmanager
def temporary_database() -> Iterator[str]:
    """The URL of a new, empty database; random names, so parallel test workers never share one."""
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
