"""Queue depth, the age of the oldest waiting run and the runs no alive worker may take, sampled from the
database into three gauges.

Sampled by the service on a timer rather than on scrape: a scrape must never wait for (or load) the database.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING

from schedctl.observability import metrics
from schedctl.store import runstats
from schedctl.store.dialect import select_db_now

if TYPE_CHECKING:
    from schedctl.store import Store

log = logging.getLogger("schedctl.observability.queue")


def sample_queue(store: Store) -> tuple[int, float]:
    """Set schedctl_queue_depth and schedctl_oldest_queued_age_seconds; returns (depth, age_seconds).

    A run counts once it is due: queued with not_before unset or passed, by the database's clock (the same
    rule the worker claims by), so a retry waiting out its backoff is not "stuck".
    """
    with store.read() as conn:
        now: datetime = select_db_now(conn)
        depth, oldest = runstats.due_depth_and_oldest_wait(conn, now)
        from schedctl.store.eligibility import stranded_runs

        stranded = sum(s.count for s in stranded_runs(conn, now).values())
    age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
    metrics.RUNS_WITHOUT_ELIGIBLE_WORKER.set(stranded)
    metrics.QUEUE_DEPTH.set(depth)
    metrics.OLDEST_QUEUED_AGE.set(age)
    return int(depth), age


def sample_last_success(store: Store) -> int:
    """Set schedctl_last_success_timestamp_seconds for every job from the database; returns how many jobs.

    The worker sets the gauge when a run succeeds, but only for runs it ran itself, and a restarted process
    starts empty: an alert on ``time() - schedctl_last_success_timestamp_seconds`` would then see nothing
    until each job's next success. Call this at start-up and then every few minutes (it is a GROUP BY over
    job_runs, whose kept history is small: pruning keeps the last few succeeded runs per job, so the
    newest success is never pruned).
    """
    with store.read() as conn:
        rows = runstats.last_success_per_job(conn)
    # One collect of this metric (not of the registry per job): the values this process already holds.
    held = {
        sample.labels["job_id"]: sample.value
        for family in metrics.LAST_SUCCESS.collect()
        for sample in family.samples
    }
    for job_id, finished_at in rows:
        if finished_at is None:
            continue
        # Never move it backwards: this process may have seen a newer success than the last sample.
        newest = max(finished_at.timestamp(), held.get(job_id, 0.0))
        metrics.LAST_SUCCESS.labels(job_id=job_id).set(newest)
    return len(rows)


QUEUE_SAMPLE_INTERVAL = 15.0
LAST_SUCCESS_SAMPLE_INTERVAL = 300.0


def start_sampler(
    store: Store,
    stopping: threading.Event,
    interval: float = QUEUE_SAMPLE_INTERVAL,
    last_success_interval: float = LAST_SUCCESS_SAMPLE_INTERVAL,
) -> threading.Thread:
    """Sample the queue every ``interval`` s and last successes every ``last_success_interval`` s, in a daemon
    thread, until ``stopping`` is set. Database errors are logged once per outage and never stop the thread:
    the gauges keep their last values while the database is away.
    """
    thread = threading.Thread(
        target=_sample_forever,
        args=(store, stopping, interval, last_success_interval),
        name="schedctl-metrics-sampler",
        daemon=True,
    )
    thread.start()
    return thread


def _sample_forever(
    store: Store, stopping: threading.Event, interval: float, last_success_interval: float
) -> None:
    failing = False
    next_last_success = 0.0
    while not stopping.is_set():
        try:
            sample_queue(store)
            if time.monotonic() >= next_last_success:
                sample_last_success(store)
                next_last_success = time.monotonic() + last_success_interval
            if failing:
                log.info("queue metrics sampled again", extra={"event": "metrics_sample_recovered"})
            failing = False
        except Exception as exc:  # a sampler must never take the process down
            if not failing:
                log.warning("cannot sample queue metrics: %s", exc, extra={"event": "metrics_sample_failed"})
            failing = True
        stopping.wait(interval)
