"""The leader loop: keep the lease, plan, claim, and sleep until the next fire or renewal.

Cost is in proportion to what is due, not to what is loaded: jobs that share (schedule, zone, DST policy)
share one ``Schedule`` and one next-fire computation, and a heap orders those groups by next fire, so a pass
with nothing due is one heap peek.

Safety, in order of strength:
1. the primary key of ``job_runs`` makes a second claim of a tick a no-op, whoever sends it;
2. every write runs in a transaction that calls ``lease.fence`` first, so a deposed leader's write fails;
3. this loop stops dispatching before its lease could have expired by its own monotonic clock.

Keeping the lease (2 and 3, and the planning clock) is ``schedctl.leader.leadership``. "Now" for planning is the database's clock (anchored at each renewal, carried forward by this process's
monotonic clock), so a replica whose wall clock is minutes off dispatches the same ticks at the same
instants as any other.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from schedctl.errors import ConfigError, LeaseTooShort, NotLeader, StoreError
from schedctl.jobs.job import EventKind, Job, PauseSource, Tick
from schedctl.leader import planner
from schedctl.leader.leadership import Leadership
from schedctl.leader.planner import Plan, group_for
from schedctl.leader.settings import SchedulerSettings
from schedctl.observability import health, metrics
from schedctl.store import Store, dispatch
from schedctl.store.dispatch import StateChange
from schedctl.store.rows import StateRecord
from schedctl.timing.clock import Clock

log = logging.getLogger("schedctl.scheduler")

# Seconds the next fire must be away, beyond twice the last batch's time, for the leader to write job
# versions ahead of it: a batch must never delay a fire.
PREWRITE_SLACK = 0.05
# Jobs a take-over plans between two looks at the lease (``_yield_to_renewal``).
TAKE_OVER_CHUNK = 20_000


class Scheduler(Leadership):
    """The leader loop: while leading, plan and dispatch; between passes, sleep until a fire or renewal."""

    def __init__(
        self,
        store: Store,
        settings: SchedulerSettings,
        load: Callable[[], dict[str, Job]],
        clock: Clock,
        jobs: dict[str, Job] | None = None,
        db_clock: bool = True,
        after_take_over: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(store, settings, clock, db_clock)
        self._load = load
        self._jobs = jobs
        self._wake = threading.Event()
        self._reload = False
        self._stopping = threading.Event()
        self._plan: Plan | None = None  # None: rebuild from job_state before dispatching again
        self._after_take_over = after_take_over  # serve: gc.freeze() once the term's plan is built
        self._row_values = dispatch.RowValues(monotonic=clock.monotonic)
        self._prewrite_cost = 0.0  # seconds the last batch of version writes took (``_prewrite_versions``)
        # Group key -> (its next fire, each job's tick decided before it, or None: ``_decide_ahead``). Only
        # for the plan it was built from: emptied with every new plan, whose groups may hold other jobs.
        self._ahead: dict[str, tuple[datetime, list[Tick | None]]] = {}
        self._ahead_cost = 0.0
        # job id -> its counter child: labels() costs more than inc() on a big pass
        self._dispatched: dict[str, Any] = {}
        self._buffer: list[Tick] = []
        self._refusals: dict[str, str] = {}
        # Job id -> newest tick claimed by this pass's committed batches whose last_dispatched is not yet
        # written: a pass of many batches commits its claims first (see ``dispatch.dispatch``).
        self._unadvanced: dict[str, datetime] = {}
        # The committed batches of the pass in progress, not yet in the metrics (``_count_committed``).
        self._uncounted: list[tuple[dispatch.DispatchResult, dict[str, str]]] = []
        self.passes = 0
        self.on_queued: Callable[[], None] = lambda: None  # `--role all`: nudge this process's worker

    # -- public ------------------------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def request_reload(self) -> None:
        self._reload = True
        self._wake.set()

    def run(self, stopping: threading.Event) -> None:
        """Lead or stand by until ``stopping``; then finish the pass, release the lease and return."""
        self._stopping = stopping
        threading.Thread(
            target=self._watch, args=(stopping,), daemon=True, name="schedctl-scheduler-watch"
        ).start()
        if self._jobs is None:
            self._jobs = self._load()
        # Before leading, so a take-over need not hash every definition's snapshot while the lease runs.
        if not self._row_values.prepare(self._jobs.values(), stop=stopping):
            return  # stopped before leading: nothing to hand back
        health.register("scheduler", max(60.0, 4 * self.settings.lease_duration))
        try:
            while not stopping.is_set():
                self.turn()
                self._sleep()
        finally:
            self.resign()
            health.unregister("scheduler")

    def turn(self) -> None:
        """One turn: renew if due, take over if newly leading, dispatch what is due."""
        health.mark_turn("scheduler")
        if self._reload:
            self._apply_reload()
        renewed = self.clock.monotonic() >= self._next_renew and self._renew()
        if not self._safe():
            return
        try:
            if self._plan is None:
                self._take_over()
            elif renewed:
                self._refresh_held()
            # A step that lost the lease drops the plan: the rest wait for the next term.
            for step in (self._dispatch_due, self._decide_ahead, self._prewrite_versions):
                if self._plan is None:
                    break
                step()
            if self._plan is not None:
                self._writes_succeeded()
        except LeaseTooShort:
            self._next_renew = self.clock.monotonic()  # rolled back, still ours: renew, then write again
        except NotLeader as exc:
            self._lost(f"a write was fenced off: {exc}")
        except StoreError as exc:
            self._database_down(exc)
        self.passes += 1

    # -- time --------------------------------------------------------------------------------------------
    def _sleep(self) -> None:
        mono = self.clock.monotonic()
        until = self._next_renew - mono
        if self._safe() and self._plan is not None:
            nxt = self._plan.next_fire()
            if nxt is not None:
                until = min(until, (nxt - self.now()).total_seconds())
        if until > 0 and not self._stopping.is_set():
            self.clock.sleep(until, wake=self._wake)
        self._wake.clear()

    def _watch(self, stopping: threading.Event) -> None:
        stopping.wait()
        self._wake.set()

    # -- what a term plans ----------------------------------------------------------------------------------
    def _new_term(self) -> None:
        self._plan = None
        self._unadvanced.clear()  # fenced to the old term: the new plan re-decides from job_state

    def _stop_leading(self) -> None:
        self._count_committed()  # what the lost term committed did happen
        self._plan = None
        self._buffer.clear()
        self._refusals.clear()
        self._unadvanced.clear()

    # -- taking over -------------------------------------------------------------------------------------
    def _take_over(self) -> None:
        """Rebuild the plan from job_state: each job resumes from its persisted last dispatched tick."""
        jobs = self._jobs or {}
        started = self.clock.monotonic()
        now = self.now()
        states = dispatch.load_states(self.store, stop=self._stopping, between=self._yield_to_renewal)
        if states is None:
            # Stopping (resign() hands the lease on), or the term ended between two pages: the plan is
            # dropped unbuilt, and a next term reads job_state again.
            return
        plan = Plan()
        changes: list[StateChange] = []
        rejoin: list[tuple[Job, StateRecord]] = []
        values = self._row_values
        values.reset(jobs)
        for i, job in enumerate(jobs.values()):
            # A million jobs take tens of seconds here (each definition's snapshot hashed, unless run() did
            # it before leading): renew in between, as every write loop does, or the term lapses.
            if i and not i % TAKE_OVER_CHUNK and (self._stopping.is_set() or not self._yield_to_renewal()):
                return  # stopping: the plan is dropped unbuilt, and resign() hands the lease on
            values.of(job)
            if job.id not in self._dispatched:
                self._dispatched[job.id] = metrics.TICKS_DISPATCHED.labels(job.id)
            group = group_for(plan, job, now)
            group.job_ids.append(job.id)
            state = states.get(job.id)
            change = _change_for(job, state)
            if change is not None:
                changes.append(change)
            if state is not None and state.held:
                plan.db_held.add(job.id)
            if job.paused or (state is not None and state.held):
                plan.held.add(job.id)
            elif state is not None and (change is None or change.kind != EventKind.SCHEDULE_CHANGED):
                rejoin.append((job, state))
        for group in plan.groups.values():
            plan.push(group)
        self._ahead.clear()
        values.compact()
        for start in range(0, len(changes), self.settings.batch_size):
            if self._stopping.is_set() or not self._yield_to_renewal():
                return
            dispatch.record_changes(
                self.store, self._fence(), changes[start : start + self.settings.batch_size], now
            )
        self._plan = plan
        self._after_take_over()
        self._catch_up(rejoin, now)
        self._flush()
        if self._plan is not None:
            # With a million jobs this takes a minute: say when the leader is ready, and how long it took.
            log.info(
                "took over %d jobs in %.1fs",
                len(jobs),
                self.clock.monotonic() - started,
                extra={"event": "took_over", "jobs": len(jobs)},
            )

    def _catch_up(self, jobs: Iterable[tuple[Job, StateRecord]], now: datetime) -> None:
        """Decide each job's ticks from its last dispatched tick up to its group's next fire."""
        assert self._plan is not None
        windows: dict[tuple[str, datetime], planner.Window] = {}
        grace = self.settings.catch_up_grace
        for job, state in jobs:
            if self._plan is None:  # lost the lease while flushing
                return
            if self._stopping.is_set():
                # What is committed stands; the rest is decided again by the next leader from job_state, as
                # after a crash here, but without waiting out the lease.
                self._stop_leading()
                return
            group = self._plan.groups[job.schedule_key]
            after = state.last_dispatched or state.defined_at
            until = group.next_fire or now + timedelta(microseconds=1)
            key = (group.key, after)
            if key not in windows:
                windows[key] = planner.window(group.schedule, after, until, now, grace)
            result = planner.plan_catch_up(job, windows[key], now, group.schedule)
            if result.refused is not None:
                self._refusals[job.id] = result.refused
                self._plan.held.add(job.id)
                self._plan.db_held.add(job.id)
                log.warning(
                    "%s: catch-up refused: %s",
                    job.id,
                    result.refused,
                    extra={"event": "refused", "job_id": job.id},
                )
            self._add(result.ticks)

    # -- dispatching -------------------------------------------------------------------------------------
    def _dispatch_due(self) -> None:
        plan = self._plan
        assert plan is not None and self._jobs is not None
        now = self.now()
        while plan.heap and plan.heap[0][0] <= now:
            fire, key = heapq.heappop(plan.heap)
            group = plan.groups[key]
            group.next_fire = group.schedule.next_after(fire)
            # Only the newest due fire is due now; an older one the loop fell behind on (a stalled leader)
            # is backlog, queued behind any executing run rather than skipped for concurrency.
            late = group.next_fire is not None and group.next_fire <= now
            ahead = self._ahead.pop(key, None)
            if ahead is not None and ahead[0] == fire and not late:
                ticks = [
                    planner.decide(self._jobs[j], fire, now) if t is None else t
                    for j, t in zip(group.job_ids, ahead[1], strict=True)
                    if j not in plan.held
                ]
            else:
                ticks = [
                    planner.decide(self._jobs[j], fire, now, late=late)
                    for j in group.job_ids
                    if j not in plan.held
                ]
            plan.push(group)
            self._add(ticks)
            if self._plan is None:  # lost the lease while flushing
                return
        self._flush()

    def _add(self, ticks: list[Tick] | tuple[Tick, ...]) -> None:
        self._buffer.extend(ticks)
        while len(self._buffer) >= self.settings.batch_size and self._plan is not None:
            self._flush(self.settings.batch_size)

    def _flush(self, limit: int | None = None) -> None:
        """Write up to ``limit`` buffered ticks in one fenced transaction, renewing first when due.

        Without ``limit`` this is the end of a pass. A pass that fits in one batch claims and advances in
        one transaction; a bigger one defers every batch's last_dispatched write until all its claims are
        committed, so the last of 100,000 claims does not wait behind 100,000 bookkeeping updates.
        """
        final = limit is None
        if not self._buffer:
            if final:
                self._count_committed()
                self._write_unadvanced()
            return
        if not self._yield_to_renewal():
            self._count_committed()
            self._buffer.clear()
            self._refusals.clear()
            self._unadvanced.clear()
            return
        batch = self._buffer[:limit] if limit else self._buffer[:]
        del self._buffer[: len(batch)]
        refusals: dict[str, str] = {}
        if self._refusals:
            in_batch = {t.job_id for t in batch}
            refusals = {j: d for j, d in self._refusals.items() if j in in_batch}
            for job_id in refusals:
                del self._refusals[job_id]
        assert self._jobs is not None
        defer = not final or bool(self._unadvanced)
        try:
            result = dispatch.dispatch(
                self.store,
                self._fence(),
                batch,
                self._jobs,
                self.now(),
                refusals,
                advance=not defer,
                row_values=self._row_values,
            )
        except LeaseTooShort:
            # Rolled back whole, and the term is still ours: the batch goes back to the front, written again
            # once the lease is renewed. Dropped, its ticks were holes under a live term that no later pass
            # revisits, since the plan has moved past them (the 30-minute soak on an overloaded MariaDB).
            self._buffer[:0] = batch
            self._refusals.update(refusals)
            raise
        if result.queued:
            self.on_queued()
        # Counted once the pass's claims are all committed: the metrics need not delay the next batch.
        self._uncounted.append((result, refusals))
        if final:
            self._count_committed()
        if defer:
            for job_id, at in result.newest.items():
                seen = self._unadvanced.get(job_id)
                if seen is None or at > seen:
                    self._unadvanced[job_id] = at
            if final:
                self._write_unadvanced()

    def _write_unadvanced(self) -> None:
        """The deferred last_dispatched writes of a pass, in fenced batches with renewals between them."""
        pending = list(self._unadvanced.items())
        self._unadvanced.clear()
        size = self.settings.batch_size
        for start in range(0, len(pending), size):
            if not self._yield_to_renewal():
                return
            dispatch.advance(self.store, self._fence(), dict(pending[start : start + size]), self.now())

    def _decide_ahead(self) -> None:
        """Decide the next fire's ticks before it comes, when it leaves room: at the instant only the held
        check and the insert remain. Every job of a group is decided, held or not, since a job can be
        released in between; a tick that depends on the instant of dispatch (jitter, a starting deadline) is
        left for then (``planner.decided_ahead``), and so is a fire the loop is late for."""
        plan, jobs = self._plan, self._jobs or {}
        assert plan is not None
        nxt = plan.next_fire()
        if nxt is None or not self._room_for(self._ahead_cost):
            return
        started = self.clock.monotonic()
        for key in planner.keys_firing_at(plan.heap, nxt):
            if self._ahead.get(key, (None,))[0] != nxt:
                ids = plan.groups[key].job_ids
                self._ahead[key] = (nxt, [planner.decided_ahead(jobs[j], nxt) for j in ids])
        self._ahead_cost = self.clock.monotonic() - started

    def _room_for(self, cost: float) -> bool:
        """The next fire leaves room for work that last took ``cost`` seconds: twice that, plus
        ``PREWRITE_SLACK``. With no fire ahead there is all the room there is."""
        nxt = self._plan.next_fire() if self._plan is not None else None
        return nxt is None or (nxt - self.now()).total_seconds() >= 2 * cost + PREWRITE_SLACK

    def _prewrite_versions(self) -> None:
        """Write job versions between fires, before the ticks that name them, batch by batch while the next
        fire leaves room for one more (twice what the last batch took, plus ``PREWRITE_SLACK``).

        A boundary then only inserts run rows. A version not written in time (no room: a leader kept busy)
        is still written by the first batch naming it, in the same transaction: this is speed, not safety.
        """
        plan, jobs = self._plan, self._jobs or {}
        while self._plan is plan and plan is not None and not self._stopping.is_set():
            if not self._room_for(self._prewrite_cost) or not self._yield_to_renewal():
                return
            ids = [j for j in self._row_values.to_prewrite(self.settings.batch_size) if j in jobs]
            if not ids:
                return
            started = self.clock.monotonic()
            dispatch.write_versions(self.store, self._fence(), [jobs[j] for j in ids], self._row_values)
            self._prewrite_cost = self.clock.monotonic() - started

    # -- held jobs and reloads ---------------------------------------------------------------------------
    def _refresh_held(self) -> None:
        """Notice `schedctl pause/resume/replay` within a renew interval: a query of the few held rows."""
        plan, jobs = self._plan, self._jobs or {}
        assert plan is not None
        held = dispatch.load_held(self.store)
        now_held = {j for j in held if j in jobs}
        released = plan.db_held - now_held
        plan.db_held = now_held
        plan.held = now_held | {j for j, job in jobs.items() if job.paused}
        back = [j for j in released if j not in plan.held and j in jobs]
        if not back:
            return
        states = dispatch.load_states_for(self.store, back)
        self._catch_up(((jobs[j], states[j]) for j in back if j in states), self.now())

    def _apply_reload(self) -> None:
        self._reload = False
        try:
            jobs = self._load()
        except ConfigError as exc:
            first = exc.diagnostics[0] if exc.diagnostics else exc
            more = f" (and {len(exc.diagnostics) - 1} more)" if len(exc.diagnostics) > 1 else ""
            log.error(
                "job files not reloaded, keeping the old jobs: %s%s",
                first,
                more,
                extra={"event": "reload_failed"},
            )
            return
        except OSError as exc:
            log.error(
                "job files not reloaded, keeping the old jobs: %s", exc, extra={"event": "reload_failed"}
            )
            return
        self._jobs = jobs
        self._plan = None  # rebuilt from job_state, which every committed dispatch kept current
        self._buffer.clear()
        log.info("reloaded %d jobs", len(jobs), extra={"event": "reloaded"})

    def _count_committed(self) -> None:
        for result, refusals in self._uncounted:
            self._count(result, refusals)
        self._uncounted.clear()

    def _count(self, result: dispatch.DispatchResult, refusals: dict[str, str]) -> None:
        # Beyond the metrics' job limit most ids share one child ("_other"): add per child, not per tick.
        per_child: dict[int, list[Any]] = {}
        for job_id, n in Counter(t.job_id for t in result.queued).items():
            child = self._dispatched.get(job_id)
            if child is None:
                child = self._dispatched[job_id] = metrics.TICKS_DISPATCHED.labels(job_id)
            entry = per_child.get(id(child))
            if entry is None:
                per_child[id(child)] = [child, n]
            else:
                entry[1] += n
        for child, n in per_child.values():
            child.inc(n)
        for (job_id, reason), n in Counter((t.job_id, str(t.reason)) for t in result.skipped).items():
            metrics.TICKS_MISSED.labels(job_id, reason).inc(n)
        for job_id in refusals:
            metrics.TICKS_REFUSED.labels(job_id).inc()


def _change_for(job: Job, state: StateRecord | None) -> StateChange | None:
    if state is None:
        return StateChange(
            job.id, EventKind.DEFINED, job.schedule_key, paused_by_file=job.paused, detail=job.schedule_key
        )
    if state.schedule_key != job.schedule_key:
        return StateChange(
            job.id,
            EventKind.SCHEDULE_CHANGED,
            job.schedule_key,
            detail=f"{state.schedule_key} -> {job.schedule_key}",
        )
    if job.paused != state.paused_by_file:
        kind = EventKind.PAUSED if job.paused else EventKind.RESUMED
        return StateChange(job.id, kind, paused_by_file=job.paused, detail=PauseSource.JOB_FILE)
    return None
