"""Alembic migrations of the tuning database, applied by `Database.open`; no alembic.ini is needed.

To write the next one (say, leases), change `tuner/database/schema.py`, then autogenerate against a
database at head, read the result, and fix what autogenerate cannot see (renames, CHECK constraints):

    from alembic import command
    from tuner.database import Database, alembic_config

    with Database.open("sqlite:///scratch.db") as db, db.engine.begin() as connection:
        command.revision(alembic_config(connection), "leases", autogenerate=True, rev_id="0002")

On SQLite, operations are rendered in batch mode (copy and move the table), as SQLite cannot alter
most of a table in place.
"""
