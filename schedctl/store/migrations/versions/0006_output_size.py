"""How much a run printed so far (`job_runs.output_size`), for `schedctl logs -f`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07

A running run's worker stores its output tail with the number of characters printed so far, of which the
tail is the end, so that a follower prints only what it has not printed yet. NULL on rows written before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job_runs") as batch:
        batch.add_column(sa.Column("output_size", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_runs") as batch:
        batch.drop_column("output_size")
