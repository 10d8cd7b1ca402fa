"""A lasting record of missed ticks, and the catch-up grace each leader used.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

``missed_ranges``: when history pruning passes skipped ticks (or ticks that never got a row), they are kept as
ranges (job, first tick, last tick, how many ticks, reason, detail) so `missed` and `replay` still name every
one of them for ``serve --keep-missed`` (7 days by default), whatever the run history limits say. One range
stands for a long run of one reason: a per-second job down for a day is a handful of rows, not 86,400.

``lease_terms.catch_up_grace``: the grace the leader of that term split late from missed ticks by, so every
reader judges a tick the way the leader of its time did. NULL for terms recorded before this revision (the
readers then assume the 60 s default those leaders had).

``job_state.paused_by``: who ran `schedctl pause` (user@host), for `status` to say.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _timestamp() -> sa.types.TypeEngine[Any]:
    # Frozen copy of UTCDateTime's DDL (see 0001).
    return (
        sa.DateTime()
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
        .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    )


def upgrade() -> None:
    op.create_table(
        "missed_ranges",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("first_tick", _timestamp(), primary_key=True),
        sa.Column("last_tick", _timestamp(), nullable=False),
        sa.Column("ticks", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(32), nullable=True),
        sa.Column("reason_detail", sa.Text(), nullable=True),
        sa.Column("schedule_key", sa.String(512), nullable=False),
        sa.Column("recorded_at", _timestamp(), nullable=False),
    )
    with op.batch_alter_table("lease_terms") as batch:
        batch.add_column(sa.Column("catch_up_grace", sa.Float(), nullable=True))
    with op.batch_alter_table("job_state") as batch:
        batch.add_column(sa.Column("paused_by", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_state") as batch:
        batch.drop_column("paused_by")
    with op.batch_alter_table("lease_terms") as batch:
        batch.drop_column("catch_up_grace")
    op.drop_table("missed_ranges")
