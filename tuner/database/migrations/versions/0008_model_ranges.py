"""A model tuned for ranges of sizes: the dimensions its ONNX file leaves open, as submitted.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

- models.dims: null for a model of static shapes (its file kept with every size written in, as
  before); else the `dims` it was submitted with (sizes, [min, max] ranges, aliases), applied to its
  file again whenever it is built: its member tasks are the kernels at sizes spread over the ranges,
  and its artifact is one library for the whole range.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("dims", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("dims")
