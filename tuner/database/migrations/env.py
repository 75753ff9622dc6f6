"""Runs the migrations on the connection `alembic_config` hands over, inside its transaction, so the
caller decides locking and commit (see `tuner.database.database._migrate`)."""

from alembic import context

from tuner.database.schema import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
