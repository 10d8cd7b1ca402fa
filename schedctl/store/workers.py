"""The worker registry's SQL: register, refresh, stop, prune, and read the processes with their runs.

Every instant is the database's (``db_now()``), as for leases and heartbeats: a worker whose own clock is off
is still judged alive or stale correctly. A row's state is computed when read, from its own ``stale_after``:

- ``alive``: not stopped, and seen within its ``stale_after``;
- ``stale``: not stopped, and silent for longer (SIGKILL, OOM killer, a lost host, a partition);
- ``stopped``: it said so on a clean exit (``stop_reason`` says why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from schedctl.jobs.job import Role, WorkerState
from schedctl.store.dialect import db_now, now_plus
from schedctl.store.schema import QUEUED, RUNNING, job_runs, workers
from schedctl.store.types import UTCDateTime

# Rows are kept this long after a clean stop, so `schedctl workers` still shows a deploy's old processes
# and why they stopped; a stale row (no clean stop) is kept longer, for the post-mortem of a crash.
PRUNE_STOPPED_AFTER = 24 * 3600.0
PRUNE_STALE_AFTER = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Registration:
    """What a process says about itself when it registers."""

    identity: str
    role: str
    host: str
    pid: int
    schedctl_version: str
    tzdata_version: str
    labels: Mapping[str, str]
    slots: int
    poll_interval: float
    stale_after: float


@dataclass(frozen=True)
class RunningRun:
    worker: str
    job_id: str
    scheduled_for: datetime
    attempt: int
    started_at: datetime | None
    heartbeat_at: datetime | None
    checkpoint_at: datetime | None


@dataclass(frozen=True)
class WorkerRecord(Registration):
    """A ``workers`` row: the registration, when it was last seen, and how `schedctl workers` judges it."""

    started_at: datetime
    last_seen_at: datetime
    stopped_at: datetime | None
    stop_reason: str | None
    state: WorkerState
    seen_ago: float  # seconds, by the database's clock
    running: list[RunningRun] = field(default_factory=list)

    @property
    def runs_jobs(self) -> bool:
        return self.role in (Role.WORKER, Role.ALL)


def register(conn: Connection, me: Registration) -> None:
    """Insert or replace this identity's row: a restarted process with a fixed identity (a pod name) starts
    a fresh row, not the old one's stop."""
    values: dict[str, Any] = {
        "role": me.role,
        "host": me.host[:255],
        "pid": me.pid,
        "schedctl_version": me.schedctl_version[:32],
        "tzdata_version": me.tzdata_version[:32],
        "labels": dict(me.labels),
        "slots": me.slots,
        "poll_interval": float(me.poll_interval),
        "stale_after": float(me.stale_after),
        "started_at": db_now(),
        "last_seen_at": db_now(),
        "stopped_at": None,
        "stop_reason": None,
    }
    updated = conn.execute(update(workers).where(workers.c.identity == me.identity).values(**values))
    if not updated.rowcount:
        conn.execute(insert(workers).values(identity=me.identity, **values))


def refresh(conn: Connection, identity: str) -> bool:
    """Say "still here". False when the row is gone (pruned while this process was cut off): register again."""
    result = conn.execute(
        update(workers)
        .where(workers.c.identity == identity)
        .values(last_seen_at=db_now(), stopped_at=None, stop_reason=None)
    )
    return bool(result.rowcount)


def mark_stopped(conn: Connection, identity: str, reason: str) -> None:
    conn.execute(
        update(workers)
        .where(workers.c.identity == identity)
        .values(last_seen_at=db_now(), stopped_at=db_now(), stop_reason=reason[:1000])
    )


def prune(
    conn: Connection, stopped_after: float = PRUNE_STOPPED_AFTER, stale_after: float = PRUNE_STALE_AFTER
) -> int:
    """Delete rows stopped more than ``stopped_after`` s ago, and rows silent for more than ``stale_after``."""
    w = workers.c
    result = conn.execute(
        delete(workers).where(
            or_(
                w.stopped_at < now_plus(-stopped_after),
                w.last_seen_at < now_plus(-stale_after),
            )
        )
    )
    return int(result.rowcount or 0)


def list_workers(conn: Connection, now: datetime, with_runs: bool = True) -> list[WorkerRecord]:
    """Every registered process, alive first, then stale, then stopped; each with the runs it holds.

    Two statements whatever the number of jobs: the registry, and the running runs (a partial index).
    """
    rows = conn.execute(select(workers)).mappings().all()
    held: dict[str, list[RunningRun]] = {}
    if with_runs:
        held = running_by_worker(conn)
    out = [_record(row, now, held.get(row["identity"], [])) for row in rows]
    order = {WorkerState.ALIVE: 0, WorkerState.STALE: 1, WorkerState.STOPPED: 2}
    out.sort(key=lambda r: (order[r.state], r.identity))
    return out


def running_by_worker(conn: Connection, limit: int | None = None) -> dict[str, list[RunningRun]]:
    r = job_runs.c
    query = (
        select(r.worker, r.job_id, r.scheduled_for, r.attempt, r.started_at, r.heartbeat_at, r.checkpoint_at)
        .where(r.state == RUNNING)
        .order_by(r.started_at, r.job_id)
    )
    if limit is not None:
        query = query.limit(limit)
    held: dict[str, list[RunningRun]] = {}
    for row in conn.execute(query):
        held.setdefault(row.worker or "", []).append(
            RunningRun(
                row.worker or "",
                row.job_id,
                row.scheduled_for,
                row.attempt,
                row.started_at,
                row.heartbeat_at,
                row.checkpoint_at,
            )
        )
    return held


def _record(row: Any, now: datetime, running: list[RunningRun]) -> WorkerRecord:
    seen_ago = max(0.0, (now - row["last_seen_at"]).total_seconds())
    if row["stopped_at"] is not None:
        state = WorkerState.STOPPED
    elif seen_ago > float(row["stale_after"]):
        state = WorkerState.STALE
    else:
        state = WorkerState.ALIVE
    return WorkerRecord(
        identity=row["identity"],
        role=row["role"],
        host=row["host"],
        pid=int(row["pid"]),
        schedctl_version=row["schedctl_version"],
        tzdata_version=row["tzdata_version"],
        labels=dict(row["labels"] or {}),
        slots=int(row["slots"]),
        poll_interval=float(row["poll_interval"]),
        stale_after=float(row["stale_after"]),
        started_at=row["started_at"],
        last_seen_at=row["last_seen_at"],
        stopped_at=row["stopped_at"],
        stop_reason=row["stop_reason"],
        state=state,
        seen_ago=seen_ago,
        running=running if state != WorkerState.STOPPED else [],
    )


@dataclass(frozen=True)
class QueuedGroup:
    """Due queued runs of one job that share a label set: what a worker must have to take them."""

    job_id: str
    labels_key: str
    count: int
    oldest_queued_at: datetime


def due_queued_groups(conn: Connection, now: datetime, older_than: float = 0.0) -> list[QueuedGroup]:
    """Queued runs due at ``now`` and queued more than ``older_than`` s ago, grouped by job and labels.

    One statement over the queued partial index: its cost follows the queue, not the number of jobs.
    """
    r = job_runs.c
    oldest = func.min(r.queued_at, type_=UTCDateTime())
    query = (
        select(r.job_id, r.labels_key, func.count(), oldest)
        .where(
            r.state == QUEUED,
            or_(r.not_before.is_(None), r.not_before <= now),
            r.queued_at <= now - timedelta(seconds=older_than),
        )
        .group_by(r.job_id, r.labels_key)
    )
    return [QueuedGroup(row[0], row[1] or "", int(row[2]), row[3]) for row in conn.execute(query)]


def version_skew(records: Sequence[WorkerRecord]) -> list[str]:
    """One sentence per kind of skew among the processes still alive, e.g. "schedctl 0.1.0 (2), 0.2.0 (1)"."""
    alive = [r for r in records if r.state == WorkerState.ALIVE]
    out = []
    for what, attr in (("schedctl", "schedctl_version"), ("tzdata", "tzdata_version")):
        counts: dict[str, int] = {}
        for r in alive:
            counts[getattr(r, attr)] = counts.get(getattr(r, attr), 0) + 1
        if len(counts) > 1:
            out.append(f"{what} " + ", ".join(f"{v} ({n})" for v, n in sorted(counts.items())))
    return out
