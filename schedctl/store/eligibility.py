"""Queued runs that no alive worker may take: their labels match no alive worker's, or no worker is alive.

A run is claimable by a worker when the run's labels are a subset of the worker's (store/claims.py); this
module asks the same question of the registry, so `status`, `top` and the metric say "no alive worker has
labels pool=batch" instead of "waiting" while a run sits queued forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from schedctl.jobs.job import WorkerState
from schedctl.store import workers as store_workers
from schedctl.store.claims import label_keys

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

DEFAULT_POLL = 1.0  # seconds: a run younger than a worker's poll may simply not have been claimed yet


@dataclass(frozen=True)
class Stranded:
    """One job's due queued runs that no alive worker may take, and why."""

    job_id: str
    labels_key: str
    count: int
    oldest_queued_at: datetime
    alive: tuple[store_workers.WorkerRecord, ...]  # the alive workers, none of which has the labels
    not_alive: int  # registered workers stale or stopped

    def text(self, now: datetime) -> str:
        waited = _minutes(now, self.oldest_queued_at)
        runs = "" if self.count == 1 else f" ({self.count} runs)"
        if not self.alive:
            others = f"{self.not_alive} stale or stopped; " if self.not_alive else ""
            return (
                f"queued {waited}{runs}: no worker alive at all ({others}start `schedctl serve --role worker`"
                " and see `schedctl workers`)"
            )
        names = ", ".join(f"{w.identity} ({_labels(w.labels)})" for w in self.alive[:3])
        more = ", ..." if len(self.alive) > 3 else ""
        n = len(self.alive)
        return (
            f"queued {waited}{runs}: no alive worker has labels {self.labels_key} "
            f"({n} worker{'s' if n != 1 else ''} alive: {names}{more}); start one with "
            + " ".join(f"--label {kv}" for kv in self.labels_key.split(","))
        )


def stranded_runs(conn: Connection, now: datetime) -> dict[str, Stranded]:
    """Per job, the oldest group of due queued runs that no alive worker may take; two statements."""
    processes = [p for p in store_workers.list_workers(conn, now, with_runs=False) if p.runs_jobs]
    alive = tuple(p for p in processes if p.state == WorkerState.ALIVE)
    poll = max((p.poll_interval for p in alive), default=DEFAULT_POLL)
    eligible: set[str] = set()
    for p in alive:
        eligible.update(label_keys(p.labels))
    out: dict[str, Stranded] = {}
    for g in store_workers.due_queued_groups(conn, now, older_than=poll):
        if g.labels_key in eligible:
            continue
        known = out.get(g.job_id)
        if known is None or g.oldest_queued_at < known.oldest_queued_at:
            out[g.job_id] = Stranded(
                g.job_id, g.labels_key, g.count, g.oldest_queued_at, alive, len(processes) - len(alive)
            )
    return out


def _labels(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "no labels"


def _minutes(now: datetime, since: datetime) -> str:
    seconds = max(0.0, (now - since).total_seconds())
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
