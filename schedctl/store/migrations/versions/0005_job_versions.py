"""Each job version stored once (`job_versions`); run rows name their version instead of carrying a snapshot.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Before: every `job_runs` row held its job's whole snapshot (command, env, policy) as JSON, the same text in
every run of an unchanged job. After: `job_versions(job_id, version, snapshot)` holds each distinct snapshot
of a job once, under the first 16 hex digits of the SHA-256 of its canonical JSON, and `job_runs.version`
names it. The upgrade moves every existing row's snapshot there, so a run queued before it still runs the
definition it was queued with. Each version's `written_at` (the database's now at its last write, which keeps
pruning off it for a while: store/runrows.py VERSION_HOLD) is the upgrade's now for the moved ones.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_LENGTH = 16
_CHUNK = 2000

# Untyped keys: read back and bound again exactly as stored (SQLite keeps instants as text).
_runs = sa.table(
    "job_runs",
    sa.column("job_id"),
    sa.column("scheduled_for"),
    sa.column("snapshot", sa.JSON()),
    sa.column("version"),
)
_versions = sa.table(
    "job_versions", sa.column("job_id"), sa.column("version"), sa.column("snapshot"), sa.column("written_at")
)


def _timestamp() -> sa.types.TypeEngine[Any]:
    # Frozen copy of UTCDateTime's DDL, as in 0001.
    return (
        sa.DateTime()
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
        .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    )


def _database_now(conn: sa.engine.Connection) -> Any:
    """The server's UTC now, in the form each backend stores an instant (frozen copy of dialect.db_now)."""
    name = conn.dialect.name
    if name == "postgresql":
        return conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
    if name == "sqlite":
        return conn.exec_driver_sql("SELECT strftime('%Y-%m-%d %H:%M:%f000', 'now')").scalar_one()
    return conn.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()


def _version(snapshot: Any) -> tuple[str, str]:
    # Frozen copy of store/runrows.py canonical_snapshot / version_of.
    text = json.dumps(snapshot, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:_LENGTH], text


def upgrade() -> None:
    op.create_table(
        "job_versions",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("version", sa.String(_LENGTH), primary_key=True),
        sa.Column("snapshot", sa.JSON(), nullable=False),
        sa.Column("written_at", _timestamp(), nullable=False),
    )
    op.add_column("job_runs", sa.Column("version", sa.String(_LENGTH), nullable=True))
    _move_snapshots(op.get_bind())
    _drop_run_column("snapshot")


def _drop_run_column(name: str) -> None:
    if op.get_bind().dialect.name == "sqlite" and sqlite3.sqlite_version_info >= (3, 35):
        # SQLite (3.35+) drops an unindexed column in place; batch mode would rebuild job_runs and its
        # partial indexes from reflection.
        op.execute(f'ALTER TABLE job_runs DROP COLUMN "{name}"')
    else:
        with op.batch_alter_table("job_runs") as batch:
            batch.drop_column(name)


def _move_snapshots(conn: sa.engine.Connection) -> None:
    """Every row's snapshot into job_versions (once per distinct version), and its version into the row, by
    primary key in chunks: one pass over the table whatever its size."""
    r = _runs.c
    now = _database_now(conn)
    written: set[tuple[str, str]] = set()
    after: tuple[Any, Any] | None = None
    while True:
        query = sa.select(r.job_id, r.scheduled_for, r.snapshot).where(r.snapshot.is_not(None))
        if after is not None:
            query = query.where(sa.tuple_(r.job_id, r.scheduled_for) > sa.tuple_(*after))
        rows = conn.execute(query.order_by(r.job_id, r.scheduled_for).limit(_CHUNK)).all()
        if not rows:
            return
        new: list[dict[str, Any]] = []
        named: list[dict[str, Any]] = []
        for job_id, at, snapshot in rows:
            if snapshot is None:  # JSON null: nothing to run, as before (the worker refuses such a run)
                continue
            version, text = _version(snapshot)
            if (job_id, version) not in written:
                written.add((job_id, version))
                new.append({"job_id": job_id, "version": version, "snapshot": text, "written_at": now})
            named.append({"k_job": job_id, "k_at": at, "v": version})
        if new:
            conn.execute(sa.insert(_versions), new)
        if named:
            conn.execute(
                sa.update(_runs)
                .where(r.job_id == sa.bindparam("k_job"), r.scheduled_for == sa.bindparam("k_at"))
                .values(version=sa.bindparam("v")),
                named,
            )
        after = (rows[-1][0], rows[-1][1])


def downgrade() -> None:
    op.add_column("job_runs", sa.Column("snapshot", sa.JSON(), nullable=True))
    r, v = _runs.c, _versions.c
    named = sa.select(v.snapshot).where(v.job_id == r.job_id, v.version == r.version).scalar_subquery()
    op.get_bind().execute(sa.update(_runs).where(r.version.is_not(None)).values(snapshot=named))
    _drop_run_column("version")
    op.drop_table("job_versions")
