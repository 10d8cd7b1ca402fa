"""What a worker says once a run's outcome is recorded: the log line, the metrics, the hooks and the mail.

Only after the write: a result that matched no row (another worker took the run over) notifies nobody from
here, since its new holder records and reports the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from schedctl.jobs.job import RunState
from schedctl.observability import metrics
from schedctl.store import claims
from schedctl.worker.executor import RunIdentity
from schedctl.worker.hooks import Hooks
from schedctl.worker.mail import Mailer
from schedctl.worker.settings import WorkerSettings

log = logging.getLogger("schedctl.worker")

SERIES_FOR = 60.0  # seconds a job's metric series are reused before being looked up again


class RunReporter:
    """Owns the worker's hook runner and mailer, which outlive the runs they report on."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self._hooks = Hooks(settings.run_as_job_user)
        self._mail = Mailer(settings.smtp, settings.output_tail_bytes, settings.mail_hostname)
        self._series_cache: dict[tuple[str, str], tuple[Any, Any, Any | None]] = {}
        self._series_until = 0.0

    def _series(self, job_id: str, state: str) -> tuple[Any, Any, Any | None]:
        """The run metrics' children for a job and state: ``labels()`` takes a lock and maps the job id
        (metrics.JOB_SERIES) on every call, three calls a run. Looked up again every ``SERIES_FOR``
        seconds, so a job counted under the cap's overflow series is not stuck there."""
        now = time.monotonic()
        if now >= self._series_until:
            self._series_cache.clear()
            self._series_until = now + SERIES_FOR
        key = (job_id, state)
        series = self._series_cache.get(key)
        if series is None:
            series = (
                metrics.RUNS_FINISHED.labels(job_id=job_id, state=state),
                metrics.RUN_DURATION.labels(job_id=job_id),
                # Only a success creates the job's last-success series: a never-succeeded job has none.
                metrics.LAST_SUCCESS.labels(job_id=job_id) if state == RunState.SUCCEEDED else None,
            )
            self._series_cache[key] = series
        return series

    def reap(self) -> None:
        """Collect finished hook processes."""
        self._hooks.reap()

    def close(self, wait: float) -> None:
        """Let hooks and mail finish for up to ``wait`` seconds each, then stop them."""
        self._hooks.close(wait=wait)
        self._mail.close(wait=wait)

    def recorded(
        self, o: claims.Outcome, duration: float, snapshot: Mapping[str, Any] | None, ok: bool
    ) -> None:
        """``o`` was written (``ok``), or matched no row because another worker took the run over."""
        identity = RunIdentity(o.job_id, o.scheduled_for, o.attempt)
        level = logging.INFO if o.state == RunState.SUCCEEDED else logging.WARNING
        # The fields cost more than a short run's bookkeeping: built only when the least severe line this
        # outcome can log would be logged (a lost run warns; a hand back and --log-output speak at INFO).
        if not ok:
            least = logging.WARNING
        elif self.settings.log_output or o.state == RunState.QUEUED:
            least = logging.INFO
        else:
            least = level
        extra = {**identity.log_extra, "exit_status": o.exit_status} if log.isEnabledFor(least) else {}
        if not ok:
            log.warning(
                "run was taken over by another worker: its result here is discarded",
                extra={"event": "run_lost", **extra},
            )
            return
        if self.settings.log_output and not (o.state == RunState.QUEUED and o.retry_after is None):
            _log_output(o, extra)
        if o.state == RunState.QUEUED and o.retry_after is not None:
            log.warning(
                "run failed (%s); retry in %.3gs",
                o.error,
                o.retry_after,
                extra={"event": "run_retry_scheduled", "state": RunState.QUEUED, **extra},
            )
            return
        if o.state == RunState.QUEUED:
            log.info(
                "run handed back for another worker to resume", extra={"event": "run_handed_back", **extra}
            )
            return
        log.log(
            level,
            "run %s in %.3fs",
            o.state,
            duration,
            extra={
                "event": "run_finished",
                "state": o.state,
                "duration_seconds": duration,
                # Why, on the same line: a run that could not start (the worker's ulimit) has no output to read.
                **({"error": o.error} if o.error and extra else {}),
                **extra,
            },
        )
        finished, durations, last_success = self._series(o.job_id, o.state)
        finished.inc()
        durations.observe(duration)
        if last_success is not None:
            last_success.set(time.time())
        if snapshot is not None:
            # Only after the outcome is recorded: a run taken over by another worker notifies nobody from here.
            self._hooks.fire(snapshot, identity, o.state, o.exit_status, o.output_tail)
            self._mail.after_run(snapshot, identity, o.state, o.exit_status, o.output_tail)


def _log_output(o: claims.Outcome, extra: dict[str, Any]) -> None:
    """``serve --log-output``: the run's stored output tail in the log, where a one-machine user looks."""
    tail = (o.output_tail or "").rstrip("\n")
    log.info(
        "run output (%s):%s",
        f"the last {len(tail.encode())} bytes" if tail else "none",
        ("\n" + tail) if tail else "",
        extra={"event": "run_output", "output_tail": o.output_tail or "", **extra},
    )
