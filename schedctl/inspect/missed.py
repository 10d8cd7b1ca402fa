"""Missed ticks: the ticks of a job in a window that did not run, each with the reason the store recorded.

A tick did not run when its row is ``skipped`` or when it has no row at all. A skipped row carries its own
reason; a tick without a row is explained from the job's state and events (not yet defined, paused, refused)
and from the lease history (no scheduler held the lease). When a leader held the lease and recorded nothing,
the reason says exactly that instead of guessing.

A tick younger than the leader's catch-up grace without a row may still be dispatched (late), so it is not
missed yet; one the leader recorded as skipped is missed at once, since nothing about it can change any more.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from schedctl.inspect.leasecover import LeaseTimeline
from schedctl.jobs.job import (
    DEFAULT_CATCH_UP_GRACE,
    DEFAULT_LEASE_NAME,
    EventKind,
    Job,
    PauseSource,
    RunState,
    SkipReason,
)
from schedctl.store.missedranges import RangeIndex
from schedctl.store.rows import EventRecord, RunRecord, StateRecord
from schedctl.store.window import TINY, Lookup, TickSpan
from schedctl.timing.timetext import clock_text, format_duration

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from schedctl.store import Store
    from schedctl.store.snapshot import Evidence, MissedReads


class Reason(StrEnum):
    """Why a tick without a ``skipped`` row did not run. ``reason`` in ``missed --json`` is one of these or a
    ``SkipReason`` (the reason its skipped row carries, or ``catch_up_refused`` for a refused job's ticks)."""

    NO_LEADER = "no_leader"  # no scheduler held the lease at the tick (nor within the grace after it)
    PAUSED = "paused"  # the job was paused (`schedctl pause` or `paused = true` in its file)
    NOT_DEFINED = "not_defined"  # before a scheduler first saw the job (or before its schedule changed)
    UNEXPLAINED = "unexplained"  # a scheduler held the lease, yet nothing was recorded for the tick
    LATE = "late"  # younger than the leader's grace: not missed (yet); only listed for an explicit --until


class TickState(StrEnum):
    """``state`` in ``missed --json``."""

    MISSED = "missed"  # it did not run and will not, unless replayed
    LATE = "late"  # younger than the grace: the leader may still dispatch it


@dataclass(frozen=True)
class MissedTick:
    scheduled_for: datetime
    reason_code: str
    reason_text: str
    row_state: str | None  # "skipped" (or "queued" for a late tick) when the tick has a row, None when not
    state: str = TickState.MISSED


@dataclass(frozen=True)
class MissedCount:
    job_id: str
    count: int
    reasons: Mapping[str, int] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None


# -- pauses from the journal --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pause:
    start: datetime
    end: datetime | None
    source: str


def pause_intervals(events: Iterable[EventRecord], state: StateRecord | None) -> list[_Pause]:
    """Intervals the job was paused, per source ("schedctl pause" or "job file"); both may overlap."""
    open_: dict[str, datetime] = {}
    out: list[_Pause] = []
    for ev in events:
        source = ev.detail or PauseSource.COMMAND
        if ev.kind == EventKind.PAUSED:
            open_.setdefault(source, ev.at)
        elif ev.kind == EventKind.RESUMED:
            # A resume that names no known source ends every pause: better to under-report than invent one.
            for src in [source] if source in open_ else list(open_):
                out.append(_Pause(open_.pop(src), ev.at, src))
    if state is not None and state.paused_at is not None and PauseSource.COMMAND not in open_:
        open_[PauseSource.COMMAND] = state.paused_at
    out.extend(_Pause(start, None, src) for src, start in open_.items())
    return sorted(out, key=lambda p: p.start)


def _paused_at(pauses: list[_Pause], tick: datetime) -> _Pause | None:
    for p in pauses:
        if p.start <= tick and (p.end is None or tick < p.end):
            return p
    return None


def _pause_text(p: _Pause, tick: datetime) -> str:
    how = "in its job file (paused = true)" if p.source == PauseSource.JOB_FILE else f"({p.source})"
    if p.end is None:
        return f"the job was paused {how} since {clock_text(p.start, tick)}"
    return f"the job was paused {how} from {clock_text(p.start, tick)} until {clock_text(p.end, tick)}"


# -- explaining one job -------------------------------------------------------------------------------------


@dataclass
class _Context:
    job: Job
    state: StateRecord | None
    leases: LeaseTimeline
    pauses: list[_Pause]
    redefined_at: datetime | None  # defined_at came from a schedule change, not first sight
    grace: timedelta


def catch_up_bound(job: Job) -> int:
    from schedctl.jobs.job import DEFAULT_MAX_CATCH_UP

    return job.max_catch_up if job.max_catch_up is not None else DEFAULT_MAX_CATCH_UP


def first_clause(detail: str | None) -> str:
    """The first clause of a recorded sentence: the scheduler's own advice after it would repeat ours."""
    return re.split(r";\s|\.\s", (detail or "").strip(), maxsplit=1)[0].strip().rstrip(".")


def _skipped_text(ctx: _Context, row: RunRecord) -> str:
    job, detail = ctx.job, first_clause(row.reason_detail)
    code = row.reason or ""
    # The catch-up texts say which policy decided and, below, why it had to (a pause, no leader): richer than
    # the scheduler's generic "missed while no scheduler was dispatching".
    if code == SkipReason.CATCH_UP_SKIP:
        text = 'dropped by catch_up = "skip"'
    elif code == SkipReason.CATCH_UP_LATEST:
        text = 'superseded by a later tick (catch_up = "latest")'
    elif code == SkipReason.CATCH_UP_REFUSED:
        bound = detail or f"more missed ticks than max_catch_up = {catch_up_bound(job)}"
        text = f'refused by catch_up = "all": {bound}; waiting for `schedctl replay`'
    elif code == SkipReason.STARTING_DEADLINE:
        limit = format_duration(job.starting_deadline) if job.starting_deadline is not None else None
        if "deadline" in detail:  # the scheduler's own sentence already names the policy
            text = detail
        else:
            text = f"past starting_deadline ({limit or 'its limit'})" + (f": {detail}" if detail else "")
    elif code == SkipReason.CONCURRENCY:
        if "concurrency" in detail:
            text = detail
        else:
            text = 'skipped by concurrency = "forbid": ' + (detail or "a run of the job was still active")
    elif code == SkipReason.QUEUE_FULL:
        text = "skipped: no worker had started the runs already queued" + (f" ({detail})" if detail else "")
    elif code == Reason.PAUSED:
        text = "skipped because the job was paused" + (f": {detail}" if detail else "")
    else:
        text = detail or f"skipped ({code or 'no reason recorded'})"
    if code in (SkipReason.CATCH_UP_SKIP, SkipReason.CATCH_UP_LATEST, SkipReason.CATCH_UP_REFUSED):
        cause = _downtime_cause(ctx, row.scheduled_for)
        if cause:
            text = f"{cause}; then {text}"
    return text


def _downtime_cause(ctx: _Context, tick: datetime) -> str | None:
    """Why a catch-up policy had to decide about the tick at all: a pause, or no leader."""
    pause = _paused_at(ctx.pauses, tick)
    if pause is not None:
        return _pause_text(pause, tick)
    if ctx.leases.holder_near(tick) is None:
        return ctx.leases.gap_text(tick)
    return None


def _unrecorded(ctx: _Context, tick: datetime) -> tuple[Reason | SkipReason, str]:
    """The reason for a tick that has no row at all."""
    state = ctx.state
    if state is not None and tick <= state.defined_at:
        when = clock_text(state.defined_at, tick)
        if ctx.redefined_at is not None:
            return Reason.NOT_DEFINED, f"before its schedule changed at {when}; ticks count from the change"
        return Reason.NOT_DEFINED, f"before the job was defined: a scheduler first saw it at {when}"
    pause = _paused_at(ctx.pauses, tick)
    if pause is not None:
        return Reason.PAUSED, _pause_text(pause, tick)
    term = ctx.leases.holder_near(tick)
    if term is None:
        return Reason.NO_LEADER, ctx.leases.gap_text(tick)
    if state is None:
        return Reason.NOT_DEFINED, (
            f"no scheduler has seen this job yet, though term {term.term} ({term.holder}) held the lease: "
            "is it in the job files the scheduler reads?"
        )
    if state.refused_at is not None and tick + ctx.grace >= state.refused_at:
        detail = f" ({first_clause(state.refused_detail)})" if state.refused_detail else ""
        return SkipReason.CATCH_UP_REFUSED, (
            f"catch-up was refused at {clock_text(state.refused_at, tick)}{detail}; the job dispatches nothing "
            "until `schedctl replay`"
        )
    if ctx.job.paused:
        return Reason.PAUSED, "the job file says paused = true"
    text = f"a scheduler held the lease then (term {term.term}, {term.holder}) but recorded nothing for this tick"
    if state.last_dispatched is not None and state.last_dispatched < tick:
        text += f"; dispatch has not gone past {clock_text(state.last_dispatched, tick)}"
    return Reason.UNEXPLAINED, text


FiresCache = dict[tuple[str, datetime, datetime], list[datetime]]


def _fires(job: Job, window: TickSpan, cache: FiresCache | None = None) -> list[datetime]:
    """The job's ticks in the window; ``cache`` shares them between jobs on one schedule (most jobs' default
    windows are the same last 7 days)."""
    from schedctl.timing.cron import schedule_for

    if window.until <= window.after:
        return []
    key = (job.schedule_key, window.after, window.until)
    if cache is not None and key in cache:
        return cache[key]
    schedule = schedule_for(job.schedule, job.timezone, job.dst)
    ticks = [fire.utc for fire in schedule.fires(window.after, window.until)]
    if cache is not None:
        cache[key] = ticks
    return ticks


def missed(
    store: Store,
    job: Job,
    since: datetime | None,
    until: datetime | None,
    now: datetime,
    *,
    grace: float | None = None,
    lease_name: str = DEFAULT_LEASE_NAME,
    late: bool = False,
) -> list[MissedTick]:
    """The job's ticks in the window that did not run, oldest first, each with its reason. ``grace`` None:
    the grace the latest leader recorded. The window ends at the grace before now, but a younger tick the
    leader recorded as skipped is listed too (up to ``until``). ``late``: also list the younger ticks that
    have not run, as ``late``."""
    with store.read() as conn:
        found = gather(conn, [job], Lookup(now, since, until, grace, lease_name, late))
    return found.explain()[job.id]  # after the transaction: see store.snapshot


def _explain(
    job: Job,
    state: StateRecord | None,
    window: TickSpan,
    younger: TickSpan | None,
    found: Evidence,
    now: datetime,
    grace: float,
    fires_cache: FiresCache | None,
    fallback_grace: float = DEFAULT_CATCH_UP_GRACE,
    late: bool = False,
) -> list[MissedTick]:
    """The missed ticks of one job from what the store holds about it. ``fallback_grace``: the grace of terms
    that recorded none. ``late``: also list the ``younger`` ticks that have not run, as late."""
    rows = {r.scheduled_for: r for r in found.runs}
    events = found.events
    redefined = any(
        e.kind == EventKind.SCHEDULE_CHANGED and state and e.at == state.defined_at for e in events
    )
    ctx = _Context(
        job=job,
        state=state,
        leases=LeaseTimeline(found.terms, now, fallback_grace),
        pauses=pause_intervals((e for e in events if e.kind != EventKind.SCHEDULE_CHANGED), state),
        redefined_at=state.defined_at if redefined and state else None,
        grace=timedelta(seconds=grace),
    )
    # Before the history mark a tick without a row ran (its run was pruned) unless the lasting record names it.
    mark = state.history_start if state is not None else None
    kept_ranges = RangeIndex(found.ranges)
    open_from = window if mark is None or mark <= window.after else TickSpan(mark - TINY, window.until)
    out: list[MissedTick] = []
    ticks = set(_fires(job, open_from, fires_cache))
    # A skipped row is a missed tick even when the current schedule would not fire then (it changed since).
    ticks.update(t for t, r in rows.items() if r.state == RunState.SKIPPED and t < window.until)
    ticks.update(kept_ranges.ticks_in(window.after, window.until))
    for tick in sorted(ticks):
        row = rows.get(tick)
        if row is None:
            kept = kept_ranges.at(tick)
            if kept is not None and kept.reason is not None:
                out.append(_kept_skip(ctx, tick, kept.reason, kept.reason_detail))
            elif kept is not None or mark is None or tick >= mark:
                code, text = _unrecorded(ctx, tick)
                out.append(MissedTick(tick, str(code), text, None))
        elif row.state == RunState.SKIPPED:
            out.append(_skip(ctx, row))
    if younger is not None:
        out.extend(_younger(ctx, younger, rows, kept_ranges, fires_cache, late))
    return out


def _skip(ctx: _Context, row: RunRecord) -> MissedTick:
    return MissedTick(
        row.scheduled_for, row.reason or RunState.SKIPPED, _skipped_text(ctx, row), RunState.SKIPPED
    )


def _kept_skip(ctx: _Context, tick: datetime, reason: str, detail: str | None) -> MissedTick:
    return _skip(ctx, RunRecord(ctx.job.id, tick, RunState.SKIPPED, reason, detail))


def _younger(
    ctx: _Context,
    span: TickSpan,
    rows: Mapping[datetime, RunRecord],
    kept_ranges: RangeIndex,
    cache: FiresCache | None,
    late: bool,
) -> list[MissedTick]:
    """Ticks younger than the grace. One the leader recorded as skipped is missed at once, with its reason:
    nothing about it can change any more (only `schedctl replay` requeues it). With ``late``, the others that
    have not run are listed as late: queued and waiting for a worker, or not dispatched yet (by a leader
    within its grace, or by none since the last one went)."""
    ticks = {t for t, r in rows.items() if r.state == RunState.SKIPPED and span.after < t < span.until}
    ticks.update(kept_ranges.ticks_in(span.after, span.until))
    if late:
        ticks.update(_fires(ctx.job, span, cache))
    out: list[MissedTick] = []
    for tick in sorted(ticks):
        row = rows.get(tick)
        kept = kept_ranges.at(tick) if row is None else None
        if row is not None and row.state == RunState.SKIPPED:
            out.append(_skip(ctx, row))
        elif kept is not None and kept.reason is not None:
            out.append(_kept_skip(ctx, tick, kept.reason, kept.reason_detail))
        elif not late:
            continue
        elif row is None:
            gone = ctx.leases.last_end()
            if gone is not None:
                text = (
                    f"no leader since {clock_text(gone.held_until, tick)} (term {gone.term}, {gone.holder}); "
                    "the next one dispatches it late or by its catch_up"
                )
            else:
                text = "not dispatched yet: inside the catch-up grace the leader dispatches it late"
            out.append(MissedTick(tick, str(Reason.LATE), text, None, TickState.LATE))
        elif row.state == RunState.QUEUED:
            text = f"queued at {clock_text(row.queued_at or tick, tick)}, waiting for a worker"
            out.append(MissedTick(tick, str(Reason.LATE), text, RunState.QUEUED, TickState.LATE))
    return out


def missed_counts(
    store: Store,
    jobs: Mapping[str, Job] | Iterable[Job],
    now: datetime,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    grace: float | None = None,
    lease_name: str = DEFAULT_LEASE_NAME,
) -> list[MissedCount]:
    """One count per job (each over its own window), in job id order. ``grace`` None: the grace the latest
    leader recorded, as `missed JOB` and `status` judge by."""
    items = sorted(jobs.values() if isinstance(jobs, Mapping) else jobs, key=lambda j: j.id)
    out: list[MissedCount] = []
    with store.read() as conn:
        gathered = gather(conn, items, Lookup(now, since, until, grace, lease_name))
    found = gathered.explain({})  # after the transaction: see store.snapshot
    for job in items:
        ticks = found[job.id]
        out.append(
            MissedCount(
                job_id=job.id,
                count=len(ticks),
                reasons=dict(Counter(t.reason_code for t in ticks)),
                first=ticks[0].scheduled_for if ticks else None,
                last=ticks[-1].scheduled_for if ticks else None,
            )
        )
    return out


@dataclass(frozen=True)
class Gathered:
    """Some jobs and what the store holds about their windows; ``explain`` works their missed ticks out."""

    items: list[Job]
    reads: MissedReads

    def explain(self, fires_cache: FiresCache | None = None) -> dict[str, list[MissedTick]]:
        """Every job's missed ticks, by job id, oldest first. ``fires_cache`` shares the fires of one schedule
        between the jobs on it."""
        r = self.reads
        out: dict[str, list[MissedTick]] = {j.id: [] for j in self.items}
        for job in self.items:
            if job.id not in r.windows:
                continue
            window, younger = r.windows[job.id]
            state, found = r.states.get(job.id), r.evidence[job.id]
            out[job.id] = _explain(
                job, state, window, younger, found, r.now, r.grace, fires_cache, r.fallback, r.late
            )
        return out


def gather(
    conn: Connection, jobs: Iterable[Job], lookup: Lookup, states: Mapping[str, StateRecord] | None = None
) -> Gathered:
    """The reads `missed` needs for these jobs (``store.snapshot.read_missed``), ready to explain after the
    transaction ends."""
    from schedctl.store.snapshot import read_missed

    items = list(jobs)
    return Gathered(items, read_missed(conn, [j.id for j in items], lookup, states))
