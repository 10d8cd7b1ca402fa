"""What `missed`, `status` and `replay` read, as plain frozen data: every statement they need, in a number that
does not grow with the jobs (each table once per chunk of ids, the lease once).

Explaining a day-old outage of a per-second job walks 86,400 fires: seconds of CPU on a loaded host. So the
callers read here inside their transaction and explain after it ends (``missed``, ``status`` take these as
data), and no session sits idle in a transaction past the server's bound (`store.bounds`), which would end it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from schedctl.jobs.job import DEFAULT_CATCH_UP_GRACE, DEFAULT_LEASE_NAME, EventKind, RunState
from schedctl.store import history as h
from schedctl.store import missedrecord as record
from schedctl.store.eligibility import Stranded, stranded_runs
from schedctl.store.rows import EventRecord, LeaseRecord, RangeRecord, RunRecord, StateRecord, TermRecord
from schedctl.store.window import Lookup, TickSpan, resolve_window, younger_window

# The events that explain a tick.
MISSED_EVENTS = (EventKind.PAUSED, EventKind.RESUMED, EventKind.SCHEDULE_CHANGED)
PAUSE_EVENTS = (EventKind.PAUSED, EventKind.RESUMED)
FINISHED = (RunState.SUCCEEDED, RunState.CANCELLED, RunState.FAILED, RunState.TIMED_OUT)
DISPATCHED = (RunState.QUEUED, RunState.RUNNING, *FINISHED)
FINISHED_LIMIT = 20  # enough for a failing streak's length and its exit statuses


def current_grace(conn: Connection, lease_name: str = DEFAULT_LEASE_NAME) -> float:
    """The grace of the latest leader, who decides now which ticks are late and which are missed."""
    term = h.latest_term(conn, lease_name)
    if term is None or term.catch_up_grace is None:
        return DEFAULT_CATCH_UP_GRACE
    return term.catch_up_grace


@dataclass(frozen=True)
class Evidence:
    """What the store holds about one job's window."""

    runs: list[RunRecord]
    ranges: list[RangeRecord]
    terms: list[TermRecord]
    events: list[EventRecord]


@dataclass(frozen=True)
class MissedReads:
    """Everything ``missed`` reads for some jobs: each job's window (and the span younger than the grace, see
    ``younger_window``), and what the store holds about them. A job whose window and younger span are both
    empty has no entry in ``windows`` nor ``evidence``."""

    states: Mapping[str, StateRecord]
    windows: Mapping[str, tuple[TickSpan, TickSpan | None]]
    evidence: Mapping[str, Evidence]
    now: datetime
    grace: float
    fallback: float  # the grace of terms that recorded none
    late: bool = False  # list the younger ticks not recorded as skipped, as late (``Lookup.late``)


def read_missed(
    conn: Connection, job_ids: Iterable[str], lookup: Lookup, states: Mapping[str, StateRecord] | None = None
) -> MissedReads:
    """``states`` spares reading job_state again when the caller has it."""
    ids = list(job_ids)
    since, until, now, grace = lookup.since, lookup.until, lookup.now, lookup.grace
    # An explicit grace also stands for the terms that recorded none; else those had the 60 s default.
    fallback = DEFAULT_CATCH_UP_GRACE if grace is None else grace
    if grace is None:
        grace = current_grace(conn, lookup.lease_name)
    if states is None:
        states = h.job_states_of(conn, ids)
    firsts = h.earliest_runs_at(conn, [i for i in ids if i not in states])
    windows: dict[str, tuple[TickSpan, TickSpan | None]] = {}
    for job_id in ids:
        window = resolve_window(states.get(job_id), firsts.get(job_id), since, until, now, grace)
        younger = younger_window(window, until, now)
        if window.after < window.until or younger is not None:
            windows[job_id] = (window, younger)
    evidence: dict[str, Evidence] = {}
    if windows:
        wanted = list(windows)
        # One read over the union of the windows; each job then keeps the rows of its own.
        lo = min(w.after for w, _ in windows.values())
        hi = max((y or w).until for w, y in windows.values())
        runs = h.runs_between_by_job(conn, wanted, lo, hi)
        ranges = record.ranges_between_by_job(conn, wanted, lo, hi)
        # Every term up to now: a later leader with a longer grace may still have dispatched a tick late.
        cover = h.TermsCover(conn, lookup.lease_name, lo, max(hi, now))
        events = h.events_by_job(conn, wanted, MISSED_EVENTS, until=now)
        for job_id, (window, younger) in windows.items():
            reach = (younger or window).until
            evidence[job_id] = Evidence(
                runs=[r for r in runs[job_id] if window.after < r.scheduled_for < reach],
                ranges=ranges[job_id],
                terms=cover.between(window.after, max(hi, now)),
                events=events[job_id],
            )
    return MissedReads(states, windows, evidence, now, grace, fallback, lookup.late)


@dataclass(frozen=True)
class StatusReads:
    """Everything ``status`` reads for some jobs, by job id; the lease and its latest term once."""

    now: datetime
    last_n: int
    states: Mapping[str, StateRecord]
    missed: MissedReads
    recent: Mapping[str, list[RunRecord]]  # newest first, skipped rows included (see recent_limit)
    finished: Mapping[str, list[RunRecord]]  # newest first, at most FINISHED_LIMIT
    dispatched: Mapping[str, list[RunRecord]]  # the latest dispatched row, if any
    active: Mapping[str, tuple[int, datetime | None]]  # queued or running: how many, the oldest tick
    pauses: Mapping[str, list[EventRecord]]
    lease: LeaseRecord | None
    last_term: TermRecord | None
    stranded: Mapping[str, Stranded]


def recent_limit(last_n: int) -> int:
    # Skipped rows are left out of the timeline (`missed` brings them back), so read well past last_n.
    return max(last_n, 1) * 2 + 20


def read_status(conn: Connection, job_ids: Sequence[str], lookup: Lookup, last_n: int) -> StatusReads:
    """``lookup`` without since and until: status explains each job's default window."""
    ids = list(job_ids)
    now, lease_name = lookup.now, lookup.lease_name
    states = h.job_states_of(conn, ids)
    missed = read_missed(conn, ids, lookup, states)
    recent, finished, dispatched = h.latest_runs_by_job(
        conn, ids, now, [(recent_limit(last_n), None), (FINISHED_LIMIT, FINISHED), (1, DISPATCHED)]
    )
    return StatusReads(
        now=now,
        last_n=last_n,
        states=states,
        missed=missed,
        recent=recent,
        finished=finished,
        dispatched=dispatched,
        active=h.active_runs_by_job(conn, ids),
        # Pause events are few (two per pause), so one read per chunk of ids, as for the other tables.
        pauses=h.events_by_job(conn, ids, PAUSE_EVENTS, until=now),
        lease=h.current_lease(conn, lease_name),
        last_term=h.latest_term(conn, lease_name),
        stranded=stranded_runs(conn, now),
    )
