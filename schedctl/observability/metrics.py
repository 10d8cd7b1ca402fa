"""Every metric schedctl exports, defined once, on one registry.

The scheduler and the worker update these objects directly; ``http.py`` serves ``REGISTRY``. A dedicated
registry (not prometheus_client's global one) keeps tests and embedding applications from seeing each
other's metrics, and makes the exported set exactly what is listed here plus the process/platform collectors.

Labels are bounded: ``state`` (RunState values), ``reason`` (SkipReason values) and ``job_id``, which is capped:
the first ``SCHEDCTL_METRICS_MAX_JOBS`` (default 1000) job ids this process sees get their own series, later
ones share ``job_id="_other"``. Without the cap, 100,000 jobs make a 170 MB scrape that takes the GIL for
over a minute. Never label by scheduled_for, worker or attempt: those grow without bound.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

log = logging.getLogger("schedctl.observability.metrics")

# The `_created` series double every counter's lines and nobody alerts on them.
disable_created_metrics()  # type: ignore[no-untyped-call]

OTHER_JOB = "_other"
DEFAULT_MAX_JOB_SERIES = 1000


def _max_job_series() -> int:
    try:
        return max(0, int(os.environ.get("SCHEDCTL_METRICS_MAX_JOBS", DEFAULT_MAX_JOB_SERIES)))
    except ValueError:
        return DEFAULT_MAX_JOB_SERIES


class JobSeries:
    """Which job ids get their own series: the first ``limit`` seen (0 = no limit); the rest are ``_other``.

    Shared by every per-job metric, so a job either has all its series or none.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._known: set[str] = set()
        self._lock = threading.Lock()
        self._warned = False

    def label(self, job_id: str) -> str:
        if job_id in self._known:
            return job_id
        with self._lock:
            if job_id in self._known or self.limit == 0 or len(self._known) < self.limit:
                self._known.add(job_id)
                return job_id
            warn, self._warned = not self._warned, True
        if warn:
            log.warning(
                "more than %d jobs: metrics of the others are summed under job_id=%r (SCHEDCTL_METRICS_MAX_JOBS)",
                self.limit,
                OTHER_JOB,
                extra={"event": "metrics_jobs_capped"},
            )
        return OTHER_JOB


JOB_SERIES = JobSeries(_max_job_series())


class _JobLabelled:
    """``.labels(job_id, ...)`` through ``JOB_SERIES``, positional or keyword."""

    _labelnames: tuple[str, ...]

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Any:
        if "job_id" in labelkwargs:
            labelkwargs["job_id"] = JOB_SERIES.label(str(labelkwargs["job_id"]))
        elif labelvalues and self._labelnames[:1] == ("job_id",):
            labelvalues = (JOB_SERIES.label(str(labelvalues[0])), *labelvalues[1:])
        return super().labels(*labelvalues, **labelkwargs)  # type: ignore[misc]


class JobCounter(_JobLabelled, Counter):
    pass


class JobGauge(_JobLabelled, Gauge):
    pass


class JobHistogram(_JobLabelled, Histogram):
    pass


REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

# -- lease (scheduler) -------------------------------------------------------------------------------------
LEADER = Gauge(
    "schedctl_leader", "1 while this process holds the scheduler lease, else 0.", registry=REGISTRY
)
LEASE_TERM = Gauge(
    "schedctl_lease_term",
    "Term (fencing token) of the lease this process last held; 0 before it first led.",
    registry=REGISTRY,
)
LEASE_RENEWALS = Counter(
    "schedctl_lease_renewals_total",
    "Successful acquisitions or renewals of the scheduler lease by this process.",
    registry=REGISTRY,
)
LEASE_RENEWAL_FAILURES = Counter(
    "schedctl_lease_renewal_failures_total",
    "Attempts to acquire or renew the lease that failed (database error, or held by another process).",
    registry=REGISTRY,
)

# -- ticks (scheduler) -------------------------------------------------------------------------------------
TICKS_DISPATCHED = JobCounter(
    "schedctl_ticks_dispatched_total",
    "Ticks this process inserted as queued run rows.",
    ["job_id"],
    registry=REGISTRY,
)
TICKS_MISSED = JobCounter(
    "schedctl_ticks_missed_total",
    "Ticks written as skipped, by reason (catch_up_skip, catch_up_latest, starting_deadline, concurrency, ...).",
    ["job_id", "reason"],
    registry=REGISTRY,
)
TICKS_REFUSED = JobCounter(
    "schedctl_ticks_refused_total",
    "Times a job's catch-up was refused (more missed ticks than max_catch_up); it waits for `schedctl replay`.",
    ["job_id"],
    registry=REGISTRY,
)

# -- runs (worker) -----------------------------------------------------------------------------------------
RUNS_FINISHED = JobCounter(
    "schedctl_runs_finished_total",
    "Runs this process finished, by final state (succeeded, failed, timed_out, cancelled).",
    ["job_id", "state"],
    registry=REGISTRY,
)
# Cron jobs range from a second to hours: buckets from 0.1 s to 6 h.
RUN_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, float("inf"))
RUN_DURATION = JobHistogram(
    "schedctl_run_duration_seconds",
    "Wall time of finished runs, from process start to exit.",
    ["job_id"],
    buckets=RUN_DURATION_BUCKETS,
    registry=REGISTRY,
)
WORKER_ACTIVE_RUNS = Gauge(
    "schedctl_worker_active_runs", "Runs this worker process is executing now.", registry=REGISTRY
)
LAST_SUCCESS = JobGauge(
    "schedctl_last_success_timestamp_seconds",
    "Unix time at which the job's last successful run finished (alert on time() - this: a silently stopped job).",
    ["job_id"],
    registry=REGISTRY,
)

# -- mail (worker; schedctl.worker.mail) --------------------------------------------------------------------------
MAILS_SENT = Counter(
    "schedctl_mails_sent_total", "Run-output mails the SMTP server accepted.", registry=REGISTRY
)
MAIL_FAILURES = Counter(
    "schedctl_mail_failures_total",
    "Run-output mails not sent: the SMTP server refused or could not be reached, or the queue was full.",
    registry=REGISTRY,
)

# -- queue (sampled from the database by observability.queue.sample_queue) --------------------------------
QUEUE_DEPTH = Gauge(
    "schedctl_queue_depth",
    "Runs in state queued whose not_before has passed (due and waiting for a worker).",
    registry=REGISTRY,
)
OLDEST_QUEUED_AGE = Gauge(
    "schedctl_oldest_queued_age_seconds",
    "Age of the oldest due queued run, by the database's clock; 0 when none is waiting.",
    registry=REGISTRY,
)
RUNS_WITHOUT_ELIGIBLE_WORKER = Gauge(
    "schedctl_runs_without_eligible_worker",
    "Due runs queued longer than a poll interval that no alive worker may take (its labels match none, or "
    "no worker is alive).",
    registry=REGISTRY,
)
