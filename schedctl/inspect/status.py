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
from typing import TYPE_CHECKING

from schedctl.inspect.missed import (
    FiresCache,
    Gathered,
    MissedTick,
    Reason,
    catch_up_bound,
    first_clause,
    pause_intervals,
)
from schedctl.jobs.job import DEFAULT_LEASE_NAME, CatchUp, Job, PauseSource, RunState, SkipReason
from schedctl.store.rows import EventRecord, LeaseRecord, RunRecord, StateRecord, TermRecord
from schedctl.store.window import Lookup

if TYPE_CHECKING:
    from schedctl.store import Store
    from schedctl.store.eligibility import Stranded
    from schedctl.store.snapshot import StatusReads

DEFAULT_LAST = 10
_FAILED = (RunState.FAILED, RunState.TIMED_OUT)


class Verdict(StrEnum):
    """The kind of the verdict line (``verdict_code`` in ``--json``); ``--check`` fails on the bad ones."""

    HEALTHY = "healthy"  # the last finished run succeeded and nothing was missed
    PENDING = "pending"  # no run has finished yet
    PAUSED = "paused"  # paused by `schedctl pause` or the job file: not a failure, a decision
    REFUSED = "refused"  # catch-up refused beyond max_catch_up; waits for `schedctl replay`
    NOT_RUNNING = "not_running"  # no scheduler holds the lease
    FAILING = "failing"  # the latest finished runs failed
    MISSED = "missed"  # ticks in the window did not run, though a leader holds the lease now
    NO_WORKER = "no_worker"  # queued past a poll, and no alive worker may take it (labels, or none alive)

    @property
    def bad(self) -> bool:
        return self in (
            Verdict.REFUSED,
            Verdict.NOT_RUNNING,
            Verdict.FAILING,
            Verdict.MISSED,
            Verdict.NO_WORKER,
        )


# One line of a job's timeline: a run, or a tick that did not run (``state`` TickState.MISSED).
TimelineEntry = RunRecord | MissedTick


def entry_reason(e: TimelineEntry) -> tuple[str | None, str | None]:
    """A timeline line's reason code and sentence: a run's error (else the scheduler's detail), or why the
    tick was missed."""
    if isinstance(e, RunRecord):
        return e.reason, e.error or e.reason_detail
    return e.reason_code, e.reason_text


@dataclass(frozen=True)
class JobStatus:
    job: Job
    description: str | None
    next_fire: datetime | None
    timeline: list[TimelineEntry]
    lease: LeaseRecord | None
    last_leader: TermRecord | None
    verdict_code: Verdict
    verdict: str
    missed: list[MissedTick] = field(default_factory=list)
    failing_streak: int = 0
    last_finished: RunRecord | None = None
    paused_at: datetime | None = None
    refused_at: datetime | None = None
    paused_by: str | None = None  # user@host of `schedctl pause`, or "job file" for `paused = true`
    lease_held: bool = False  # ``lease`` unexpired at the database's now the status was read at

    @property
    def paused(self) -> bool:
        return self.paused_at is not None or self.job.paused


def _clock(at: datetime, now: datetime) -> str:
    """Minutes are what a tired operator reads: ``13:02`` today, ``2026-03-01 13:02`` otherwise (UTC)."""
    at = at.astimezone(UTC)
    return at.strftime("%H:%M" if at.date() == now.astimezone(UTC).date() else "%Y-%m-%d %H:%M")


def _next_and_description(job: Job, now: datetime) -> tuple[datetime | None, str | None]:
    from schedctl.timing.cron import schedule_for

    sched = schedule_for(job.schedule, job.timezone, job.dst)
    try:
        description: str | None = sched.describe()
    except Exception:  # noqa: BLE001 - a description is a nicety; status must still answer
        description = None
    return sched.next_after(now), description


def _failing_streak(finished: list[RunRecord]) -> int:
    """How many of the newest finished runs failed in a row."""
    streak = 0
    for r in finished:
        if r.state not in _FAILED:
            break
        streak += 1
    return streak


def _exit_text(runs: list[RunRecord]) -> str:
    parts: list[str] = []
    for r in runs:
        if r.state == RunState.TIMED_OUT:
            part = "timed out"
        else:
            part = f"exit {r.exit_status}" if r.exit_status is not None else "failed"
        if part not in parts:
            parts.append(part)
    return ", ".join(parts)


# Ticks a job's own settings chose not to run: reported by `missed`, but not a reason to page anyone.
_BY_POLICY = frozenset(
    {
        SkipReason.CATCH_UP_SKIP,
        SkipReason.CATCH_UP_LATEST,
        Reason.PAUSED,
        Reason.NOT_DEFINED,
        SkipReason.CONCURRENCY,
        SkipReason.STARTING_DEADLINE,
    }
)


def needs_attention(
    job: Job, missed: list[MissedTick], last_dispatched_tick: datetime | None
) -> list[MissedTick]:
    """The missed ticks that are a problem: not chosen by the job's policy. A "skip"/"latest" job that has
    run since an outage would have dropped the outage's ticks anyway."""
    out = []
    for m in missed:
        if m.reason_code in _BY_POLICY:
            continue
        superseded = last_dispatched_tick is not None and last_dispatched_tick > m.scheduled_for
        if m.reason_code == Reason.NO_LEADER and job.catch_up is not CatchUp.ALL and superseded:
            continue
        out.append(m)
    return out


@dataclass(frozen=True)
class _Facts:
    job: Job
    state: StateRecord | None
    lease: LeaseRecord | None
    last_term: TermRecord | None
    missed: list[MissedTick]
    attention: list[MissedTick]
    finished: list[RunRecord]  # newest first
    next_fire: datetime | None
    active: int = 0  # runs queued or running
    oldest_active: datetime | None = None
    stranded: Stranded | None = None  # due queued runs no alive worker may take
    file_paused_since: datetime | None = None  # when a leader first saw `paused = true` in the job file


def _span(ticks: list[MissedTick], now: datetime) -> str:
    span = _clock(ticks[0].scheduled_for, now)
    return span + (f"..{_clock(ticks[-1].scheduled_for, now)}" if len(ticks) > 1 else "")


def _stopped(f: _Facts, now: datetime) -> tuple[Verdict, str] | None:
    """A pause, a refusal or no leader: the job dispatches nothing, whatever its runs did."""
    job, state = f.job, f.state
    if state is not None and state.paused_at is not None:
        by = f" by {state.paused_by}" if state.paused_by else ""
        return Verdict.PAUSED, (
            f"paused since {_clock(state.paused_at, now)}{by} (schedctl pause); "
            f"`schedctl resume {job.id}` resumes it"
        )
    if job.paused:
        since = f" since {_clock(f.file_paused_since, now)}" if f.file_paused_since else ""
        return Verdict.PAUSED, f"paused in its job file (paused = true){since}"
    if state is not None and state.refused_at is not None:
        detail = (
            first_clause(state.refused_detail) or f"missed ticks exceed max_catch_up = {catch_up_bound(job)}"
        )
        return (
            Verdict.REFUSED,
            f"refused: {detail}; run `schedctl replay {job.id} --max {max(1, len(f.missed))}`",
        )
    if f.lease is None or not f.lease.held_at(now):
        if f.last_term is None:
            return (
                Verdict.NOT_RUNNING,
                "not running: no scheduler has ever held the lease (start `schedctl serve`)",
            )
        return Verdict.NOT_RUNNING, (
            f"not running since {_clock(f.last_term.held_until, now)} because no scheduler has held the lease "
            f"since then; last leader was {f.last_term.holder}"
        )
    return None


def _verdict(f: _Facts, now: datetime) -> tuple[Verdict, str]:
    stopped = _stopped(f, now)
    if stopped is not None:
        return stopped
    if f.stranded is not None:
        return Verdict.NO_WORKER, f.stranded.text(now)
    job = f.job
    streak = _failing_streak(f.finished)
    if streak:
        runs = "last run failed" if streak == 1 else f"last {streak} runs failed"
        return Verdict.FAILING, f"failing: {runs} ({_exit_text(f.finished[:streak])})"
    if f.attention:
        n = len(f.attention)
        hint = (
            f"`schedctl replay {job.id} --max {n}` runs them"
            if n == len(f.missed)
            else f"`schedctl missed {job.id}` lists all {len(f.missed)}"
        )
        return Verdict.MISSED, (
            f"missed {n} tick{'s' if n != 1 else ''} ({_span(f.attention, now)}): {f.attention[-1].reason_text}; "
            + hint
        )
    nxt = f"next at {_clock(f.next_fire, now)}" if f.next_fire else "no next fire"
    if f.state is None and f.lease is not None:
        return Verdict.PENDING, (
            f"not picked up yet: the leader ({f.lease.holder}) has not seen this job; is it in the job files "
            "the scheduler reads? (SIGHUP reloads them)"
        )
    note = ""
    if f.active > 1 and f.oldest_active is not None:
        note += f"; {f.active} runs queued or running, the oldest for {_clock(f.oldest_active, now)}"
    if f.missed:
        codes = ", ".join(sorted({m.reason_code for m in f.missed}))
        note += f"; {len(f.missed)} ticks not run by the job's policy ({codes}; `schedctl missed {job.id}`)"
    if not f.finished:
        return Verdict.PENDING, f"waiting: no run has finished yet, {nxt}{note}"
    last = f.finished[0]
    when = _clock(last.finished_at or last.scheduled_for, now)
    what = "was cancelled" if last.state == RunState.CANCELLED else "succeeded"
    return Verdict.HEALTHY, f"healthy: last run {what} at {when}, {nxt}{note}"


def _timeline(rows: list[RunRecord], missed: list[MissedTick], last_n: int) -> list[TimelineEntry]:
    # skipped rows come in through `missed`, with their explanation
    entries: list[TimelineEntry] = [r for r in rows if r.state != RunState.SKIPPED]
    entries += missed
    entries.sort(key=lambda e: e.scheduled_for)
    return entries[-last_n:] if last_n > 0 else []


def _file_paused_since(events: list[EventRecord], state: StateRecord | None) -> datetime | None:
    """Since when the job file's ``paused = true`` holds, by the pause the scheduler journaled."""
    open_ = [p for p in pause_intervals(events, state) if p.source == PauseSource.JOB_FILE and p.end is None]
    return open_[0].start if open_ else None


def _assemble(
    job: Job,
    now: datetime,
    last_n: int,
    *,
    state: StateRecord | None,
    missed: list[MissedTick],
    rows: list[RunRecord],
    finished: list[RunRecord],
    dispatched: list[RunRecord],
    active: tuple[int, datetime | None],
    lease: LeaseRecord | None,
    last_term: TermRecord | None,
    schedules: dict[str, tuple[datetime | None, str | None]] | None = None,
    stranded: Stranded | None = None,
    file_paused_since: datetime | None = None,
) -> JobStatus:
    """One job's status from what the store holds about it. ``schedules`` shares the next fire and description
    between jobs on one schedule."""
    if schedules is None:
        next_fire, description = _next_and_description(job, now)
    else:
        key = job.schedule_key
        if key not in schedules:
            schedules[key] = _next_and_description(job, now)
        next_fire, description = schedules[key]
    if job.paused or (state is not None and state.paused_at is not None):
        next_fire = None  # nothing fires while paused: the verdict says since when and by whom
    facts = _Facts(
        job=job,
        state=state,
        lease=lease,
        last_term=last_term,
        missed=missed,
        attention=needs_attention(job, missed, dispatched[0].scheduled_for if dispatched else None),
        finished=finished,
        next_fire=next_fire,
        active=active[0],
        oldest_active=active[1],
        stranded=stranded,
        file_paused_since=file_paused_since,
    )
    code, text = _verdict(facts, now)
    db_pause = state if state is not None and state.paused_at is not None else None  # `schedctl pause`
    return JobStatus(
        job=job,
        description=description,
        next_fire=next_fire,
        timeline=_timeline(rows, missed, last_n),
        lease=facts.lease,
        last_leader=facts.last_term,
        verdict_code=code,
        verdict=text,
        missed=missed,
        failing_streak=_failing_streak(finished),
        last_finished=finished[0] if finished else None,
        paused_at=db_pause.paused_at if db_pause else (file_paused_since if job.paused else None),
        refused_at=state.refused_at if state else None,
        paused_by=db_pause.paused_by if db_pause else (PauseSource.JOB_FILE if job.paused else None),
        lease_held=lease is not None and lease.held_at(now),
    )


def assemble(
    jobs: Iterable[Job], reads: StatusReads, fires_cache: FiresCache | None = None
) -> list[JobStatus]:
    """Each job's status, in the given order, from what ``store.snapshot.read_status`` read for them."""
    items = list(jobs)
    missed = Gathered(items, reads.missed).explain(fires_cache)
    schedules: dict[str, tuple[datetime | None, str | None]] = {}
    out: list[JobStatus] = []
    for job in items:
        state = reads.states.get(job.id)
        paused_since = _file_paused_since(reads.pauses[job.id], state) if job.paused else None
        out.append(
            _assemble(
                job,
                reads.now,
                reads.last_n,
                state=state,
                missed=missed[job.id],
                rows=reads.recent[job.id],
                finished=reads.finished[job.id],
                dispatched=reads.dispatched[job.id],
                active=reads.active.get(job.id, (0, None)),
                lease=reads.lease,
                last_term=reads.last_term,
                schedules=schedules,
                stranded=reads.stranded.get(job.id),
                file_paused_since=paused_since,
            )
        )
    return out


def _read(store: Store, jobs: list[Job], lookup: Lookup, last_n: int) -> StatusReads:
    from schedctl.store.snapshot import read_status

    with store.read() as conn:
        return read_status(conn, [j.id for j in jobs], lookup, last_n)


def job_status(
    store: Store,
    job: Job,
    now: datetime,
    last_n: int = DEFAULT_LAST,
    *,
    grace: float | None = None,
    lease_name: str = DEFAULT_LEASE_NAME,
) -> JobStatus:
    """One job: definition, next fire, the last ``last_n`` ticks, the lease holder, and the verdict."""
    reads = _read(store, [job], Lookup(now, grace=grace, lease_name=lease_name), last_n)
    return assemble([job], reads)[0]  # after the transaction: see store.snapshot


def all_status(
    store: Store,
    jobs: Mapping[str, Job] | Iterable[Job],
    now: datetime,
    *,
    grace: float | None = None,
    lease_name: str = DEFAULT_LEASE_NAME,
) -> list[JobStatus]:
    """Every job's status (timeline of one: the last result), in job id order."""
    items = sorted(jobs.values() if isinstance(jobs, Mapping) else jobs, key=lambda j: j.id)
    reads = _read(store, items, Lookup(now, grace=grace, lease_name=lease_name), 1)
    return assemble(items, reads, {})  # after the transaction: see store.snapshot
