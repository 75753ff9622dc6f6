"""Workers accountable for the leases they hold: a lease's age is bounded across renewals, a
candidate whose lease a worker lets expire goes back to the queue (given up only once that many
different workers lost it), and a worker that keeps letting leases expire is throttled.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

- candidates.leased_at: when the current lease was given; heartbeats renew it up to
  max_lease_seconds after that, no further.
- candidates.lost_by: the workers whose lease of it expired (JSON list of ids). A worker that leases
  and never answers no longer burns a task's trials as timeouts: only max_attempts different workers
  losing it do.
- workers.strikes: leases it let expire since its last result; workers.throttled_until: no lease is
  given to it before then.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("candidates") as batch:
        batch.add_column(sa.Column("leased_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("lost_by", JSON, server_default="[]", nullable=False))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("strikes", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("throttled_until", sa.DateTime(timezone=True), nullable=True))
    # A lease given before this version: aged from now on.
    op.execute("UPDATE candidates SET leased_at = CURRENT_TIMESTAMP WHERE status = 'leased'")


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("throttled_until")
        batch.drop_column("strikes")
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("lost_by")
        batch.drop_column("leased_at")
