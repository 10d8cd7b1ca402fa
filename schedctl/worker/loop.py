"""The worker loop: claim queued runs, execute them, heartbeat, record outcomes, hand back on SIGTERM.

One thread does all of it, turn by turn, and never waits on a child: every child's output and exit
descriptors, the scheduler's wake-ups and the loop's own self-pipe are registered in one selector, so a turn
sleeps until the earliest of output, an exit, a wake-up or a deadline (heartbeat, timeout, next claim). The
only other thread waits for the stop and kill requests of ``run`` and wakes the loop. Database writes are
batched per turn (one claim, one heartbeat, one transaction of outcomes), so the database is never what limits
throughput.

A database outage leaves the children running: outcomes wait in memory and are retried with backoff; when a
write finally matches no row (another worker took the run over meanwhile) the result is dropped, because
the row, not this process, says who owns a run.

The children themselves are ``worker.supervision``'s (start, follow, stop, collect); what is said once an
outcome is recorded is ``worker.runreport``'s; the scheduler's wake-ups are ``store.wake``'s.
"""

from __future__ import annotations

import logging
import os
import selectors
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from schedctl.errors import StoreConflict, StoreError, StoreUnavailable
from schedctl.jobs.job import ServeStopReason
from schedctl.observability import health, metrics
from schedctl.store import Store, claims, pruning, wake
from schedctl.timing.backoff import Backoff
from schedctl.timing.clock import Clock
from schedctl.worker.checkpoint import NO_CHECKPOINT
from schedctl.worker.groupguard import GroupGuard
from schedctl.worker.registry import Registry
from schedctl.worker.runreport import RunReporter
from schedctl.worker.settings import WorkerSettings
from schedctl.worker.supervision import Supervisor

log = logging.getLogger("schedctl.worker")

BACKOFF_MIN = 0.25
BACKOFF_MAX = 10.0
WRITE_GIVE_UP = 30.0  # after shutdown, how long to keep retrying outcome writes against a dead database
MAX_WAIT = 1.0
REJECTED_WRITE_TRIES = 3  # a write refused for its content, not the connection, is then stored without output
HOOK_SHUTDOWN_WAIT = 10.0  # seconds a stopping worker lets hooks (failure mail) finish before killing them
SYNC_LINGER = 0.01  # seconds a finished run's outcome may wait for others to share its transaction


@dataclass
class _Pending:
    outcome: claims.Outcome
    duration: float
    since: float = 0.0  # monotonic time it was collected
    snapshot: Mapping[str, Any] | None = None  # for the on_failure / on_success hook once it is recorded


class Worker:
    def __init__(self, store: Store, settings: WorkerSettings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.label_keys = claims.label_keys(settings.labels)
        self._pending: list[_Pending] = []
        self._touched: set[str] = set()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._listener = wake.Listener()  # the scheduler's wake-ups, opened in run() (see store/wake.py)
        self._guard: GroupGuard | None = None  # kills our jobs if we die without stopping them
        self._claim_now = True
        self._nudged = threading.Event()  # set from the scheduler thread of a `--role all` process
        self._more_waiting = False
        self._next_claim = 0.0
        self._next_stale_check = 0.0
        self._next_beat = 0.0
        self._next_output = clock.monotonic() + settings.output_interval
        self._next_write = 0.0
        self._next_prune = clock.monotonic() + settings.prune_interval
        self._backoff = {
            what: Backoff(BACKOFF_MIN, BACKOFF_MAX) for what in ("claim", "beat", "write", "output")
        }
        self._db_down = False
        self._draining = False
        self._drained_at: float | None = None
        self._killed = False
        self._rejected_writes = 0
        self._report = RunReporter(settings)
        self._registry = Registry(
            store,
            identity=settings.identity,
            role=settings.role,
            interval=settings.heartbeat_interval,
            stale_after=settings.stale_after,
            monotonic=clock.monotonic,
            labels=settings.labels,
            slots=settings.slots,
            poll_interval=settings.poll_interval,
        )
        self._stop_reason: str = ServeStopReason.SHUTDOWN
        # 0700 (mkdtemp's mode), and it stays closed to job users: their checkpoints are unnamed files made
        # here and handed over as descriptors (schedctl/worker/checkpoint.py), so no job ever needs a path in it.
        self._root = Path(tempfile.mkdtemp(prefix="schedctl-worker-"))
        self._runs = Supervisor(settings, clock.monotonic, self._root, self._register, self._forget_fd)

    # -- public --------------------------------------------------------------------------------------------
    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def nudge(self) -> None:
        """Claim on the next turn, not at the next poll: this process's scheduler just queued runs.

        Without it a `--role all` process on SQLite/MySQL (no NOTIFY) starts each run up to a poll
        interval late.
        """
        self._nudged.set()
        self.wake()

    def run(self, stopping: threading.Event, killing: threading.Event) -> None:
        """Work until ``stopping``; then hand back what still runs and return. ``killing`` stops children now."""
        health.register("worker", max(60.0, 4 * self.settings.heartbeat_interval))
        threading.Thread(target=self._watch, args=(stopping, killing), daemon=True).start()
        log.info(
            "worker %s started: %d slots, labels %s",
            self.settings.identity,
            self.settings.slots,
            self.settings.labels or "none",
            extra={"event": "worker_started"},
        )
        if self.settings.stale_after < 2 * self.settings.heartbeat_interval:
            log.warning(
                "--stale-after %gs is less than two heartbeat intervals (%gs): one slow heartbeat and another "
                "worker takes a healthy run over",
                self.settings.stale_after,
                self.settings.heartbeat_interval,
                extra={"event": "stale_window_short"},
            )
        self._guard = GroupGuard.start()
        self._runs.guard = self._guard
        if self._guard is not None:
            self._guard.remove_on_exit(self._root)  # not left behind by a SIGKILL
        self._listener = wake.listener_for(self.store, self._register, self._forget_fd, self.clock.monotonic)
        if self._guard is not None and self._listener.path is not None:
            self._guard.remove_on_exit(self._listener.path)
        self._registry.refresh()
        try:
            while self._turn(stopping, killing):
                pass
        except BaseException as exc:
            self._stop_reason = ServeStopReason.CRASHED.text(error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._close()
            if killing.is_set():
                self._stop_reason = ServeStopReason.STOPPED_AT_ONCE
            self._registry.stop(self._stop_reason)
        log.info("worker %s stopped", self.settings.identity, extra={"event": "worker_stopped"})

    # -- one turn ------------------------------------------------------------------------------------------
    def _turn(self, stopping: threading.Event, killing: threading.Event) -> bool:
        health.mark_turn("worker")
        now = self.clock.monotonic()
        if self._registry.due():
            self._registry.refresh()  # every heartbeat interval, idle or busy: `schedctl workers` sees us
        if stopping.is_set() and not self._draining:
            self._drain()
        if killing.is_set() and not self._killed:
            self._kill_all()
        self._runs.enforce()
        self._collect()
        self._report.reap()
        ready = self._batch_ready(now)
        write = ready and bool(self._pending) and now >= self._next_write
        # Outcomes to record mean runs ended: their slots are free, and one may be what held the next run of
        # its `forbid` job back. So claim in the transaction that records them, now, not at the next poll:
        # a backlog then runs back to back, not one run per poll interval (issue 26). Riding on the write,
        # the claim shares its backoff while the database is down.
        freed = write and len(self._runs) < self.settings.slots
        claim = ready and not self._draining and (self._should_claim(now) or freed)
        if write or claim:
            self._sync(write, claim)
        if self._runs and now >= self._next_beat:
            self._beat()
        if self._runs and self.settings.output_interval > 0 and now >= self._next_output:
            self._save_output()
        if self._touched and (now >= self._next_prune or self._draining):
            self._prune()
        if self._draining and not self._runs:
            if not self._pending or killing.is_set():
                return False
            self._drained_at = self._drained_at or now
            if now - self._drained_at > WRITE_GIVE_UP:
                log.error(
                    "database still unreachable: %d outcomes not recorded; those runs will be taken over",
                    len(self._pending),
                    extra={"event": "outcomes_abandoned"},
                )
                self._stop_reason = ServeStopReason.OUTCOMES_ABANDONED.text(count=len(self._pending))
                return False
        self._wait(self._timeout(now))
        return True

    def _batch_ready(self, now: float) -> bool:
        """Whether to write outcomes (and claim) now, or linger a few ms so more finished runs share the commit.

        Short runs finish in a trickle; a transaction per finish costs more than the runs themselves.
        """
        if not self._pending or self._draining or not self._runs:
            return True
        if self.settings.slots - len(self._runs) >= max(1, self.settings.slots // 2):
            return True
        return now - self._pending[0].since >= SYNC_LINGER

    def _watch(self, stopping: threading.Event, killing: threading.Event) -> None:
        stopping.wait()
        self.wake()
        killing.wait()
        self.wake()

    def _timeout(self, now: float) -> float:
        times = [now + MAX_WAIT]
        if self._runs:
            times.append(self._next_beat)
            if self.settings.output_interval > 0:
                times.append(self._next_output)
            times.extend(self._runs.deadlines())
        if self._pending:
            times.append(max(self._next_write, self._pending[0].since + SYNC_LINGER))
        if not self._draining and len(self._runs) < self.settings.slots:
            times.append(self._next_claim if not self._claim_now else now)
        return max(0.0, min(times) - now)

    def _wait(self, timeout: float) -> None:
        if timeout <= 0:
            return
        for key, _ in self._selector.select(timeout):
            if key.data == "wake":
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
            elif key.data is self._listener:
                self._listener.drain()
                self._claim_now = True
            else:
                self._runs.child_event(key.fd, key.data)

    def _register(self, fd: int, data: Any) -> None:
        """Watch ``fd``. Its number may still be mapped to a descriptor closed behind our back (libpq drops
        a dead server's socket itself): that stale entry is removed first."""
        try:
            self._selector.register(fd, selectors.EVENT_READ, data)
            return
        except KeyError:
            stale = self._selector.get_key(fd).data
        self._forget_fd(fd)
        if stale is self._listener:
            self._listener.forgotten()
        self._selector.register(fd, selectors.EVENT_READ, data)

    def _forget_fd(self, fd: int) -> None:
        try:
            self._selector.unregister(fd)
        except (KeyError, ValueError):
            pass

    # -- claims --------------------------------------------------------------------------------------------
    def _should_claim(self, now: float) -> bool:
        if len(self._runs) >= self.settings.slots:
            return False
        self._listener.refresh(now)
        if self._nudged.is_set():
            self._nudged.clear()  # before the claim: a nudge arriving during it triggers another
            return True
        return self._claim_now or now >= self._next_claim

    def _sync(self, write: bool, claim: bool) -> None:
        """Record outcomes and claim new runs in ONE transaction: a busy worker commits once per turn."""
        batch = list(self._pending) if write else []
        free = self.settings.slots - len(self._runs) if claim else 0
        # Stale runs are looked for once a poll interval, not on every NOTIFY-driven claim: a takeover is as
        # prompt as before, and the hot path saves a query.
        began = self.clock.monotonic()
        take_stale = free > 0 and began >= self._next_stale_check
        try:
            with self.store.begin() as conn:
                written = claims.record_many(conn, [p.outcome for p in batch])
                claimed = (
                    claims.claim(
                        conn,
                        self.settings.identity,
                        free,
                        self.label_keys,
                        self.settings.stale_after,
                        take_stale=take_stale,
                    )
                    if free > 0
                    else []
                )
        except StoreError as exc:
            now = self.clock.monotonic()
            if batch:
                if not isinstance(exc, StoreUnavailable | StoreConflict):
                    self._rejected(batch, exc)
                self._store_failed("write", exc)
                self._next_write = now + self._backoff["write"].delay
            if free > 0:
                self._store_failed("claim", exc)
                self._claim_now = False
                self._next_claim = now + self._backoff["claim"].delay
            return
        now = self.clock.monotonic()
        if batch:
            self._rejected_writes = 0
            self._store_ok("write")
            del self._pending[: len(batch)]
            for pending, ok in zip(batch, written, strict=True):
                if ok:
                    self._touched.add(pending.outcome.job_id)
                self._report.recorded(pending.outcome, pending.duration, pending.snapshot, ok)
        if free > 0:
            self._store_ok("claim")
            self._more_waiting = len(claimed) == free
            self._claim_now = False
            # From the claim's start, not its end: polls keep their cadence, so a run waits at most one
            # poll interval (plus the claim itself) however long claims take.
            self._next_claim = began + self.settings.poll_interval
            if take_stale:
                self._next_stale_check = began + self.settings.poll_interval
        if claimed and not self._runs:
            self._next_beat = now + self.settings.heartbeat_interval  # the claim itself was a heartbeat
        for run in claimed:
            self._start(run)
        self._runs.flush_guard()
        metrics.WORKER_ACTIVE_RUNS.set(len(self._runs))

    def _rejected(self, batch: list[_Pending], exc: StoreError) -> None:
        """The database is up but refuses what we write (bytes a column cannot hold, say). Retrying the same
        rows would fail forever and block every claim sharing the transaction, and the runs would be taken
        over and re-run. After a few tries, keep the outcomes but drop the job output that may be at fault."""
        self._rejected_writes += 1
        if self._rejected_writes < REJECTED_WRITE_TRIES:
            return
        note = f"outcome stored without its output: the database refused it ({str(exc)[:300]})"
        for pending in batch:
            pending.outcome = replace(pending.outcome, output_tail=None, error=note)
        log.error(
            "the database refused %d outcomes; storing them without their output: %s",
            len(batch),
            exc,
            extra={"event": "outcome_rejected"},
        )

    def _start(self, run: claims.ClaimedRun) -> None:
        failed = self._runs.start(run)
        if failed is not None:
            self._pending.append(_Pending(failed, 0.0, self.clock.monotonic()))

    # -- heartbeats ----------------------------------------------------------------------------------------
    def _beat(self) -> None:
        held = self._runs.held()
        saves = []
        for active in held:
            value = active.execution.read_checkpoint()
            if value is not NO_CHECKPOINT:
                saves.append((active, value))
        try:
            with self.store.begin() as conn:
                result = claims.heartbeat(conn, self.settings.identity, [a.beat_key for a in held])
                lost = set(result.lost)
                for active, value in saves:
                    if active.claim.key not in lost:
                        claims.save_checkpoint(conn, *active.beat_key, value)
        except StoreError as exc:
            for active, _ in saves:
                active.execution.reread_checkpoint()
            self._store_failed("beat", exc)
            self._next_beat = self.clock.monotonic() + min(
                self._backoff["beat"].delay, self.settings.heartbeat_interval
            )
            return
        self._store_ok("beat")
        self._next_beat = self.clock.monotonic() + self.settings.heartbeat_interval
        for key in result.lost:
            self._runs.lose(key)
        for key in result.cancel:
            self._runs.cancel(key)

    def _save_output(self) -> None:
        """Store the tails of running runs that printed since the last save, for `logs -f`: one transaction
        an interval, a row per run with new output, each at most ``output_tail_bytes``: bounded however much
        or often jobs print. A failure only delays it: the outcome stores the output anyway."""
        changed = []
        for active in self._runs.held():
            tail, size = active.execution.tail.snapshot()
            if size != active.output_saved:
                changed.append((active, tail, size))
        if changed:
            try:
                with self.store.begin() as conn:
                    claims.save_output(conn, [(*a.beat_key, tail, size) for a, tail, size in changed])
            except StoreError as exc:
                self._store_failed("output", exc)
                self._next_output = self.clock.monotonic() + max(
                    self._backoff["output"].delay, self.settings.output_interval
                )
                return
            self._store_ok("output")
            for active, _, size in changed:
                active.output_saved = size
        self._next_output = self.clock.monotonic() + self.settings.output_interval

    # -- outcomes ------------------------------------------------------------------------------------------
    def _collect(self) -> None:
        finished = self._runs.collect()
        now = self.clock.monotonic()  # collected at: the start of its linger (SYNC_LINGER)
        for done in finished:
            self._pending.append(_Pending(done.outcome, done.duration, now, done.snapshot))
        metrics.WORKER_ACTIVE_RUNS.set(len(self._runs))
        if self._more_waiting and len(self._runs) < self.settings.slots:
            self._claim_now = True

    # -- shutdown ------------------------------------------------------------------------------------------
    def _drain(self) -> None:
        """Claim nothing more; SIGTERM every child; each gets its own grace period before SIGKILL."""
        self._draining = True
        self._runs.stop_all()

    def _kill_all(self) -> None:
        self._killed = True
        self._runs.kill_all()

    # -- history -------------------------------------------------------------------------------------------
    def _prune(self) -> None:
        jobs = sorted(self._touched)
        try:
            with self.store.begin() as conn:
                pruned = pruning.prune(
                    conn,
                    jobs,
                    self.settings.successful_history,
                    self.settings.failed_history,
                    self.settings.keep_missed,
                )
        except StoreError as exc:
            log.warning("history pruning failed: %s", exc, extra={"event": "prune_failed"})
            self._next_prune = self.clock.monotonic() + self.settings.prune_interval
            if self._draining:
                self._touched.clear()
            return
        self._touched.difference_update(jobs)
        self._next_prune = self.clock.monotonic() + self.settings.prune_interval
        for job_id, count in pruned.items():
            log.info("pruned %d old runs", count, extra={"event": "history_pruned", "job_id": job_id})

    # -- database health -----------------------------------------------------------------------------------
    def _store_failed(self, what: str, exc: StoreError) -> None:
        health.store_failing("worker", f"{what}: {exc}")
        if not self._db_down:
            log.warning(
                "database write failed (%s); children keep running, retrying with backoff: %s",
                what,
                exc,
                extra={"event": "store_unavailable"},
            )
        self._db_down = True
        self._backoff[what].grow()
        if what == "beat" or what == "write":
            self._listener.suspect()

    def _store_ok(self, what: str) -> None:
        self._backoff[what].reset()
        if self._db_down:
            self._db_down = False
            health.store_working("worker")
            log.info("database reachable again", extra={"event": "store_available"})

    def _close(self) -> None:
        self._report.close(wait=0.0 if self._killed else HOOK_SHUTDOWN_WAIT)
        self._listener.close()
        if self._guard is not None:
            self._guard.close()
        self._selector.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._root, ignore_errors=True)
        metrics.WORKER_ACTIVE_RUNS.set(0)
        health.unregister("worker")
