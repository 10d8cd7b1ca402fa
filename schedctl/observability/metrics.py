"""Every metric schedctl exports, defined once, on one registry.

The scheduler and the worker update these objects directly; ``http.py`` serves ``REGISTRY``. A dedicated
registry (not prometheus_client's global one) keeps tests and embedding applications from seeing each
other's metrics, and makes the exported set exactly what is listed here plus the process/platform collectors.

Labels are bounded: ``job_id`` (one per job definition), ``state`` (RunState values), ``reason``
(SkipReason values). Never label by scheduled_for, worker or attempt: those grow without bound.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

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
TICKS_DISPATCHED = Counter(
    "schedctl_ticks_dispatched_total",
    "Ticks this process inserted as queued run rows.",
    ["job_id"],
    registry=REGISTRY,
)
TICKS_MISSED = Counter(
    "schedctl_ticks_missed_total",
    "Ticks written as skipped, by reason (catch_up_skip, catch_up_latest, starting_deadline, concurrency, ...).",
    ["job_id", "reason"],
    registry=REGISTRY,
)
TICKS_REFUSED = Counter(
    "schedctl_ticks_refused_total",
    "Times a job's catch-up was refused (more missed ticks than max_catch_up); it waits for `schedctl replay`.",
    ["job_id"],
    registry=REGISTRY,
)

# -- runs (worker) -----------------------------------------------------------------------------------------
RUNS_FINISHED = Counter(
    "schedctl_runs_finished_total",
    "Runs this process finished, by final state (succeeded, failed, timed_out, cancelled).",
    ["job_id", "state"],
    registry=REGISTRY,
)
# Cron jobs range from a second to hours: buckets from 0.1 s to 6 h.
RUN_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, float("inf"))
RUN_DURATION = Histogram(
    "schedctl_run_duration_seconds",
    "Wall time of finished runs, from process start to exit.",
    ["job_id"],
    buckets=RUN_DURATION_BUCKETS,
    registry=REGISTRY,
)
WORKER_ACTIVE_RUNS = Gauge(
    "schedctl_worker_active_runs", "Runs this worker process is executing now.", registry=REGISTRY
)
LAST_SUCCESS = Gauge(
    "schedctl_last_success_timestamp_seconds",
    "Unix time at which the job's last successful run finished (alert on time() - this: a silently stopped job).",
    ["job_id"],
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
