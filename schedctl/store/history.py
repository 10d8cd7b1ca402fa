"""Read queries over what the store recorded: runs in a window, lease terms, job state and events, each for
many jobs at once, mapped into the row types of ``rows``.

``snapshot`` reads with these what `missed`, `replay` and `status` explain. All functions take an open
connection, so a caller can read several of them in one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.engine import Connection

from schedctl.jobs.job import EventKind, RunState
from schedctl.store.dialect import id_chunks, in_list
from schedctl.store.jobstate import STATE_COLUMNS, state_record
from schedctl.store.leases import lease_record, term_record
from schedctl.store.rows import EventRecord, LeaseRecord, RunRecord, StateRecord, TermRecord
from schedctl.store.schema import job_events, job_runs, job_state, lease_terms, scheduler_lease

RUN_COLUMNS = (
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
    job_runs.c.cancel_requested,
    job_runs.c.failures,
)


_RUN_WIDTH = len(RUN_COLUMNS)
# Rows become records by position (the all-jobs views build hundreds of thousands): the orders must agree.
assert [f.name for f in fields(RunRecord)] == [c.name for c in RUN_COLUMNS]


def run_record(row: Any) -> RunRecord:
    """A row whose first columns are ``RUN_COLUMNS``, as a record (the one mapper of ``job_runs``)."""
    values = list(row[:_RUN_WIDTH])
    values[2] = RunState(values[2])
    values[5], values[14] = bool(values[5]), bool(values[14])  # manual, cancel_requested
    return RunRecord(*values)


def latest_term(conn: Connection, name: str) -> TermRecord | None:
    row = conn.execute(
        select(lease_terms).where(lease_terms.c.name == name).order_by(lease_terms.c.term.desc()).limit(1)
    ).first()
    return term_record(row) if row is not None else None


def current_lease(conn: Connection, name: str) -> LeaseRecord | None:
    """The ``scheduler_lease`` row, expired or not; the caller judges expiry against its ``now``."""
    row = conn.execute(select(scheduler_lease).where(scheduler_lease.c.name == name)).first()
    if row is None:
        return None
    return lease_record(name, row)


def job_state_of(conn: Connection, job_id: str) -> StateRecord | None:
    return job_states_of(conn, [job_id]).get(job_id)


# -- many jobs at once --------------------------------------------------------------------------------------
# The views read each table once per chunk of job ids, never once per job: at 100,000 jobs a query per job is
# minutes of round trips. One job is a list of one.


def _grouped(rows: Any, job_ids: Sequence[str]) -> dict[str, list[RunRecord]]:
    out: dict[str, list[RunRecord]] = {j: [] for j in job_ids}
    for r in map(run_record, rows):
        out[r.job_id].append(r)
    return out


def job_states_of(conn: Connection, job_ids: Sequence[str]) -> dict[str, StateRecord]:
    """Each job's ``job_state`` row; a job without one is absent."""
    out: dict[str, StateRecord] = {}
    for chunk in id_chunks(conn, job_ids):
        rows = conn.execute(select(*STATE_COLUMNS).where(in_list(conn, job_state.c.job_id, chunk)))
        out.update((s.job_id, s) for s in map(state_record, rows))
    return out


def earliest_runs_at(conn: Connection, job_ids: Sequence[str]) -> dict[str, datetime]:
    """Each job's first dispatched tick (manual runs are not ticks); a job that never had one is absent."""
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
    """Each job's rows with ``after < scheduled_for < until``, oldest first, over one window (the caller narrows
    it to each job's own)."""
    out: dict[str, list[RunRecord]] = {}
    for chunk in id_chunks(conn, job_ids):
        query = (
            select(*RUN_COLUMNS)
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
    one of ``states`` unless None), newest first, every pick from one read of the rows."""
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
            select(*RUN_COLUMNS, *ranks)
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
            run, m = run_record(row), row._mapping
            for k, (limit, states) in enumerate(picks):
                if m[f"rank{k}"] <= limit and (states is None or m[f"in{k}"] == 1):
                    found[k][run.job_id].append(run)
        for k, part in enumerate(found):
            out[k].update(part)
    return out


def active_runs_by_job(conn: Connection, job_ids: Sequence[str]) -> dict[str, tuple[int, datetime | None]]:
    """How many runs of each job are queued or running, and the oldest one's tick; a job with none is absent
    (``(0, None)``)."""
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
    kinds: tuple[EventKind, ...],
    until: datetime | None = None,
) -> dict[str, list[EventRecord]]:
    """Each job's events of these kinds, oldest first (optionally only those at or before ``until``). The kinds
    are always named: a kind this version does not know (a newer one wrote it) is never read."""
    out: dict[str, list[EventRecord]] = {}
    for chunk in id_chunks(conn, job_ids):
        query = select(job_events.c.job_id, job_events.c.at, job_events.c.kind, job_events.c.detail).where(
            in_list(conn, job_events.c.job_id, chunk), job_events.c.kind.in_(kinds)
        )
        if until is not None:
            query = query.where(job_events.c.at <= until)
        query = query.order_by(job_events.c.job_id, job_events.c.at, job_events.c.id)
        found: dict[str, list[EventRecord]] = {j: [] for j in chunk}
        for r in conn.execute(query):
            found[r.job_id].append(EventRecord(r.job_id, r.at, EventKind(r.kind), r.detail))
        out.update(found)
    return out


class TermsCover:
    """Enough lease terms to answer ``between`` for any window inside ``[since, until]`` without asking
    the database again: every term acquired in it or overlapping it, and the nearest term acquired on either
    side. Three queries, whatever the number of jobs (each job has its own window)."""

    def __init__(self, conn: Connection, name: str, since: datetime, until: datetime) -> None:
        self.since, self.until = since, until
        t = lease_terms.c
        inside = select(lease_terms).where(
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
            select(lease_terms).where(t.name == name, t.acquired_at < since).order_by(t.term.desc()).limit(1)
        )
        after = (
            select(lease_terms).where(t.name == name, t.acquired_at > until).order_by(t.acquired_at).limit(1)
        )
        found = {r.term: r for r in map(term_record, conn.execute(inside))}
        for query in (before, after):
            for r in map(term_record, conn.execute(query)):
                found.setdefault(r.term, r)
        self.terms = [found[k] for k in sorted(found)]
        self._memo: dict[tuple[datetime, datetime], list[TermRecord]] = {}

    def between(self, since: datetime, until: datetime) -> list[TermRecord]:
        """Terms whose holding overlaps ``[since, until]``, plus the last one acquired before ``since`` and the
        first acquired after ``until`` (so a gap reaching past the window still names who led last and who led
        next), ordered by term; for ``self.since <= since`` and ``until <= self.until``.

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
