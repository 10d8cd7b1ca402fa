"""Read queries over what the store recorded: runs in a window, lease terms, job state and events.

``missed``, ``replay`` and ``status`` explain the past from these alone; every SQL they read with lives here.
All functions take an open connection, so a caller can read several of them in one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.engine import Connection

from schedctl.job import RunState
from schedctl.store.dialect import id_chunks, in_list
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
    catch_up_grace: float | None = None  # the grace its leader used; None: recorded before schema 0003

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
    paused_by: str | None = None  # user@host that ran `schedctl pause`


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


_RUN_WIDTH = len(_RUN_COLUMNS)
# Rows become records by position (the all-jobs views build hundreds of thousands): the orders must agree.
assert [f.name for f in fields(RunRecord)] == [c.name for c in _RUN_COLUMNS]


def _run(row: Any) -> RunRecord:
    return RunRecord(*row[:_RUN_WIDTH])


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
            job_runs.c.job_id == job_id, job_runs.c.state.in_((RunState.QUEUED, RunState.RUNNING))
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
            job_runs.c.state != RunState.SKIPPED,
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
        catch_up_grace=m["catch_up_grace"],
    )


_TERM_COLUMNS = (
    lease_terms.c.term,
    lease_terms.c.holder,
    lease_terms.c.acquired_at,
    lease_terms.c.renewed_at,
    lease_terms.c.expires_at,
    lease_terms.c.ended_at,
    lease_terms.c.end_reason,
    lease_terms.c.catch_up_grace,
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
        paused_by=m["paused_by"],
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


# -- many jobs at once --------------------------------------------------------------------------------------
# The all-jobs views read each table once per chunk of job ids, never once per job: at 100,000 jobs a query per
# job is minutes of round trips. Each function answers exactly what its one-job namesake above answers.


def _grouped(rows: Any, job_ids: Sequence[str]) -> dict[str, list[RunRecord]]:
    out: dict[str, list[RunRecord]] = {j: [] for j in job_ids}
    for r in map(_run, rows):
        out[r.job_id].append(r)
    return out


def job_states_of(conn: Connection, job_ids: Sequence[str]) -> dict[str, StateRecord]:
    """``job_state_of`` for many jobs; a job without a state row is absent."""
    out: dict[str, StateRecord] = {}
    for chunk in id_chunks(conn, job_ids):
        rows = conn.execute(select(job_state).where(in_list(conn, job_state.c.job_id, chunk)))
        out.update((s.job_id, s) for s in map(_state, rows))
    return out


def earliest_runs_at(conn: Connection, job_ids: Sequence[str]) -> dict[str, datetime]:
    """``earliest_run_at`` for many jobs; a job that never had a tick dispatched is absent."""
    out: dict[str, datetime] = {}
    for chunk in id_chunks(conn, job_ids):
        query = (
            select(job_runs.c.job_id, func.min(job_runs.c.scheduled_for))
            .where(in_list(conn, job_runs.c.job_id, chunk), job_runs.c.manual.is_(False))
            .group_by(job_runs.c.job_id)
        )
        out.update((job_id, at) for job_id, at in conn.execute(query) if at is not None)
    return out


def runs_between_by_job(
    conn: Connection, job_ids: Sequence[str], after: datetime, until: datetime
) -> dict[str, list[RunRecord]]:
    """``runs_between`` for many jobs over one window (the caller narrows it to each job's own)."""
    out: dict[str, list[RunRecord]] = {}
    for chunk in id_chunks(conn, job_ids):
        query = (
            select(*_RUN_COLUMNS)
            .where(
                in_list(conn, job_runs.c.job_id, chunk),
                job_runs.c.scheduled_for > after,
                job_runs.c.scheduled_for < until,
            )
            .order_by(job_runs.c.job_id, job_runs.c.scheduled_for)
        )
        out.update(_grouped(conn.execute(query), chunk))
    return out


Pick = tuple[int, tuple[str, ...] | None]  # (limit, states): the latest `limit` rows, in `states` unless None


def latest_runs_by_job(
    conn: Connection, job_ids: Sequence[str], before: datetime, picks: Sequence[Pick]
) -> list[dict[str, list[RunRecord]]]:
    """For each pick ``(limit, states)``, each job's ``limit`` latest rows with ``scheduled_for <= before`` (in
    one of ``states`` unless None), newest first: ``recent_runs`` and ``runs_in_states`` for many jobs, every
    pick from one read of the rows."""
    r = job_runs.c
    out: list[dict[str, list[RunRecord]]] = [{} for _ in picks]
    for chunk in id_chunks(conn, job_ids):
        # Pruning keeps a handful of finished rows per job, so numbering all of a job's rows costs about what
        # the one-job LIMIT queries do; ROW_NUMBER is on every backend schedctl supports (MariaDB 10.2, SQLite
        # 3.25). A pick with states numbers the rows in and out of them apart, and keeps those in.
        ranks: list[Any] = []
        for k, (_, states) in enumerate(picks):
            partition: list[Any] = [r.job_id]
            if states is not None:
                member = case((r.state.in_(states), 1), else_=0)
                partition.append(member)
                ranks.append(member.label(f"in{k}"))
            order = r.scheduled_for.desc()
            ranks.append(func.row_number().over(partition_by=partition, order_by=order).label(f"rank{k}"))
        ranked = (
            select(*_RUN_COLUMNS, *ranks)
            .where(in_list(conn, r.job_id, chunk), r.scheduled_for <= before)
            .subquery()
        )
        kept = [
            and_(ranked.c[f"rank{k}"] <= limit, *([ranked.c[f"in{k}"] == 1] if states is not None else []))
            for k, (limit, states) in enumerate(picks)
        ]
        query = select(ranked).where(or_(*kept)).order_by(ranked.c.job_id, ranked.c.scheduled_for.desc())
        found: list[dict[str, list[RunRecord]]] = [{j: [] for j in chunk} for _ in picks]
        for row in conn.execute(query):
            run, m = _run(row), row._mapping
            for k, (limit, states) in enumerate(picks):
                if m[f"rank{k}"] <= limit and (states is None or m[f"in{k}"] == 1):
                    found[k][run.job_id].append(run)
        for k, part in enumerate(found):
            out[k].update(part)
    return out


def active_runs_by_job(conn: Connection, job_ids: Sequence[str]) -> dict[str, tuple[int, datetime | None]]:
    """``active_runs`` for many jobs; a job with no queued or running run is absent (``(0, None)``)."""
    out: dict[str, tuple[int, datetime | None]] = {}
    for chunk in id_chunks(conn, job_ids):
        query = (
            select(job_runs.c.job_id, func.count(), func.min(job_runs.c.scheduled_for))
            .where(
                in_list(conn, job_runs.c.job_id, chunk),
                job_runs.c.state.in_((RunState.QUEUED, RunState.RUNNING)),
            )
            .group_by(job_runs.c.job_id)
        )
        out.update((job_id, (int(count), oldest)) for job_id, count, oldest in conn.execute(query))
    return out


def events_by_job(
    conn: Connection,
    job_ids: Sequence[str],
    kinds: tuple[str, ...] | None = None,
    until: datetime | None = None,
) -> dict[str, list[EventRecord]]:
    """``events_of`` for many jobs."""
    out: dict[str, list[EventRecord]] = {}
    for chunk in id_chunks(conn, job_ids):
        query = select(job_events.c.job_id, job_events.c.at, job_events.c.kind, job_events.c.detail).where(
            in_list(conn, job_events.c.job_id, chunk)
        )
        if kinds:
            query = query.where(job_events.c.kind.in_(kinds))
        if until is not None:
            query = query.where(job_events.c.at <= until)
        query = query.order_by(job_events.c.job_id, job_events.c.at, job_events.c.id)
        found: dict[str, list[EventRecord]] = {j: [] for j in chunk}
        for r in conn.execute(query):
            found[r.job_id].append(EventRecord(r.job_id, r.at, r.kind, r.detail))
        out.update(found)
    return out


class TermsCover:
    """Enough lease terms to answer ``terms_between`` for any window inside ``[since, until]`` without asking
    the database again: every term acquired in it or overlapping it, and the nearest term acquired on either
    side. Three queries, whatever the number of jobs (each job has its own window)."""

    def __init__(self, conn: Connection, name: str, since: datetime, until: datetime) -> None:
        self.since, self.until = since, until
        t = lease_terms.c
        inside = select(*_TERM_COLUMNS).where(
            t.name == name,
            or_(
                and_(
                    t.acquired_at <= until,
                    t.expires_at >= since,
                    or_(t.ended_at.is_(None), t.ended_at >= since),
                ),
                and_(t.acquired_at >= since, t.acquired_at <= until),
            ),
        )
        before = (
            select(*_TERM_COLUMNS)
            .where(t.name == name, t.acquired_at < since)
            .order_by(t.term.desc())
            .limit(1)
        )
        after = (
            select(*_TERM_COLUMNS)
            .where(t.name == name, t.acquired_at > until)
            .order_by(t.acquired_at)
            .limit(1)
        )
        found = {r.term: r for r in map(_term, conn.execute(inside))}
        for query in (before, after):
            for r in map(_term, conn.execute(query)):
                found.setdefault(r.term, r)
        self.terms = [found[k] for k in sorted(found)]
        self._memo: dict[tuple[datetime, datetime], list[TermRecord]] = {}

    def between(self, since: datetime, until: datetime) -> list[TermRecord]:
        """``terms_between(conn, name, since, until)``, for ``self.since <= since`` and ``until <= self.until``.

        Its last-before-``since`` is either the cover's own last-before or a term acquired inside the cover,
        and likewise its first-after-``until``; so the answer is the same whatever the terms' invariants.
        """
        if since < self.since or until > self.until:
            raise ValueError("window outside the terms read")
        # Most jobs share the default window (the last 7 days), so most calls are one lookup.
        key = (since, until)
        if key not in self._memo:
            self._memo[key] = self._between(since, until)
        return self._memo[key]

    def _between(self, since: datetime, until: datetime) -> list[TermRecord]:
        found = {
            t.term: t
            for t in self.terms
            if t.acquired_at <= until
            and t.expires_at >= since
            and (t.ended_at is None or t.ended_at >= since)
        }
        before = [t for t in self.terms if t.acquired_at < since]
        if before:
            last = max(before, key=lambda t: t.term)
            found.setdefault(last.term, last)
        after = [t for t in self.terms if t.acquired_at > until]
        if after:
            # ORDER BY acquired_at LIMIT 1: on a tie the database may pick either; take the lowest term.
            first = min(after, key=lambda t: (t.acquired_at, t.term))
            found.setdefault(first.term, first)
        return [found[k] for k in sorted(found)]
