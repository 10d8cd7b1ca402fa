"""The one builder of queued run rows: the leader's dispatch, `schedctl replay` and `schedctl run` (and
``queue_runs`` in tests and benchmarks) all write a ``job_runs`` row through ``insert_runs``.

A row is what its tick decided (state, reason, detail, not_before) plus what its job definition shares with
every other row of it (``Shared``: computed once per definition, see ``dispatch.RowValues``). The job's
snapshot is not in the row: it is stored once per job version in ``job_versions``, content-addressed, and the
row names its version. A version row is written in the same transaction as, and before, the first rows that
name it, so a committed run always finds the snapshot it was queued with; every write, of a new version or of
one that exists, sets its ``written_at`` to the database's now (see ``VERSION_HOLD`` for why).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Container, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Connection

from schedctl.jobs.job import Concurrency, Job, RunState, shared_fields
from schedctl.store.dialect import insert_ignore_columns, select_db_now
from schedctl.store.schema import VERSION_LENGTH, job_runs, job_versions

# Seconds a version outlives its last write before pruning may delete it, judged by the database's clock
# (pruning.prune). Prune runs in workers: its NOT EXISTS cannot see a leader's uncommitted rows, and nothing
# tells it which versions a leader has cached and will name without writing them again. So a leader trusts
# its record of a committed version (dispatch.RowValues) only for half the hold, by its own monotonic clock
# from before the transaction that wrote it, then writes it again; every other writer (replay, `schedctl
# run`) writes the version in the row's own transaction. Hence every run row names a version written less
# than half a hold before the row's transaction began. Prune deletes only a version no committed row names
# and last written a full hold ago: for a row naming it to be missed, that row's transaction would have had
# to stay open for half a hold (a leader's lasts seconds, bounded by its lease), or the database's clock to
# jump forward half a hold against the leader's.
VERSION_HOLD = 3600.0

# (version, labels_key, str(concurrency), concurrency, the job): what every run row of a definition shares. The
# job, not its snapshot text: a leader keeps one of these per definition, and a million texts (~0.5 GB) would be
# held only to be written once per half hold; ``write_versions`` renders the text again from the same job
# (deterministic, so it hashes to the version) with ``snapshot_text``.
Shared = tuple[str, str, str, Concurrency, Job]

_JSON_TEXT = frozenset({"snapshot"})
_REFRESHED = ("written_at",)
_QUEUED = str(RunState.QUEUED)


def canonical_snapshot(snapshot: dict[str, Any]) -> str:
    """The one text of a snapshot: keys sorted, no spaces, so equal snapshots hash equal."""
    return json.dumps(snapshot, sort_keys=True, separators=(",", ":"))


# The snapshot keys a job holds itself (jobs.job._OWN), in their sorted order; every other key's value comes
# from the fields it shares with equal jobs (``shared_fields``).
_OWN_KEYS = ("command", "schedule", "timezone")
# Shared fields (by identity, kept alive beside) -> the canonical text around the own keys' values, or None.
_TEMPLATES: dict[int, tuple[tuple[Any, ...], tuple[str, ...] | None]] = {}
_MAX_TEMPLATES = 10_000


def snapshot_text(job: Job) -> str:
    """``canonical_snapshot(job.snapshot())``, in about half the time (~5 us instead of ~10-12 measured) for a job that shares its other fields
    with jobs rendered before: their text around the command, schedule and zone is rendered once. A leader
    renders each definition's text whenever it writes its version (``Shared`` does not keep it)."""
    options = shared_fields(job)
    cached = _TEMPLATES.get(id(options))
    if cached is None or cached[0] is not options:
        if len(_TEMPLATES) >= _MAX_TEMPLATES:
            return canonical_snapshot(job.snapshot())
        cached = _TEMPLATES[id(options)] = (options, _template(job))
    pieces = cached[1]
    if pieces is None:
        return canonical_snapshot(job.snapshot())
    command = list(job.command) if isinstance(job.command, tuple) else job.command
    return "".join(
        (
            pieces[0],
            _dumps(command),
            pieces[1],
            _dumps(job.schedule),
            pieces[2],
            _dumps(job.timezone),
            pieces[3],
        )
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _template(job: Job) -> tuple[str, ...] | None:
    """The canonical text of ``job``'s snapshot cut around its own keys' values; None when a marker value
    shows up more than once (another value holds its text), so the caller renders it whole."""
    snapshot = job.snapshot()
    markers = [_dumps(f"\x00{key}\x00") for key in _OWN_KEYS]
    for key, marker in zip(_OWN_KEYS, markers, strict=True):
        snapshot[key] = json.loads(marker)
    text = canonical_snapshot(snapshot)
    if any(text.count(marker) != 1 for marker in markers):
        return None
    pieces, rest = [], text
    for marker in markers:
        head, rest = rest.split(marker)
        pieces.append(head)
    return (*pieces, rest)


def version_of(canonical: str) -> str:
    """A job version's name: the start of the SHA-256 of its canonical snapshot. Versions are told apart only
    within one job (the key is ``(job_id, version)``), so 64 bits are plenty: a job edited a million times has
    a chance of about 3e-8 that two of its versions collide; the full digest would add 48 bytes to each row
    and each index entry for nothing."""
    return hashlib.sha256(canonical.encode()).hexdigest()[:VERSION_LENGTH]


def shared_values(job: Job) -> Shared:
    text = snapshot_text(job)
    # The member's own value, not str(member): that would be one new string per definition.
    return (version_of(text), job.labels_key, job.concurrency.value, job.concurrency, job)


def write_versions(
    conn: Connection, job_ids: Sequence[str], shared: Sequence[Shared], known: Container[str] = ()
) -> None:
    """Write the version of each distinct (job id, version) among the rows, once each, leaving out jobs in
    ``known`` (a leader's record of the versions it committed lately): insert it, or refresh the
    ``written_at`` of the row that exists (see ``VERSION_HOLD``)."""
    pending: dict[tuple[str, str], Job] = {}
    for job_id, values in zip(job_ids, shared, strict=True):
        if job_id not in known:
            pending.setdefault((job_id, values[0]), values[4])
    if not pending:
        return
    columns = {
        "job_id": [k[0] for k in pending],
        "version": [k[1] for k in pending],
        "snapshot": [snapshot_text(job) for job in pending.values()],
        "written_at": [select_db_now(conn)] * len(pending),  # one value: sent once, not once per row
    }
    insert_ignore_columns(conn, job_versions, columns, json_text=_JSON_TEXT, refresh=_REFRESHED)


def insert_runs(
    conn: Connection,
    job_ids: Sequence[str],
    scheduled_for: Sequence[datetime],
    shared: Sequence[Shared],
    *,
    term: int | None,
    queued_at: datetime | Sequence[datetime],
    states: Sequence[str] | None = None,
    reasons: Sequence[str | None] | None = None,
    details: Sequence[str | None] | None = None,
    not_before: Sequence[datetime | None] | None = None,
    manual: bool = False,
    known_versions: Container[str] = (),
) -> int:
    """Insert-ignore one run row per (job id, tick), built column by column: per row only what differs
    between rows is touched, after the versions the rows name (see ``write_versions`` for
    ``known_versions``). Omitted per-row columns mean a plain queued run. Returns how many rows were new (a
    tick someone else claimed first counts zero)."""
    n = len(job_ids)
    if not n:
        return 0
    write_versions(conn, job_ids, shared, known_versions)
    columns: dict[str, list[Any]] = {
        "job_id": list(job_ids),
        "scheduled_for": list(scheduled_for),
        "state": [_QUEUED] * n if states is None else list(states),
        "reason": [None] * n if reasons is None else list(reasons),
        "reason_detail": [None] * n if details is None else list(details),
        "manual": [manual] * n,
        "term": [term] * n,
        "attempt": [0] * n,
        "failures": [0] * n,
        "queued_at": [queued_at] * n if isinstance(queued_at, datetime) else list(queued_at),
        "not_before": [None] * n if not_before is None else list(not_before),
        "cancel_requested": [False] * n,
        "version": [s[0] for s in shared],
        "labels_key": [s[1] for s in shared],
        "concurrency": [s[2] for s in shared],
    }
    return insert_ignore_columns(conn, job_runs, columns)


def requeue_skipped(
    conn: Connection, job: Job, instants: Sequence[datetime], detail: str | None, now: datetime
) -> int:
    """Turn the skipped rows of ``job`` at ``instants`` into queued runs: the row ``insert_runs`` would have
    written for each, term NULL (no leader dispatched it). Writes the job's version first; rows in any other
    state are left alone. Returns how many were requeued."""
    shared = shared_values(job)
    write_versions(conn, [job.id], [shared])
    r = job_runs.c
    requeued = conn.execute(
        update(job_runs)
        .where(r.job_id == job.id, r.scheduled_for.in_(list(instants)), r.state == RunState.SKIPPED)
        .values(
            state=RunState.QUEUED,
            reason=None,
            reason_detail=detail,
            term=None,
            queued_at=now,
            not_before=None,
            version=shared[0],
            labels_key=job.labels_key,
            concurrency=str(job.concurrency),
        )
    ).rowcount
    return max(0, requeued or 0)


def queue_runs(conn: Connection, job: Job, instants: Iterable[datetime], manual: bool = False) -> int:
    """Queue runs of ``job`` at ``instants`` the way the scheduler does (term NULL: no lease dispatched them).

    ``schedctl run`` uses it with one instant, now to the microsecond; returns how many rows were new.
    """
    ticks = list(instants)
    shared = shared_values(job)
    return insert_runs(
        conn, [job.id] * len(ticks), ticks, [shared] * len(ticks), term=None, queued_at=ticks, manual=manual
    )
