"""Jobs as the database last saw them, for `status` and `missed` when no job file is given.

Each run row names the job version (and so the snapshot) its job had when the leader queued it, and ``job_state`` the schedule key
ticks were counted by; together they rebuild a job well enough to explain it. Reads two tables in bulk.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from schedctl.job import CatchUp, Concurrency, DstGap, DstOverlap, DstPolicy, Job
from schedctl.store import definitions

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


def jobs_from_database(conn: Connection, job_ids: Sequence[str], now: datetime) -> dict[str, Job]:
    """The named jobs (every known one when none is named) rebuilt from job_state and their newest snapshot.

    A job the database knows nothing about is left out; the caller says so.
    """
    ids = list(job_ids) or definitions.known_job_ids(conn)
    keys = definitions.schedule_keys(conn, ids)
    snapshots = definitions.newest_snapshots(conn, ids, now)
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
