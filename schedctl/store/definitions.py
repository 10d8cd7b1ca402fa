"""What the database remembers of each job's definition: the schedule key ``job_state`` counts ticks by,
and the snapshot of the job version each run row names (``job_versions``). ``schedctl.dbjobs`` rebuilds jobs from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from schedctl.store.dialect import id_chunks, in_list
from schedctl.store.schema import job_runs, job_state, job_versions


def known_job_ids(conn: Connection) -> list[str]:
    """Every job id in job_state or job_runs, sorted."""
    ids = set(conn.execute(select(job_state.c.job_id)).scalars())
    ids.update(conn.execute(select(job_runs.c.job_id).distinct()).scalars())
    return sorted(ids)


def schedule_keys(conn: Connection, job_ids: Sequence[str]) -> dict[str, str]:
    """Job id -> its job_state schedule key, for the ids that have a row."""
    keys: dict[str, str] = {}
    for chunk in id_chunks(conn, list(job_ids)):
        rows = conn.execute(
            select(job_state.c.job_id, job_state.c.schedule_key).where(
                in_list(conn, job_state.c.job_id, chunk)
            )
        )
        keys.update({row.job_id: row.schedule_key for row in rows})
    return keys


def newest_snapshots(conn: Connection, job_ids: Sequence[str], now: datetime) -> dict[str, dict[str, Any]]:
    """Job id -> the snapshot of its newest run due by ``now``, for the ids that have one."""
    snapshots: dict[str, dict[str, Any]] = {}
    r, v = job_runs.c, job_versions.c
    named = job_runs.join(job_versions, and_(v.job_id == r.job_id, v.version == r.version))
    for chunk in id_chunks(conn, list(job_ids)):
        rows = conn.execute(
            select(r.job_id, v.snapshot)
            .select_from(named)
            .where(in_list(conn, r.job_id, chunk), r.scheduled_for <= now)
            .order_by(r.job_id, r.scheduled_for)
        )
        for row in rows:  # newest last: each job keeps its newest snapshot
            snapshots[row.job_id] = row.snapshot or {}
    return snapshots
