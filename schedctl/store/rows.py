"""The rows `missed`, `status`, `replay` and `top` read, one frozen type per table, with no SQLAlchemy: the
store maps its rows into these (``history``, ``missedrecord``) and the explanations take them as plain data.
``Outcome`` goes the other way: what a worker's policy (``worker.outcome``) decided, for ``claims`` to write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schedctl.jobs.job import EventKind, RunState


@dataclass(frozen=True)
class RunRecord:
    """One ``job_runs`` row, as much of it as `status`, `missed`, `runs` and `jobs` show (not the job snapshot
    nor the output tail)."""

    job_id: str
    scheduled_for: datetime
    state: RunState
    reason: str | None = None
    reason_detail: str | None = None
    manual: bool = False
    term: int | None = None
    attempt: int = 0
    worker: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_status: int | None = None
    error: str | None = None
    cancel_requested: bool = False
    failures: int = 0  # non-zero exits so far

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class TermRecord:
    """One lease term. ``held_until`` is when the holder stopped holding it: the earlier of its recorded end
    and its expiry (a lapsed term is only marked ended when someone takes over, possibly hours later)."""

    term: int
    holder: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None  # a LeaseEndReason, None while it lasts
    catch_up_grace: float | None = None  # the grace its leader used; None: recorded before schema 0003
    schedctl_version: str | None = None  # its leader's, as `schedctl leases` shows them
    tzdata_version: str | None = None

    @property
    def held_until(self) -> datetime:
        if self.ended_at is None:
            return self.expires_at
        return min(self.ended_at, self.expires_at)


@dataclass(frozen=True)
class StateRecord:
    """One ``job_state`` row."""

    job_id: str
    schedule_key: str
    defined_at: datetime
    last_dispatched: datetime | None
    paused_at: datetime | None
    paused_by_file: bool
    refused_at: datetime | None
    refused_detail: str | None
    history_start: datetime | None
    paused_by: str | None = None  # user@host that ran `schedctl pause`

    @property
    def held(self) -> bool:
        """Paused by `schedctl pause` or refused by the catch-up bound: dispatch nothing, do not advance."""
        return self.paused_at is not None or self.refused_at is not None


@dataclass(frozen=True)
class EventRecord:
    """One ``job_events`` row (the readers ask for known kinds only)."""

    job_id: str
    at: datetime
    kind: EventKind
    detail: str | None


@dataclass(frozen=True)
class LeaseRecord:
    """The ``scheduler_lease`` row, expired or not: the reader judges expiry against its ``now`` (the
    database's clock, read with the row)."""

    name: str
    holder: str
    term: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime

    def held_at(self, now: datetime) -> bool:
        """Unexpired at ``now``: live means strictly before its expiry, as the election judges it."""
        return self.expires_at > now

    def expires_in(self, now: datetime) -> float:
        """Seconds from ``now`` until it lapses; negative once it has."""
        return (self.expires_at - now).total_seconds()

    def renewed_ago(self, now: datetime) -> float:
        return (now - self.renewed_at).total_seconds()

    @property
    def duration(self) -> float:
        """The lease duration its holder asked for at its last renewal."""
        return (self.expires_at - self.renewed_at).total_seconds()

    @property
    def transitions(self) -> int:
        """Kubernetes' leaseTransitions: terms start at 1, so every later term is one change of hands."""
        return self.term - 1


@dataclass(frozen=True)
class RangeRecord:
    """One ``missed_ranges`` row: missed ticks kept past pruning, every fire of ``schedule_key`` in
    ``[first_tick, last_tick]``.

    ``reason`` None: the ticks never had a row (explained as they were before pruning); else they were
    skipped for it, with ``reason_detail`` the scheduler's sentence."""

    job_id: str
    first_tick: datetime
    last_tick: datetime
    ticks: int
    reason: str | None
    reason_detail: str | None
    schedule_key: str


@dataclass(frozen=True)
class Outcome:
    """What a worker writes when its copy of a run ended. ``state`` queued means retry or hand back."""

    job_id: str
    scheduled_for: datetime
    attempt: int
    state: str
    exit_status: int | None = None
    output_tail: str | None = None
    error: str | None = None
    checkpoint: Any = None
    output_size: int | None = None  # characters printed, of which output_tail is the end
    save_checkpoint: bool = False
    retry_after: float | None = None  # seconds; a retry counts a failure, a hand back does not
    reason: str | None = None
