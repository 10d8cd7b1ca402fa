"""The leader's writes: run rows for ticks, job_state bookkeeping and job_events, each in a fenced transaction.

Every function that writes takes a ``Fence`` and calls ``leases.fence`` first inside its transaction, so a
deposed leader (paused, partitioned, or slow) has its write rejected with NotLeader instead of moving a job's
state after someone else leads.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.engine import Connection

from schedctl.jobs.job import (
    DEFAULT_MAX_CATCH_UP,
    CatchUp,
    Concurrency,
    EventKind,
    Job,
    RunState,
    SkipReason,
    Tick,
)
from schedctl.store import Store, jobstate, leases, runrows, wake
from schedctl.store.dialect import id_chunks, in_list
from schedctl.store.rows import StateRecord
from schedctl.store.schema import job_events, job_runs, job_state

_ACTIVE = (RunState.QUEUED.value, RunState.RUNNING.value)
# Definitions RowValues.prepare hashes between two looks at its stop event (~0.4 s at 20,000 on one core).
PREPARE_CHUNK = 20_000


@dataclass(frozen=True)
class Fence:
    """The lease term a write is conditioned on."""

    name: str
    identity: str
    term: int


@dataclass(frozen=True)
class StateChange:
    """A job_state write plus its job_events line, for jobs the leader sees for the first time or anew."""

    job_id: str
    kind: EventKind  # DEFINED, SCHEDULE_CHANGED, PAUSED or RESUMED
    schedule_key: str | None = None
    paused_by_file: bool | None = None
    detail: str | None = None


@dataclass
class DispatchResult:
    inserted: int = 0  # rows new in job_runs (a tick another leader claimed first counts zero)
    queued: list[Tick] = field(default_factory=list)  # as decided after the concurrency check
    skipped: list[Tick] = field(default_factory=list)
    newest: dict[str, datetime] = field(default_factory=dict)  # job id -> newest tick decided in the batch


def load_states(
    store: Store, stop: threading.Event | None = None, between: Callable[[], bool] | None = None
) -> dict[str, StateRecord] | None:
    """Every job_state row: what a new leader resumes from. None when ``stop`` was set before the end, or
    when ``between`` (called after each page) returned False.

    In pages by job id, not one scan: a million rows took 5-8 s to fetch and build, and a stop signal
    waited for all of it. Each page is a short index range in a read of its own, and between pages the
    caller renews its lease (``between``): on PostgreSQL a million rows took 14.5 s, and a take-over that
    renewed only before them let its 15 s lease lapse and took it again as a new term. Pages read in separate
    transactions are safe: each row is read once, and what changes later (a pause) is polled at each renewal.
    """
    out: dict[str, StateRecord] = {}
    after: str | None = None
    while True:
        if stop is not None and stop.is_set():
            return None
        query = select(*jobstate.STATE_COLUMNS).order_by(job_state.c.job_id).limit(PREPARE_CHUNK)
        if after is not None:
            query = query.where(job_state.c.job_id > after)
        with store.read() as conn:
            rows = conn.execute(query).all()
        out.update((row[0], jobstate.state_record(row)) for row in rows)
        if len(rows) < PREPARE_CHUNK:
            return out
        after = rows[-1][0]
        if between is not None and not between():
            return None


def load_states_for(store: Store, job_ids: Iterable[str]) -> dict[str, StateRecord]:
    ids = list(job_ids)
    out: dict[str, StateRecord] = {}
    with store.read() as conn:
        for chunk in id_chunks(conn, ids):
            query = select(*jobstate.STATE_COLUMNS).where(in_list(conn, job_state.c.job_id, chunk))
            out.update((row[0], jobstate.state_record(row)) for row in conn.execute(query))
    return out


def load_held(store: Store) -> dict[str, StateRecord]:
    """Jobs paused by `schedctl pause` or refused: cheap (few rows), so the leader polls it every renewal."""
    query = select(*jobstate.STATE_COLUMNS).where(
        or_(job_state.c.paused_at.is_not(None), job_state.c.refused_at.is_not(None))
    )
    with store.read() as conn:
        return {row[0]: jobstate.state_record(row) for row in conn.execute(query)}


def record_changes(store: Store, fence: Fence, changes: Sequence[StateChange], now: datetime) -> None:
    """First sight of jobs, schedule changes and file pause flips, with their events, in one fenced
    transaction (the caller splits thousands of them into batches, renewing the lease in between)."""
    with _fenced(store, fence) as tx:
        _apply_changes(tx.conn, changes, now)


def _apply_changes(conn: Connection, changes: Sequence[StateChange], now: datetime) -> None:
    defined = [
        (c.job_id, c.schedule_key, bool(c.paused_by_file)) for c in changes if c.kind == EventKind.DEFINED
    ]
    jobstate.record_first_sight(conn, defined, now)
    for change in changes:
        if change.kind == EventKind.SCHEDULE_CHANGED:
            conn.execute(
                update(job_state)
                .where(job_state.c.job_id == change.job_id)
                .values(schedule_key=change.schedule_key, defined_at=now, last_dispatched=now, updated_at=now)
            )
        elif change.kind in (EventKind.PAUSED, EventKind.RESUMED) and change.paused_by_file is not None:
            conn.execute(
                update(job_state)
                .where(job_state.c.job_id == change.job_id)
                .values(paused_by_file=change.paused_by_file, updated_at=now)
            )
    events = [{"job_id": c.job_id, "at": now, "kind": c.kind, "detail": c.detail} for c in changes]
    if events:
        conn.execute(insert(job_events), events)


def dispatch(
    store: Store,
    fence: Fence,
    ticks: Sequence[Tick],
    jobs: Mapping[str, Job],
    now: datetime,
    refusals: Mapping[str, str] | None = None,
    advance: bool = True,
    row_values: RowValues | None = None,
) -> DispatchResult:
    """Claim ``ticks`` in one fenced transaction and move each job's last dispatched tick forward.

    ``refusals`` (job id -> sentence) marks jobs whose catch-up was refused in this batch. With
    ``advance=False`` the last dispatched ticks are left to a later ``advance`` call (``result.newest``
    holds them): a pass of many batches commits every claim first and its bookkeeping after. That order
    is safe because the run rows are the claims: a watermark behind them only makes a new leader
    re-decide ticks that the primary key then ignores, while one ahead of them would lose ticks.
    ``row_values``: the caller's cache of each definition's row values (a scheduler keeps one).
    """
    # One look-up per tick for everything its job contributes (row values, forbid, replace): a batch of a
    # 100,000-job boundary spends its client time here, not in the database.
    values = RowValues() if row_values is None else row_values
    statics = [values.of(jobs[t.job_id]) for t in ticks]
    started = values.expire()  # before anything is written: the versions' trust runs from no later than this
    with _fenced(store, fence) as tx:
        conn = tx.conn
        decided = _apply_concurrency(conn, ticks, statics, jobs)
        result = DispatchResult(
            queued=[t for t in decided if t.state is _QUEUED],
            skipped=[t for t in decided if t.state is not _QUEUED],
        )
        _cancel_replaced(conn, decided, statics)
        result.inserted = _insert_rows(conn, decided, statics, fence.term, now, values.written)
        result.newest = newest_ticks(decided)
        if advance:
            jobstate.advance_last_dispatched(conn, result.newest, now)
        if refusals:
            _refuse(conn, refusals, now)
        tx.wake = bool(result.queued)
    values.committed((t.job_id for t in decided), started)  # the next batches need not write them again
    if result.queued:
        wake.after_commit(store)
    return result


@dataclass
class _Fenced:
    conn: Connection
    wake: bool = False  # it queued runs: wake the workers when it commits


@contextlib.contextmanager
def _fenced(store: Store, fence: Fence) -> Iterator[_Fenced]:
    """A transaction fenced at both ends: refused first if the term is not current, and checked last,
    just before COMMIT, to have enough lease left to commit in (``leases.fence_commit``); the workers'
    wake-up rides on that last check."""
    with store.begin() as conn:
        leases.fence(conn, fence.name, fence.identity, fence.term)
        tx = _Fenced(conn)
        yield tx
        leases.fence_commit(
            conn, fence.name, fence.identity, fence.term, store.bounds.commit_margin, wake_workers=tx.wake
        )


def _apply_concurrency(
    conn: Connection, ticks: Sequence[Tick], statics: Sequence[_Static], jobs: Mapping[str, Job]
) -> list[Tick]:
    """forbid: a tick due now becomes a skipped row (``concurrency``) while the run of an earlier *on-time*
    tick of the job is executing (cron + ``flock -n``): the job's own runs overran.

    A run that is only queued never causes that skip: it holds nothing, and the worker that ends the run
    ahead of it claims it at once, so the tick due now queues behind it and runs milliseconds after it.
    Skipping it lost ticks whenever a backlog kept an on-time run waiting (issue 26). Nor does a backlog run
    (queued late by a catch-up pass, or by `schedctl replay`), queued or executing: no backlog tick is lost
    to forbid. Executing one at a time is the claim query's job (one running run per forbid job, the
    earliest queued first, the unique ``(job_id, exclusive)`` index behind it). A late tick (``Tick.late``)
    is never skipped.

    What bounds the queue instead is a count: a tick due now is skipped with ``queue_full`` when the job
    already has ``queue_bound(job)`` on-time runs queued (no worker took them: workers down, or too few).
    """
    forbid = {
        t.job_id
        for t, s in zip(ticks, statics, strict=True)
        if s[3] is Concurrency.FORBID and t.state is _QUEUED and not t.late
    }
    if not forbid:
        return list(ticks)
    active = on_time_runs(conn, forbid)
    out: list[Tick] = []
    for tick in ticks:
        if tick.job_id in forbid and tick.queued and not tick.late:
            runs = active.setdefault(tick.job_id, OnTime())
            bound = queue_bound(jobs[tick.job_id])
            if runs.running is not None:
                tick = _skip(
                    tick,
                    SkipReason.CONCURRENCY,
                    f'the run of {runs.running.isoformat()} was still executing (concurrency = "forbid")',
                )
            elif runs.queued >= bound:
                assert runs.oldest_queued is not None
                tick = _skip(
                    tick,
                    SkipReason.QUEUE_FULL,
                    f"{runs.queued} on-time runs of the job were queued and none had started, the oldest "
                    f'{runs.oldest_queued.isoformat()}: concurrency = "forbid" queues at most {bound}',
                )
            else:
                runs.queued += 1  # a second tick of the job in this batch counts this one
                runs.oldest_queued = runs.oldest_queued or tick.scheduled_for
        out.append(tick)
    return out


# On-time runs a forbid job with catch_up = "skip" or "latest" may have queued: two, so a tick is never
# skipped only because one run waits (a worker one poll late), while a job nobody runs queues no more.
QUEUE_BOUND = 2


def queue_bound(job: Job) -> int:
    """How many on-time runs of a forbid job may wait in the queue before a tick due now is skipped
    (``queue_full``). catch_up = "all" promises to run up to ``max_catch_up`` ticks a scheduler missed, so as
    many that no worker ran yet wait too; "skip" and "latest" drop or supersede missed ticks, so they keep
    ``QUEUE_BOUND``. A backlog is not counted: one catch-up pass queues at most ``max_catch_up`` of it."""
    if job.catch_up is CatchUp.ALL:
        return max(QUEUE_BOUND, job.max_catch_up or DEFAULT_MAX_CATCH_UP)
    return QUEUE_BOUND


def _skip(tick: Tick, reason: SkipReason, detail: str) -> Tick:
    return Tick(tick.job_id, tick.scheduled_for, RunState.SKIPPED, reason, detail)


@dataclass
class OnTime:
    """A forbid job's active on-time runs (backlog rows left out): what decides a tick due now."""

    running: datetime | None = None  # the tick of the one executing
    queued: int = 0
    oldest_queued: datetime | None = None


def on_time_runs(conn: Connection, job_ids: Iterable[str]) -> dict[str, OnTime]:
    """Job id -> its active on-time runs, for the jobs that have any. Backlog rows are told apart by their
    ``reason_detail`` (see ``LATE_DETAIL``)."""
    r = job_runs.c
    found: dict[str, OnTime] = {}
    for chunk in id_chunks(conn, list(job_ids)):
        query = select(r.job_id, r.scheduled_for, r.state).where(
            in_list(conn, r.job_id, chunk), r.state.in_(_ACTIVE), r.reason_detail.is_(None)
        )
        for job_id, at, state in conn.execute(query):
            runs = found.setdefault(job_id, OnTime())
            if state == _RUNNING:
                runs.running = at
            else:
                runs.queued += 1
                if runs.oldest_queued is None or at < runs.oldest_queued:
                    runs.oldest_queued = at
    return found


_RUNNING = RunState.RUNNING.value
# reason_detail of a run queued late by a catch-up pass: says why it ran off-schedule, and marks it as backlog
# (so does replay's own sentence), which forbid queues a tick due now behind instead of skipping the tick.
LATE_DETAIL = "queued late by a catch-up pass: no scheduler dispatched it at its time"


def _cancel_replaced(conn: Connection, decided: Sequence[Tick], statics: Sequence[_Static]) -> None:
    """replace: a tick due now asks every earlier active run of the job to stop; the worker ends it
    `cancelled`. A late tick of a catch-up pass is backlog, not a newer run due now: it cancels nothing."""
    newest: dict[str, datetime] = {}
    for tick, static in zip(decided, statics, strict=True):
        if static[3] is Concurrency.REPLACE and tick.state is _QUEUED and not tick.late:
            newest[tick.job_id] = max(tick.scheduled_for, newest.get(tick.job_id, tick.scheduled_for))
    for at, ids in _by_value(newest).items():
        for chunk in id_chunks(conn, ids):
            conn.execute(
                update(job_runs)
                .where(
                    in_list(conn, job_runs.c.job_id, chunk),
                    job_runs.c.state.in_(_ACTIVE),
                    job_runs.c.scheduled_for < at,
                    job_runs.c.cancel_requested.is_(False),
                )
                .values(cancel_requested=True)
            )


def _insert_rows(
    conn: Connection,
    decided: Sequence[Tick],
    statics: Sequence[_Static],
    term: int,
    now: datetime,
    known: Container[str],
) -> int:
    return runrows.insert_runs(
        conn,
        [t.job_id for t in decided],
        [t.scheduled_for for t in decided],
        statics,
        term=term,
        queued_at=now,
        states=[str(t.state) for t in decided],
        reasons=[None if t.reason is None else str(t.reason) for t in decided],
        details=[LATE_DETAIL if t.late and t.detail is None else t.detail for t in decided],
        not_before=[t.not_before for t in decided],
        known_versions=known,
    )


_QUEUED = RunState.QUEUED
_Static = runrows.Shared


class RowValues:
    """What every run row of a job definition shares, computed once per definition, not once per tick.

    One per scheduler: ``prepare`` at each take-over or reload, so a boundary pass only copies them.
    ``version_hold`` and ``monotonic``: see ``runrows.VERSION_HOLD`` (tests shorten the one, fake the other).
    """

    def __init__(
        self, version_hold: float = runrows.VERSION_HOLD, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        # Job id -> its row values, the definition they were computed from last (``of`` compares it by
        # identity): one tuple per job, since a leader holds a million of them.
        self._by_job: dict[str, _Static] = {}
        # Job id -> monotonic instant, from before the transaction that committed its current definition's
        # version to job_versions: its rows skip the version write for half the hold after it. Forgotten
        # then, when the definition changes and at every take-over or reload, so a version another
        # process pruned (pruning.prune) is written again before a row names it.
        self.written: dict[str, float] = {}
        # (instant, job ids) per committing batch, oldest first: what ``expire`` forgets, without a scan.
        self._batches: deque[tuple[float, list[str]]] = deque()
        self._trust = version_hold / 2
        # A version trusted this long is due a rewrite ahead of its expiry, when the leader has room
        # between fires (``to_prewrite``), so neither a boundary nor the batch after half a hold pays for it.
        self._refresh_after = version_hold / 4
        self._monotonic = monotonic
        # Job ids whose current definition's version is not in ``written`` (each id possibly more than once,
        # or stale: checked when taken), in the order they became so: what ``to_prewrite`` writes first.
        self._unwritten: deque[str] = deque()
        # Equal label keys (most jobs share a few label sets) share one string.
        self._shared: dict[str, str] = {}

    def expire(self) -> float:
        """Forget the versions written half a hold ago or more; returns the monotonic now it judged by."""
        now = self._monotonic()
        while self._batches and self._batches[0][0] <= now - self._trust:
            at, job_ids = self._batches.popleft()
            for job_id in job_ids:
                if self.written.get(job_id) == at:  # not written again since
                    del self.written[job_id]
                    self._unwritten.append(job_id)
        return now

    def committed(self, job_ids: Iterable[str], at: float, rewritten: bool = False) -> None:
        """A transaction begun at monotonic ``at`` committed the versions of ``job_ids``' rows: those not
        known before were written by it (``rewritten``: all of them were, known or not)."""
        written = self.written
        if rewritten:
            new = list(dict.fromkeys(job_ids))
        else:
            new = [
                j for j in job_ids if j not in written
            ]  # a job's repeats (a catch-up) do no harm in ``expire``
        if new:
            written.update(dict.fromkeys(new, at))
            self._batches.append((at, new))

    def to_prewrite(self, limit: int) -> list[str]:
        """Up to ``limit`` job ids whose version should be written now, ahead of the rows that will name it:
        definitions not written yet (a take-over, a reload, an edit), then those trusted for a quarter hold
        already, oldest first. Nothing to do costs O(1): a pass with nothing due stays a heap peek."""
        out: list[str] = []
        unwritten, written, by_job = self._unwritten, self.written, self._by_job
        while unwritten and len(out) < limit:
            job_id = unwritten.popleft()
            if job_id in by_job and job_id not in written:
                out.append(job_id)
        old = self._monotonic() - self._refresh_after
        batches = self._batches
        while batches and batches[0][0] <= old and len(out) < limit:
            at, job_ids = batches.popleft()
            current = [j for j in job_ids if written.get(j) == at]
            room = limit - len(out)
            out.extend(current[:room])
            if len(current) > room:
                batches.appendleft((at, current[room:]))
        return list(dict.fromkeys(out))

    def prepare(self, jobs: Iterable[Job], stop: threading.Event | None = None) -> bool:
        """``reset``, ``of`` every job, ``compact``: at a take-over or reload; a scheduler does it in chunks.

        False when ``stop`` was set before every job was done: a million definitions take ~20 s to hash.
        """
        jobs = list(jobs)
        self.reset(job.id for job in jobs)
        for i, job in enumerate(jobs):
            if stop is not None and not i % PREPARE_CHUNK and stop.is_set():
                return False
            self.of(job)
        self.compact()
        return True

    def reset(self, job_ids: Iterable[str]) -> None:
        """Trust no version written so far (a new term or a reload) and queue every job's for writing;
        forget the definitions no longer loaded."""
        self.written.clear()
        self._batches.clear()
        live = dict.fromkeys(job_ids)
        self._unwritten = deque(live)
        for job_id in [j for j in self._by_job if j not in live]:
            del self._by_job[job_id]

    def compact(self) -> None:
        """Drop the shared label keys no definition uses any more."""
        if len(self._shared) > 2 * len(self._by_job):
            self._shared.clear()
            self._shared.update((v[1], v[1]) for v in self._by_job.values())

    def of(self, job: Job) -> _Static:
        cached = self._by_job.get(job.id)
        if cached is None or cached[4] is not job:
            version, labels, concurrency_text, concurrency, _ = runrows.shared_values(job)
            labels = self._shared.setdefault(labels, labels)
            cached = (version, labels, concurrency_text, concurrency, job)
            self._by_job[job.id] = cached
            if self.written.pop(job.id, None) is not None:
                self._unwritten.append(job.id)
        return cached


def newest_ticks(ticks: Iterable[Tick]) -> dict[str, datetime]:
    """Job id -> the newest of its ``ticks``."""
    newest: dict[str, datetime] = {}
    for tick in ticks:
        seen = newest.get(tick.job_id)
        if seen is None or tick.scheduled_for > seen:
            newest[tick.job_id] = tick.scheduled_for
    return newest


def write_versions(store: Store, fence: Fence, jobs: Sequence[Job], values: RowValues) -> None:
    """Write (or refresh) the versions of ``jobs``' definitions in one fenced transaction, ahead of the
    ticks that will name them: the leader fills the gaps between fires with this (``RowValues.to_prewrite``),
    so a boundary's transactions insert run rows only."""
    statics = [values.of(job) for job in jobs]
    started = values.expire()
    with _fenced(store, fence) as tx:
        runrows.write_versions(tx.conn, [job.id for job in jobs], statics)
    values.committed((job.id for job in jobs), started, rewritten=True)


def advance(store: Store, fence: Fence, newest: Mapping[str, datetime], now: datetime) -> None:
    """The last dispatched ticks of a pass whose claims ``dispatch(advance=False)`` already committed."""
    with _fenced(store, fence) as tx:
        jobstate.advance_last_dispatched(tx.conn, newest, now)


def _refuse(conn: Connection, refusals: Mapping[str, str], now: datetime) -> None:
    for job_id, detail in refusals.items():
        conn.execute(
            update(job_state)
            .where(and_(job_state.c.job_id == job_id, job_state.c.refused_at.is_(None)))
            .values(refused_at=now, refused_detail=detail, updated_at=now)
        )
    conn.execute(
        insert(job_events),
        [{"job_id": j, "at": now, "kind": EventKind.REFUSED, "detail": d} for j, d in refusals.items()],
    )


def _by_value(mapping: Mapping[str, datetime]) -> dict[datetime, list[str]]:
    groups: dict[datetime, list[str]] = defaultdict(list)
    for key, value in mapping.items():
        groups[value].append(key)
    return groups
