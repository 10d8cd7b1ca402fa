"""What the database remembers of each job's definition: the schedule key ``job_state`` counts ticks by,
and the snapshot of the job version each run row names (``job_versions``); ``jobs_from_database`` rebuilds jobs
from them, for `status` and `missed` when no job file is given.

Each run row names the job version (and so the snapshot) its job had when the leader queued it, and ``job_state``
the schedule key ticks were counted by; together they rebuild a job well enough to explain it. Reads two tables
in bulk.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store.dialect import id_chunks, in_list
from schedctl.store.schema import job_runs, job_state, job_versions
from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy


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


def jobs_from_database(conn: Connection, job_ids: Sequence[str], now: datetime) -> dict[str, Job]:
    """The named jobs (every known one when none is named) rebuilt from job_state and their newest snapshot.

    A job the database knows nothing about is left out; the caller says so.
    """
    ids = list(job_ids) or known_job_ids(conn)
    keys = schedule_keys(conn, ids)
    snapshots = newest_snapshots(conn, ids, now)
    out: dict[str, Job] = {}
    for job_id in ids:
        job = _rebuild(job_id, keys.get(job_id), snapshots.get(job_id))
        if job is not None:
            out[job_id] = job
    return out


def _rebuild(job_id: str, schedule_key: str | None, snap: dict[str, Any] | None) -> Job | None:
    snap = snap or {}
    schedule, zone, dst = schedule_key.rsplit("|", 2) if schedule_key else (None, None, "")
    schedule = schedule or snap.get("schedule")
    zone = zone or snap.get("timezone")
    if not schedule or not zone:
        return None
    policy = None
    if dst:
        gap, _, overlap = dst.partition("/")
        policy = DstPolicy(DstGap(gap) if gap else None, DstOverlap(overlap) if overlap else None)
    command = snap.get("command") or "?"
    try:
        catch_up = CatchUp(snap.get("catch_up") or "skip")
        concurrency = Concurrency(snap.get("concurrency") or "forbid")
    except ValueError:
        catch_up, concurrency = CatchUp.SKIP, Concurrency.FORBID
    return Job(
        id=job_id,
        schedule=schedule,
        timezone=zone,
        catch_up=catch_up,
        command=tuple(command) if isinstance(command, list) else str(command),
        max_catch_up=snap.get("max_catch_up"),
        concurrency=concurrency,
        labels=dict(snap.get("labels") or {}),
        dst=policy,
        source="the database",
    )
