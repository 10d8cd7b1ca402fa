"""Read queries over what the store recorded: runs in a window, lease terms, job state and events.

``missed``, ``replay`` and ``status`` explain the past from these alone; every SQL they read with lives here.
All functions take an open connection, so a caller can read several of them in one snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Connection

from schedctl.store.schema import job_events, job_runs, job_state, lease_terms, scheduler_lease


@dataclass(frozen=True)
class RunRecord:
    """One ``job_runs`` row, as much of it as the explanations need."""

    job_id: str
    scheduled_for: datetime
    state: str
    reason: str | None = None
    reason_detail: str | None = None
    manual: bool = False
    term: int | None = None
    attempt: int = 0
    worker: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_status: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class TermRecord:
    """One lease term. ``held_until`` is when the holder stopped holding it: the earlier of its recorded end
    and its expiry (a lapsed term is only marked ended when someone takes over, possibly hours later)."""

    term: int
    holder: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None

    @property
    def held_until(self) -> datetime:
        if self.ended_at is None:
            return self.expires_at
        return min(self.ended_at, self.expires_at)


@dataclass(frozen=True)
class StateRecord:
    job_id: str
    schedule_key: str
    defined_at: datetime
    last_dispatched: datetime | None
    paused_at: datetime | None
    paused_by_file: bool
    refused_at: datetime | None
    refused_detail: str | None
    history_start: datetime | None


@dataclass(frozen=True)
class EventRecord:
    job_id: str
    at: datetime
    kind: str
    detail: str | None


@dataclass(frozen=True)
class LeaseRecord:
    name: str
    holder: str
    term: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


_RUN_COLUMNS = (
    job_runs.c.job_id,
    job_runs.c.scheduled_for,
    job_runs.c.state,
    job_runs.c.reason,
    job_runs.c.reason_detail,
    job_runs.c.manual,
    job_runs.c.term,
    job_runs.c.attempt,
    job_runs.c.worker,
    job_runs.c.queued_at,
    job_runs.c.started_at,
    job_runs.c.finished_at,
    job_runs.c.exit_status,
    job_runs.c.error,
)


def _run(row: object) -> RunRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return RunRecord(**{c.name: m[c.name] for c in _RUN_COLUMNS})


def runs_between(conn: Connection, job_id: str, after: datetime, until: datetime) -> list[RunRecord]:
    """Rows with ``after < scheduled_for < until``, oldest first."""
    query = (
        select(*_RUN_COLUMNS)
        .where(
            job_runs.c.job_id == job_id, job_runs.c.scheduled_for > after, job_runs.c.scheduled_for < until
        )
        .order_by(job_runs.c.scheduled_for)
    )
    return [_run(r) for r in conn.execute(query)]


def recent_runs(conn: Connection, job_id: str, before: datetime, limit: int) -> list[RunRecord]:
    """The ``limit`` latest rows with ``scheduled_for <= before``, newest first."""
    query = (
        select(*_RUN_COLUMNS)
        .where(job_runs.c.job_id == job_id, job_runs.c.scheduled_for <= before)
        .order_by(job_runs.c.scheduled_for.desc())
        .limit(limit)
    )
    return [_run(r) for r in conn.execute(query)]


def runs_in_states(
    conn: Connection, job_id: str, states: tuple[str, ...], before: datetime, limit: int
) -> list[RunRecord]:
    """The ``limit`` latest rows in one of ``states`` with ``scheduled_for <= before``, newest first."""
    query = (
        select(*_RUN_COLUMNS)
        .where(job_runs.c.job_id == job_id, job_runs.c.state.in_(states), job_runs.c.scheduled_for <= before)
        .order_by(job_runs.c.scheduled_for.desc())
        .limit(limit)
    )
    return [_run(r) for r in conn.execute(query)]


def active_runs(conn: Connection, job_id: str) -> tuple[int, datetime | None]:
    """How many runs of the job are queued or running, and the oldest one's tick."""
    count, oldest = conn.execute(
        select(func.count(), func.min(job_runs.c.scheduled_for)).where(
            job_runs.c.job_id == job_id, job_runs.c.state.in_(("queued", "running"))
        )
    ).one()
    return int(count), oldest


def last_runs_by_job(conn: Connection, job_ids: list[str], before: datetime) -> dict[str, RunRecord]:
    """Each job's latest non-skipped row at or before ``before`` (one query for the all-jobs summary)."""
    if not job_ids:
        return {}
    latest = (
        select(job_runs.c.job_id, func.max(job_runs.c.scheduled_for).label("at"))
        .where(
            job_runs.c.job_id.in_(job_ids),
            job_runs.c.state != "skipped",
            job_runs.c.scheduled_for <= before,
        )
        .group_by(job_runs.c.job_id)
        .subquery()
    )
    query = select(*_RUN_COLUMNS).join(
        latest, and_(job_runs.c.job_id == latest.c.job_id, job_runs.c.scheduled_for == latest.c.at)
    )
    return {r.job_id: r for r in (_run(row) for row in conn.execute(query))}


def earliest_run_at(conn: Connection, job_id: str) -> datetime | None:
    """The job's first dispatched tick (manual runs are not ticks)."""
    value: datetime | None = conn.execute(
        select(func.min(job_runs.c.scheduled_for)).where(
            job_runs.c.job_id == job_id, job_runs.c.manual.is_(False)
        )
    ).scalar_one_or_none()
    return value


def _term(row: object) -> TermRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return TermRecord(
        term=int(m["term"]),
        holder=m["holder"],
        acquired_at=m["acquired_at"],
        renewed_at=m["renewed_at"],
        expires_at=m["expires_at"],
        ended_at=m["ended_at"],
        end_reason=m["end_reason"],
    )


_TERM_COLUMNS = (
    lease_terms.c.term,
    lease_terms.c.holder,
    lease_terms.c.acquired_at,
    lease_terms.c.renewed_at,
    lease_terms.c.expires_at,
    lease_terms.c.ended_at,
    lease_terms.c.end_reason,
)


def terms_between(conn: Connection, name: str, since: datetime, until: datetime) -> list[TermRecord]:
    """Terms whose holding overlaps ``[since, until]``, plus the last one acquired before ``since`` and the
    first acquired after ``until`` (so a gap reaching past the window still names who led last and who led
    next), ordered by term."""
    overlapping = select(*_TERM_COLUMNS).where(
        lease_terms.c.name == name,
        lease_terms.c.acquired_at <= until,
        lease_terms.c.expires_at >= since,
        or_(lease_terms.c.ended_at.is_(None), lease_terms.c.ended_at >= since),
    )
    before = (
        select(*_TERM_COLUMNS)
        .where(lease_terms.c.name == name, lease_terms.c.acquired_at < since)
        .order_by(lease_terms.c.term.desc())
        .limit(1)
    )
    after = (
        select(*_TERM_COLUMNS)
        .where(lease_terms.c.name == name, lease_terms.c.acquired_at > until)
        .order_by(lease_terms.c.acquired_at)
        .limit(1)
    )
    found = {t.term: t for t in map(_term, conn.execute(overlapping))}
    for query in (before, after):
        for t in map(_term, conn.execute(query)):
            found.setdefault(t.term, t)
    return [found[k] for k in sorted(found)]


def latest_term(conn: Connection, name: str) -> TermRecord | None:
    row = conn.execute(
        select(*_TERM_COLUMNS).where(lease_terms.c.name == name).order_by(lease_terms.c.term.desc()).limit(1)
    ).first()
    return _term(row) if row is not None else None


def current_lease(conn: Connection, name: str) -> LeaseRecord | None:
    """The ``scheduler_lease`` row, expired or not; the caller judges expiry against its ``now``."""
    row = conn.execute(select(scheduler_lease).where(scheduler_lease.c.name == name)).first()
    if row is None:
        return None
    m = row._mapping
    return LeaseRecord(
        name=m["name"],
        holder=m["holder"],
        term=int(m["term"]),
        acquired_at=m["acquired_at"],
        renewed_at=m["renewed_at"],
        expires_at=m["expires_at"],
    )


def _state(row: object) -> StateRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return StateRecord(
        job_id=m["job_id"],
        schedule_key=m["schedule_key"],
        defined_at=m["defined_at"],
        last_dispatched=m["last_dispatched"],
        paused_at=m["paused_at"],
        paused_by_file=bool(m["paused_by_file"]),
        refused_at=m["refused_at"],
        refused_detail=m["refused_detail"],
        history_start=m["history_start"],
    )


def job_state_of(conn: Connection, job_id: str) -> StateRecord | None:
    row = conn.execute(select(job_state).where(job_state.c.job_id == job_id)).first()
    return _state(row) if row is not None else None


def job_states(conn: Connection, job_ids: list[str]) -> dict[str, StateRecord]:
    if not job_ids:
        return {}
    rows = conn.execute(select(job_state).where(job_state.c.job_id.in_(job_ids)))
    return {s.job_id: s for s in map(_state, rows)}


def events_of(
    conn: Connection, job_id: str, kinds: tuple[str, ...] | None = None, until: datetime | None = None
) -> list[EventRecord]:
    """The job's events, oldest first (optionally only some kinds, only those at or before ``until``)."""
    query = select(job_events.c.job_id, job_events.c.at, job_events.c.kind, job_events.c.detail).where(
        job_events.c.job_id == job_id
    )
    if kinds:
        query = query.where(job_events.c.kind.in_(kinds))
    if until is not None:
        query = query.where(job_events.c.at <= until)
    query = query.order_by(job_events.c.at, job_events.c.id)
    return [EventRecord(r.job_id, r.at, r.kind, r.detail) for r in conn.execute(query)]
