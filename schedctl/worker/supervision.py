"""The runs one worker executes: start each claimed run's child, follow its output and exit, stop it, collect it.

A child is stopped for four reasons, each a ``StopReason``: its job's timeout (``enforce``), a cancel request or
a takeover seen at a heartbeat (``cancel``, ``lose``), and the worker's own shutdown (``stop_all``: SIGTERM,
then the hand-back). Nothing here writes to the database: the worker loop batches what ``collect`` returns.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedctl.jobs.job import RunState, StopReason
from schedctl.store import claims
from schedctl.worker.checkpoint import NO_CHECKPOINT
from schedctl.worker.executor import Execution, RunIdentity
from schedctl.worker.groupguard import GroupGuard
from schedctl.worker.outcome import RunResult, outcome_for
from schedctl.worker.settings import WorkerSettings

log = logging.getLogger("schedctl.worker")

SWEEP_INTERVAL = 0.25  # seconds between checks of every child, events or not

RunKey = tuple[Any, Any]


@dataclass
class Active:
    claim: claims.ClaimedRun
    execution: Execution
    lost: bool = False
    output_saved: int = 0  # characters of its output stored for followers (`logs -f`) so far

    @property
    def beat_key(self) -> tuple[Any, Any, int]:
        return (self.claim.job_id, self.claim.scheduled_for, self.claim.attempt)


@dataclass(frozen=True)
class Finished:
    """A run whose child is done, with what to record for it."""

    outcome: claims.Outcome
    duration: float
    snapshot: Mapping[str, Any] | None


class Supervisor:
    """The worker's executing runs, keyed by ``(job_id, scheduled_for)``.

    ``watch(fd, key)`` and ``unwatch(fd)`` put a child's descriptors in the worker's selector and take them
    out; ``root`` (the worker's own folder) holds the runs' unnamed checkpoint files. ``guard`` (set once started) kills the children's process
    groups if the worker dies without stopping them.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        monotonic: Callable[[], float],
        root: Path,
        watch: Callable[[int, Any], None],
        unwatch: Callable[[int], None],
    ) -> None:
        self.settings = settings
        self.monotonic = monotonic
        self.root = root
        self._watch = watch
        self._unwatch = unwatch
        self.active: dict[RunKey, Active] = {}
        self.guard: GroupGuard | None = None
        self._check: set[RunKey] = set()  # runs whose child may have exited since the last turn
        self.next_sweep = 0.0
        self._user_noted: set[str] = set()

    def __len__(self) -> int:
        return len(self.active)

    def start(self, run: claims.ClaimedRun) -> claims.Outcome | None:
        """Start ``run``'s child; an outcome instead when the run cannot start at all (no snapshot)."""
        ident = RunIdentity(run.job_id, run.scheduled_for, run.attempt)
        if run.took_over_from is not None:
            log.warning(
                "took over a run whose worker %s stopped heartbeating",
                run.took_over_from,
                extra={"event": "run_taken_over", "previous_worker": run.took_over_from, **ident.log_extra},
            )
        if not run.snapshot:
            return claims.Outcome(
                run.job_id,
                run.scheduled_for,
                run.attempt,
                RunState.FAILED,
                error="the run carries no job snapshot",
            )
        self._note_user(run)
        execution = Execution(
            ident,
            run.snapshot,
            run.checkpoint,
            self.root,
            tail_bytes=self.settings.output_tail_bytes,
            run_as_job_user=self.settings.run_as_job_user,
            monotonic=self.monotonic,
            before_close=self._unwatch,
        )
        self.active[run.key] = Active(run, execution)
        if self.guard is not None and execution.pid is not None:
            self.guard.watch(execution.pid)  # its process group: the pid, as it leads the group
        for fd in (execution.output_fd, execution.exit_fd):
            if fd is not None:
                self._watch(fd, run.key)
        if execution.exit_fd is None:
            self._check.add(run.key)  # it could not start, or there is no pidfd: look at it next turn
        if log.isEnabledFor(logging.INFO):  # its fields cost more than a short run's bookkeeping
            log.info(
                "run started (pid %s)",
                execution.pid,
                extra={"event": "run_started", "pid": execution.pid, **ident.log_extra},
            )
        return None

    def _note_user(self, run: claims.ClaimedRun) -> None:
        """Say once per job that its ``user`` is informational here (the scheduler says so at start too)."""
        user = (run.snapshot or {}).get("user")
        if not user or run.job_id in self._user_noted:
            return
        self._user_noted.add(run.job_id)
        if self.settings.run_as_job_user and os.geteuid() == 0:
            return
        why = (
            "--run-as-job-user is not given"
            if not self.settings.run_as_job_user
            else "the worker is not root"
        )
        log.info(
            "job names user %s but %s: it runs as this worker's user",
            user,
            why,
            extra={"event": "job_user_ignored", "job_id": run.job_id},
        )

    def child_event(self, fd: int, run_key: Any) -> None:
        """``fd`` of the run ``run_key`` is readable: its exit, or output to pump."""
        active = self.active.get(run_key)
        if active is None:
            self._unwatch(fd)
        elif fd == active.execution.exit_fd:
            active.execution.close_exit_fd()
            self._check.add(run_key)
        elif not active.execution.pump():
            self._check.add(run_key)

    def enforce(self) -> None:
        """Each run's timeout and grace period: SIGTERM, then SIGKILL."""
        for active in self.active.values():
            active.execution.enforce()

    def deadlines(self) -> list[float]:
        """Monotonic instants by which the worker must look again: timeouts, kills, the next sweep."""
        times = [t for a in self.active.values() if (t := a.execution.next_deadline()) is not None]
        times.append(self.next_sweep)
        return times

    def held(self) -> list[Active]:
        """The runs this worker still holds (not taken over): the ones a heartbeat is for."""
        return [a for a in self.active.values() if not a.lost]

    def collect(self) -> list[Finished]:
        """Take in the runs whose child exited. Only those with an exit or EOF event are checked, plus a sweep
        of all of them every SWEEP_INTERVAL (no pidfd, a child that closed its output and lingers)."""
        now = self.monotonic()
        if now >= self.next_sweep:
            keys = list(self.active)
            self.next_sweep = now + SWEEP_INTERVAL
        else:
            keys = [key for key in self._check if key in self.active]
        self._check.clear()
        finished: list[Finished] = []
        for key in keys:
            active = self.active[key]
            if not active.execution.done():
                continue
            del self.active[key]
            execution = active.execution
            if self.guard is not None and execution.pid is not None:
                self.guard.forget(execution.pid)
            outcome = self._outcome(active)
            if outcome is not None:
                finished.append(Finished(outcome, execution.duration(), execution.snapshot))
            execution.cleanup()
        self.flush_guard()
        return finished

    def flush_guard(self) -> None:
        """Tell the watchdog of the groups started and reaped since the last call (``GroupGuard.flush``)."""
        if self.guard is not None:
            self.guard.flush()

    def _outcome(self, active: Active) -> claims.Outcome | None:
        if active.lost:
            return None  # its new holder records the result; no need to read this copy's checkpoint or output
        execution = active.execution
        checkpoint = execution.final_checkpoint()
        tail, size = execution.tail.snapshot()
        result = RunResult(
            snapshot=execution.snapshot,
            stop_reason=execution.stop_reason,
            returncode=execution.returncode,
            start_error=execution.start_error,
            output_tail=tail,
            output_size=size,
            checkpoint=None if checkpoint is NO_CHECKPOINT else checkpoint,
            checkpoint_written=checkpoint is not NO_CHECKPOINT,
            checkpoint_problem=execution.checkpoint_problem,
            lost=active.lost,
        )
        return outcome_for(active.claim, result)

    def cancel(self, key: RunKey) -> None:
        """A cancel request seen at a heartbeat: stop the run; its outcome says cancelled."""
        active = self.active[key]
        if active.execution.stop_reason is None:
            log.info(
                "cancel requested: stopping the run",
                extra={"event": "run_cancel", **active.execution.run.log_extra},
            )
        active.execution.stop(StopReason.CANCELLED)

    def lose(self, key: RunKey) -> None:
        """Another worker took the run over: stop this copy, and record nothing for it."""
        active = self.active[key]
        if active.lost:
            return
        active.lost = True
        log.warning(
            "run was taken over by another worker: stopping this copy and recording nothing",
            extra={"event": "run_lost", **active.execution.run.log_extra},
        )
        active.execution.stop(StopReason.LOST)

    def stop_all(self) -> None:
        """The worker is stopping: SIGTERM every child; each gets its own grace period before SIGKILL."""
        if self.active:
            log.info(
                "stopping: forwarding SIGTERM to %d runs, then handing them back",
                len(self.active),
                extra={"event": "worker_draining"},
            )
        for active in self.active.values():
            if not active.lost:
                active.execution.stop(StopReason.SHUTDOWN)

    def kill_all(self) -> None:
        for active in self.active.values():
            active.execution.kill()
