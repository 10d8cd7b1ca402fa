"""The tables, in SQLAlchemy Core. Alembic migrations build exactly this (a test compares them)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    literal_column,
    text,
)

from schedctl.jobs.job import RunState
from schedctl.store.types import UTCDateTime

metadata = MetaData()

VERSION_LENGTH = 16  # hex digits of a job version's SHA-256 (why that is enough: runrows.version_of)

# One row per election ("cron" unless several installations share a database). `term` grows by one every
# time the holder changes: it is the fencing token every dispatch write is conditioned on.
scheduler_lease = Table(
    "scheduler_lease",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("term", BigInteger, nullable=False),
    Column("acquired_at", UTCDateTime, nullable=False),
    Column("renewed_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
)

# Every term a holder had, for `schedctl leases` and for `missed` to say "no leader from .. to ..".
lease_terms = Table(
    "lease_terms",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("term", BigInteger, primary_key=True, autoincrement=False),
    Column("holder", String(255), nullable=False),
    Column("acquired_at", UTCDateTime, nullable=False),
    Column("renewed_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    # released (clean shutdown) | expired (taken over after it lapsed) | lost (holder saw it could not renew)
    Column("end_reason", String(32), nullable=True),
    Column("schedctl_version", String(32), nullable=False),
    Column("tzdata_version", String(32), nullable=False),
    # The grace this leader split late from missed ticks by (NULL before 0003: the 60 s default then).
    Column("catch_up_grace", Float, nullable=True),
)

# The per-tick record: one row per (job, tick) any leader decided about. The primary key is the whole
# fire-once story: a second insert for the same tick conflicts and does nothing.
job_runs = Table(
    "job_runs",
    metadata,
    Column("job_id", String(255), primary_key=True),
    Column("scheduled_for", UTCDateTime, primary_key=True),
    Column("state", String(16), nullable=False),
    Column("reason", String(32), nullable=True),  # SkipReason, or why a run ended as it did
    Column("reason_detail", Text, nullable=True),  # a plain sentence for `missed` and `status`
    Column("manual", Boolean, nullable=False, default=False),
    Column("term", BigInteger, nullable=True),  # lease term that dispatched it; NULL for replay/manual
    Column("attempt", Integer, nullable=False, default=0),  # bumped by every claim; fences worker writes
    Column("failures", Integer, nullable=False, default=0),  # non-zero exits so far (retries use these)
    Column("worker", String(255), nullable=True),
    Column("heartbeat_at", UTCDateTime, nullable=True),
    Column("queued_at", UTCDateTime, nullable=False),
    Column("not_before", UTCDateTime, nullable=True),  # earliest claim: jitter, retry backoff
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("exit_status", Integer, nullable=True),
    Column("output_tail", Text, nullable=True),
    # Characters the attempt printed so far, of which output_tail is the end: a follower (`logs -f`) prints
    # only what it has not. Written with the tail while the run runs (the worker's output interval) and at its end.
    Column("output_size", BigInteger, nullable=True),
    Column("error", Text, nullable=True),
    Column("checkpoint", JSON, nullable=True),
    Column("checkpoint_at", UTCDateTime, nullable=True),  # when a running run last saved its checkpoint
    # The job version it was queued with (job_versions): the snapshot a worker runs, whatever the job file
    # says by then. NULL only on rows written without one (tests of history, hand-made rows).
    Column("version", String(VERSION_LENGTH), nullable=True),
    Column("labels_key", String(512), nullable=False, default=""),
    Column("concurrency", String(16), nullable=False, default="forbid"),
    # 1 while a `forbid` run executes, else NULL: the unique index below lets the database itself refuse a
    # second executing run of the same job (NULLs never collide on any backend).
    Column("exclusive", Integer, nullable=True),
    # The three indexes below are partial where the database can (PostgreSQL, SQLite): they hold only the
    # few rows they are for, not the whole history, and a 100,000-run insert does not pay for them per row.
    # MySQL indexes every row; the leading `state` column keeps its index as selective there.
    Index(
        "uq_job_runs_exclusive",
        "job_id",
        "exclusive",
        unique=True,
        postgresql_where=text("exclusive IS NOT NULL"),
        sqlite_where=text("exclusive IS NOT NULL"),
    ),
    # Claims walk queued runs oldest first and stop at their limit, whatever the size of the queue. The
    # claim query spells `state = 'queued'` inline so that the planners can match these predicates.
    Index(
        "ix_job_runs_queued",
        "state",
        "scheduled_for",
        "job_id",
        postgresql_where=text(f"state = '{RunState.QUEUED.value}'"),
        sqlite_where=text(f"state = '{RunState.QUEUED.value}'"),
    ),
    # Stale-run takeover: running rows by heartbeat.
    Index(
        "ix_job_runs_running",
        "state",
        "heartbeat_at",
        postgresql_where=text(f"state = '{RunState.RUNNING.value}'"),
        sqlite_where=text(f"state = '{RunState.RUNNING.value}'"),
    ),
)

# Each job definition a run was queued with, stored once however many runs name it (content-addressed: see
# store/runrows.py). Pruning deletes a version once no run row names it and it was last written a hold ago
# (pruning.prune, runrows.VERSION_HOLD).
job_versions = Table(
    "job_versions",
    metadata,
    Column("job_id", String(255), primary_key=True),
    Column("version", String(VERSION_LENGTH), primary_key=True),
    Column("snapshot", JSON, nullable=False),  # what `Job.snapshot()` gave: command, env, policy
    Column("written_at", UTCDateTime, nullable=False),  # the database's now at its last write, by anyone
)

# Per-job memory that must outlive every process: where dispatch resumes, pauses, refusals, history mark.
job_state = Table(
    "job_state",
    metadata,
    Column("job_id", String(255), primary_key=True),
    Column("schedule_key", String(512), nullable=False),  # schedule|zone|dst the ticks below were counted by
    Column("defined_at", UTCDateTime, nullable=False),  # first seen by a leader (or since schedule change)
    Column("last_dispatched", UTCDateTime, nullable=True),  # the last tick any leader decided about
    Column("paused_at", UTCDateTime, nullable=True),  # set by `schedctl pause`; holds until `resume`
    Column("paused_by", String(255), nullable=True),  # user@host that ran `schedctl pause`
    Column("paused_by_file", Boolean, nullable=False, default=False),  # last seen `paused = true` in the file
    Column("refused_at", UTCDateTime, nullable=True),  # catch-up refused; dispatch stops until replay
    Column("refused_detail", Text, nullable=True),
    Column("history_start", UTCDateTime, nullable=True),  # rows before this were pruned: never "missed"
    Column("updated_at", UTCDateTime, nullable=False),
)

# An append-only journal of what happened to a job, for `missed` and `status` to explain gaps.
job_events = Table(
    "job_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_id", String(255), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    # defined | schedule_changed | paused | resumed | refused | replayed | pruned
    Column("kind", String(32), nullable=False),
    Column("detail", Text, nullable=True),
    Index("ix_job_events_job_at", "job_id", "at"),
)

# Every `serve` process, one row per identity: a worker (or `--role all`) refreshes `last_seen_at` by the
# database's clock every heartbeat interval, busy or idle; a scheduler-only process does so every renew
# interval. A clean exit sets `stopped_at` and why. A row not seen for its own `stale_after` is stale: the
# process died without saying so. Rows stopped (or stale) long ago are pruned (store/workers.py).
workers = Table(
    "workers",
    metadata,
    Column("identity", String(255), primary_key=True),
    Column("role", String(16), nullable=False),  # worker | scheduler | all
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("schedctl_version", String(32), nullable=False),
    Column("tzdata_version", String(32), nullable=False),
    Column("labels", JSON, nullable=True),
    Column("slots", Integer, nullable=False),
    Column("poll_interval", Float, nullable=False),
    Column("stale_after", Float, nullable=False),  # seconds without a refresh before readers call it stale
    Column("started_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Column("stopped_at", UTCDateTime, nullable=True),
    Column("stop_reason", Text, nullable=True),
)

# Missed ticks that outlive history pruning: a range stands for every fire of `schedule_key` in
# [first_tick, last_tick] that did not run. `reason` NULL: the ticks had no row at all (`missed` explains them
# from the lease history, pauses and refusals, as it did before pruning); else they were skipped for it.
missed_ranges = Table(
    "missed_ranges",
    metadata,
    Column("job_id", String(255), primary_key=True),
    Column("first_tick", UTCDateTime, primary_key=True),
    Column("last_tick", UTCDateTime, nullable=False),
    Column("ticks", Integer, nullable=False),  # how many fires the range stands for
    Column("reason", String(32), nullable=True),
    Column("reason_detail", Text, nullable=True),
    Column("schedule_key", String(512), nullable=False),  # the schedule the fires are counted by
    Column("recorded_at", UTCDateTime, nullable=False),
)

# The run states the partial indexes above are for, as inline SQL literals rather than bound parameters: a
# planner matches `WHERE state = 'queued'` against the same constant in a query, never against a parameter
# (PostgreSQL's generic plans and SQLite's planner do not see its value).
QUEUED: Any = literal_column(f"'{RunState.QUEUED.value}'")
RUNNING: Any = literal_column(f"'{RunState.RUNNING.value}'")
