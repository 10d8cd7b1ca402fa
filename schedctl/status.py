"""``status``: one job's recent ticks as a timeline and ONE verdict line; or one line per job.

The verdict answers the 3 a.m. question first: is it running, and if not, why not and what to type. The order
below is the order of causes: a pause or a refusal stops a job whatever else is true, no leader stops every
job, then failures, then ticks missed in the window although a leader is back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy.engine import Connection

from schedctl.job import Job
from schedctl.missed import CATCH_UP_GRACE, LEASE_NAME, MissedTick, first_clause, missed_on
from schedctl.store import Store
from schedctl.store import history as h

DEFAULT_LAST = 10
_FAILED = ("failed", "timed_out")


class Verdict(StrEnum):
    """The kind of the verdict line (``verdict_code`` in ``--json``); ``--check`` fails on the bad ones."""

    HEALTHY = "healthy"  # the last finished run succeeded and nothing was missed
    PENDING = "pending"  # no run has finished yet
    PAUSED = "paused"  # paused by `schedctl pause` or the job file: not a failure, a decision
    REFUSED = "refused"  # catch-up refused beyond max_catch_up; waits for `schedctl replay`
    NOT_RUNNING = "not_running"  # no scheduler holds the lease
    FAILING = "failing"  # the latest finished runs failed
    MISSED = "missed"  # ticks in the window did not run, though a leader holds the lease now

    @property
    def bad(self) -> bool:
        return self in (Verdict.REFUSED, Verdict.NOT_RUNNING, Verdict.FAILING, Verdict.MISSED)


@dataclass(frozen=True)
class TimelineEntry:
    scheduled_for: datetime
    state: str  # a run state, or "missed"
    manual: bool = False
    attempt: int = 0
    worker: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_status: int | None = None
    reason: str | None = None
    reason_text: str | None = None

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class LeaseView:
    holder: str
    term: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    held: bool  # unexpired at `now`


@dataclass(frozen=True)
class JobStatus:
    job: Job
    description: str | None
    next_fire: datetime | None
    timeline: list[TimelineEntry]
    lease: LeaseView | None
    last_leader: h.TermRecord | None
    verdict_code: Verdict
    verdict: str
    missed: list[MissedTick] = field(default_factory=list)
    failing_streak: int = 0
    last_finished: h.RunRecord | None = None
    paused_at: datetime | None = None
    refused_at: datetime | None = None


def _clock(at: datetime, now: datetime) -> str:
    """Minutes are what a tired operator reads: ``13:02`` today, ``2026-03-01 13:02`` otherwise (UTC)."""
    at = at.astimezone(UTC)
    return at.strftime("%H:%M" if at.date() == now.astimezone(UTC).date() else "%Y-%m-%d %H:%M")


def _next_and_description(job: Job, now: datetime) -> tuple[datetime | None, str | None]:
    from schedctl.cron import schedule_for

    sched = schedule_for(job.schedule, job.timezone, job.dst)
    try:
        description: str | None = sched.describe()
    except Exception:  # noqa: BLE001 - a description is a nicety; status must still answer
        description = None
    return sched.next_after(now), description


def _failing_streak(rows: list[h.RunRecord]) -> tuple[int, list[h.RunRecord]]:
    """How many of the newest finished runs failed in a row (queued, running and skipped rows are passed over)."""
    finished = [r for r in rows if r.state in ("succeeded", "cancelled", *_FAILED)]
    streak: list[h.RunRecord] = []
    for r in finished:
        if r.state not in _FAILED:
            break
        streak.append(r)
    return len(streak), finished


def _exit_text(runs: list[h.RunRecord]) -> str:
    parts: list[str] = []
    for r in runs:
        part = (
            "timed out"
            if r.state == "timed_out"
            else f"exit {r.exit_status}"
            if r.exit_status is not None
            else "failed"
        )
        if part not in parts:
            parts.append(part)
    return ", ".join(parts)


def _verdict(
    job: Job,
    state: h.StateRecord | None,
    lease: LeaseView | None,
    last_term: h.TermRecord | None,
    missed: list[MissedTick],
    rows: list[h.RunRecord],
    next_fire: datetime | None,
    now: datetime,
) -> tuple[Verdict, str]:
    streak, finished = _failing_streak(rows)
    nxt = f"next at {_clock(next_fire, now)}" if next_fire else "no next fire"
    if state is not None and state.paused_at is not None:
        return Verdict.PAUSED, (
            f"paused since {_clock(state.paused_at, now)} (schedctl pause); `schedctl resume {job.id}` resumes it"
        )
    if job.paused:
        return Verdict.PAUSED, "paused in its job file (paused = true)"
    if state is not None and state.refused_at is not None:
        detail = (
            first_clause(state.refused_detail) or f"missed ticks exceed max_catch_up = {job.max_catch_up}"
        )
        return (
            Verdict.REFUSED,
            f"refused: {detail}; run `schedctl replay {job.id} --max {max(1, len(missed))}`",
        )
    if lease is None or not lease.held:
        if last_term is None:
            return (
                Verdict.NOT_RUNNING,
                "not running: no scheduler has ever held the lease (start `schedctl serve`)",
            )
        return Verdict.NOT_RUNNING, (
            f"not running since {_clock(last_term.held_until, now)} because no scheduler has held the lease since "
            f"then; last leader was {last_term.holder}"
        )
    if streak:
        runs = "last run failed" if streak == 1 else f"last {streak} runs failed"
        return Verdict.FAILING, f"failing: {runs} ({_exit_text(finished[:streak])})"
    if missed:
        first, last = missed[0], missed[-1]
        span = _clock(first.scheduled_for, now)
        if len(missed) > 1:
            span += f"..{_clock(last.scheduled_for, now)}"
        return Verdict.MISSED, (
            f"missed {len(missed)} tick{'s' if len(missed) != 1 else ''} ({span}): {last.reason_text}; "
            f"`schedctl replay {job.id} --max {len(missed)}` runs them"
        )
    if finished:
        last_run = finished[0]
        when = _clock(last_run.finished_at or last_run.scheduled_for, now)
        if last_run.state == "cancelled":
            return Verdict.HEALTHY, f"healthy: last run was cancelled at {when}, {nxt}"
        return Verdict.HEALTHY, f"healthy: last run succeeded at {when}, {nxt}"
    return Verdict.PENDING, f"waiting: no run has finished yet, {nxt}"


def _lease_view(conn: Connection, lease_name: str, now: datetime) -> LeaseView | None:
    rec = h.current_lease(conn, lease_name)
    if rec is None:
        return None
    return LeaseView(
        rec.holder, rec.term, rec.acquired_at, rec.renewed_at, rec.expires_at, rec.expires_at > now
    )


def _timeline(rows: list[h.RunRecord], missed: list[MissedTick], last_n: int) -> list[TimelineEntry]:
    entries = [
        TimelineEntry(
            scheduled_for=r.scheduled_for,
            state=r.state,
            manual=r.manual,
            attempt=r.attempt,
            worker=r.worker,
            queued_at=r.queued_at,
            started_at=r.started_at,
            finished_at=r.finished_at,
            exit_status=r.exit_status,
            reason=r.reason,
            reason_text=r.reason_detail or r.error,
        )
        for r in rows
        if r.state != "skipped"  # skipped rows come in through `missed`, with their explanation
    ]
    entries += [
        TimelineEntry(
            scheduled_for=m.scheduled_for, state="missed", reason=m.reason_code, reason_text=m.reason_text
        )
        for m in missed
    ]
    entries.sort(key=lambda e: e.scheduled_for)
    return entries[-last_n:] if last_n > 0 else []


def status_on(
    conn: Connection,
    job: Job,
    now: datetime,
    last_n: int = DEFAULT_LAST,
    *,
    grace: float = CATCH_UP_GRACE,
    lease_name: str = LEASE_NAME,
) -> JobStatus:
    next_fire, description = _next_and_description(job, now)
    state = h.job_state_of(conn, job.id)
    missed = missed_on(conn, job, None, None, now, grace=grace, lease_name=lease_name)
    rows = h.recent_runs(conn, job.id, now, max(last_n, 1) * 2 + 20)
    lease = _lease_view(conn, lease_name, now)
    last_term = h.latest_term(conn, lease_name)
    code, text = _verdict(job, state, lease, last_term, missed, rows, next_fire, now)
    streak, finished = _failing_streak(rows)
    return JobStatus(
        job=job,
        description=description,
        next_fire=next_fire,
        timeline=_timeline(rows, missed, last_n),
        lease=lease,
        last_leader=last_term,
        verdict_code=code,
        verdict=text,
        missed=missed,
        failing_streak=streak,
        last_finished=finished[0] if finished else None,
        paused_at=state.paused_at if state else None,
        refused_at=state.refused_at if state else None,
    )


def job_status(
    store: Store,
    job: Job,
    now: datetime,
    last_n: int = DEFAULT_LAST,
    *,
    grace: float = CATCH_UP_GRACE,
    lease_name: str = LEASE_NAME,
) -> JobStatus:
    """One job: definition, next fire, the last ``last_n`` ticks, the lease holder, and the verdict."""
    with store.connect() as conn:
        return status_on(conn, job, now, last_n, grace=grace, lease_name=lease_name)


def all_status(
    store: Store,
    jobs: Mapping[str, Job] | Iterable[Job],
    now: datetime,
    *,
    grace: float = CATCH_UP_GRACE,
    lease_name: str = LEASE_NAME,
) -> list[JobStatus]:
    """Every job's status (timeline of one: the last result), in job id order."""
    items = list(jobs.values()) if isinstance(jobs, Mapping) else list(jobs)
    with store.connect() as conn:
        return [
            status_on(conn, j, now, 1, grace=grace, lease_name=lease_name)
            for j in sorted(items, key=lambda j: j.id)
        ]
