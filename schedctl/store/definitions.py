"""What the database remembers of each job's definition: the schedule key ``job_state`` counts ticks by, and
the job versions (``job_versions``) the leader writes before the ticks that name them; ``jobs_from_database``
rebuilds jobs from them, so `status`, `missed` and `jobs` work on any pod that reaches the database.

The stored definition of a job is its version written last: the leader writes the version it dispatches
before the first tick that names it and again every half ``VERSION_HOLD``, so in steady state this is the
definition the leader runs the job with now (a `schedctl run` or `replay` from another job file writes its
own, which is then the latest for a while). Together with ``job_state``'s schedule key it rebuilds a job well
enough to explain it. Reads two tables in bulk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
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


@dataclass(frozen=True)
class StoredVersion:
    """The job version written last of a job, and when (the database's clock)."""

    version: str
    written_at: datetime


def stored_versions(conn: Connection, job_ids: Sequence[str]) -> dict[str, StoredVersion]:
    """Job id -> its version written last, for the ids that have one (without the snapshots: cheap to compare
    a whole job set against)."""
    out: dict[str, StoredVersion] = {}
    v = job_versions.c
    for chunk in id_chunks(conn, list(job_ids)):
        rows = conn.execute(
            select(v.job_id, v.version, v.written_at)
            .where(in_list(conn, v.job_id, chunk))
            .order_by(v.job_id, v.written_at, v.version)
        )
        for row in rows:  # latest last: each job keeps the one written last
            out[row.job_id] = StoredVersion(row.version, row.written_at)
    return out


def snapshots_of(conn: Connection, versions: Mapping[str, StoredVersion]) -> dict[str, dict[str, Any]]:
    """Job id -> the snapshot of the given version of it."""
    out: dict[str, dict[str, Any]] = {}
    v = job_versions.c
    for chunk in id_chunks(conn, list(versions)):
        rows = conn.execute(select(v.job_id, v.version, v.snapshot).where(in_list(conn, v.job_id, chunk)))
        for row in rows:
            if versions[row.job_id].version == row.version:
                out[row.job_id] = row.snapshot or {}
    return out


def jobs_from_database(conn: Connection, job_ids: Sequence[str]) -> dict[str, Job]:
    """The named jobs (every known one when none is named) rebuilt from job_state and the snapshot of their
    version written last.

    A job the database knows nothing about is left out; the caller says so.
    """
    ids = list(job_ids) or known_job_ids(conn)
    keys = schedule_keys(conn, ids)
    snapshots = snapshots_of(conn, stored_versions(conn, ids))
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
