"""The worker's SQL: claim, heartbeat, finish, retry, hand back (pruning the history is ``pruning``'s).

Every write after a claim is conditioned on the attempt the claim produced. A worker that was paused or
partitioned while another took its run over finds that its write matched no row, and that is how it learns it
lost the run: nothing in memory decides who owns a run, only the row.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum, auto
from itertools import combinations
from typing import Any

from sqlalchemy import (
    BigInteger,
    Float,
    Integer,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from schedctl.jobs.job import Concurrency, RunState, labels_key
from schedctl.store.dialect import db_now, db_now_plus, supports_skip_locked
from schedctl.store.rows import Outcome
from schedctl.store.runrows import queue_runs as queue_runs  # re-exported: tests, benchmarks queue runs here
from schedctl.store.schema import QUEUED, RUNNING, job_runs, job_versions

MAX_WORKER_LABELS = 10  # 2**10 label subsets in a claim's IN list is already plenty
FAILED_STATES = (
    RunState.FAILED,
    RunState.TIMED_OUT,
    RunState.CANCELLED,
)  # kept under the failed-history limit
FINISHED_STATES = (RunState.SUCCEEDED, *FAILED_STATES)

RunKey = tuple[str, datetime]  # (job_id, scheduled_for)


@dataclass(frozen=True)
class ClaimedRun:
    """A run this worker now holds, at ``attempt``."""

    job_id: str
    scheduled_for: datetime
    attempt: int
    failures: int
    snapshot: dict[str, Any] | None
    checkpoint: Any
    manual: bool
    took_over_from: str | None  # the worker whose heartbeat went stale, for a takeover

    @property
    def key(self) -> RunKey:
        return (self.job_id, self.scheduled_for)


@dataclass(frozen=True)
class BeatResult:
    lost: list[RunKey]  # taken over (or deleted): this worker must stop its copy and record nothing
    cancel: list[RunKey]  # cancel_requested by `schedctl cancel` or a `replace` successor


def label_keys(labels: Mapping[str, str]) -> list[str]:
    """Every subset of a worker's labels as a labels_key: a run is claimable when its key is one of them."""
    if len(labels) > MAX_WORKER_LABELS:
        raise ValueError(f"a worker takes at most {MAX_WORKER_LABELS} labels")
    items = sorted(labels.items())
    keys = [
        labels_key(dict(subset)) for size in range(len(items) + 1) for subset in combinations(items, size)
    ]
    return keys


def claim(
    conn: Connection,
    identity: str,
    limit: int,
    labels: Sequence[str],
    stale_after: float,
    take_stale: bool = True,
) -> list[ClaimedRun]:
    """Claim up to ``limit`` runs: queued ones due now, and (``take_stale``) running ones whose heartbeat
    went stale.

    PostgreSQL/MySQL lock the candidates with SKIP LOCKED so concurrent claimers take different rows;
    SQLite's BEGIN IMMEDIATE makes the whole transaction the only writer. A ``forbid`` job only ever offers
    its earliest queued run, and only while none of its runs is running; the unique (job_id, exclusive)
    index refuses a second one if two claimers still raced, and that claimer skips the run.
    """
    if limit <= 0:
        return []
    stale_query, queued_query = _locked_candidates(tuple(labels), supports_skip_locked(conn))
    # Stale runs first: they were due before anything still queued behind them.
    rows: list[Any] = []  # every candidate locked here; its forbid ones are claimed last (_claim_forbid)
    claimed: list[ClaimedRun] = []
    if take_stale:
        params: dict[str, Any] = {"limit": limit, "stale": -float(stale_after)}
        rows = list(conn.execute(stale_query, params).mappings())
    _claim_plain(conn, identity, rows, claimed)
    if len(rows) < limit and conn.dialect.name == "postgresql":
        # The queued runs' select and their claiming UPDATE in one statement: one round trip, and the same
        # SQL every time, so psycopg prepares it (the two-step form's IN list changes with its length).
        params = {"limit": limit - len(rows), "identity": identity}
        queued = conn.execute(_claim_queued(tuple(labels)), params).mappings().all()
        claimed.extend(_claimed(r) for r in queued if r["concurrency"] != Concurrency.FORBID)
        rows += queued
    elif len(rows) < limit:
        queued = conn.execute(queued_query, {"limit": limit - len(rows)}).mappings().all()
        _claim_plain(conn, identity, queued, claimed)
        rows += queued
    _claim_forbid(conn, identity, [r for r in rows if r["concurrency"] == Concurrency.FORBID], claimed)
    return claimed


def _claim_forbid(conn: Connection, identity: str, rows: Sequence[Any], claimed: list[ClaimedRun]) -> None:
    """Claim the locked forbid ``rows``, each taking its job's exclusive slot.

    The candidate queries offer at most one run per forbid job, so one UPDATE claims them all unless a
    concurrent claimer won a race for one of the jobs: then the unique (job_id, exclusive) index refuses the
    whole statement, and each run is claimed on its own so that only the lost ones are skipped. A refused
    statement aborts a PostgreSQL transaction, so there each attempt runs in a savepoint; SQLite and MySQL undo
    only the refused statement. Forbid is the default: this is most runs' path, and a savepoint and a statement
    built per run were half of a busy SQLite worker's CPU.
    """
    if not rows:
        return
    savepoint = conn.dialect.name == "postgresql"
    keys = [(row["job_id"], row["scheduled_for"], row["attempt"]) for row in rows]
    try:
        _execute_refusable(conn, savepoint, _claim_keys(True), _keys_params(identity, keys))
    except IntegrityError:
        pass
    else:
        claimed.extend(_claimed(r) for r in rows)
        return
    for row, key in zip(rows, keys, strict=True):
        try:
            _execute_refusable(conn, savepoint, _claim_keys(True), _keys_params(identity, [key]))
        except IntegrityError:
            continue  # another worker runs this job right now; its turn will come
        claimed.append(_claimed(row))


def _execute_refusable(conn: Connection, savepoint: bool, statement: Any, params: dict[str, Any]) -> None:
    if savepoint:
        with conn.begin_nested():
            conn.execute(statement, params)
    else:
        conn.execute(statement, params)


def _claim_plain(conn: Connection, identity: str, rows: Sequence[Any], claimed: list[ClaimedRun]) -> None:
    """Claim the locked ``rows`` that are not ``forbid`` in one UPDATE."""
    plain = [r for r in rows if r["concurrency"] != Concurrency.FORBID]
    if plain:
        keys = [(row["job_id"], row["scheduled_for"], row["attempt"]) for row in plain]
        conn.execute(_claim_keys(False), _keys_params(identity, keys))
        claimed.extend(_claimed(r) for r in plain)


def _keys_params(identity: str, keys: list[tuple[str, datetime, int]]) -> dict[str, Any]:
    return {"identity": identity, "ids": sorted({k[0] for k in keys}), "keys": keys}


@functools.lru_cache(maxsize=2)
def _claim_keys(exclusive: bool) -> Any:
    """Claim the runs in ``keys`` (job_id, scheduled_for, attempt), with ``ids`` their job ids (``_keys_in``);
    built once, the lists expanded at execution."""
    r = job_runs.c
    return _claim_update(None, exclusive=exclusive).where(
        r.job_id.in_(bindparam("ids", expanding=True)),
        tuple_(r.job_id, r.scheduled_for, r.attempt).in_(bindparam("keys", expanding=True)),
    )


@functools.lru_cache(maxsize=32)
def _locked_candidates(labels: tuple[str, ...], skip_locked: bool) -> tuple[Any, Any]:
    """``_candidate_queries`` locked for the claim, built once: the same statement objects every time, with
    the limit given at execution, keep their memoized cache key. A new ``.params()`` or ``FOR UPDATE`` copy per
    claim made SQLAlchemy walk the whole query again each time, ~8% of a busy SQLite worker's CPU."""
    stale, queued = _candidate_queries(labels)
    if skip_locked:
        return stale.with_for_update(skip_locked=True), queued.with_for_update(skip_locked=True)
    return stale, queued


@functools.lru_cache(maxsize=32)
def _candidate_queries(labels: tuple[str, ...]) -> tuple[Any, Any]:
    """(stale running runs, due queued runs), each walking its own index in order and stopping at its limit.

    One query with ``queued OR stale`` could use neither index and sorted the whole queue on every claim.
    Built once per label set: constructing these expressions costs more than running them on SQLite.
    """
    r = job_runs.c
    other = job_runs.alias("other")
    o = other.c
    # In scheduled order: a queued forbid run waits for every earlier one and for any running one.
    forbid_queued_blocked = exists().where(
        o.job_id == r.job_id,
        or_(o.state == RUNNING, and_(o.state == QUEUED, o.scheduled_for < r.scheduled_for)),
    )
    forbid_running_blocked = exists().where(
        o.job_id == r.job_id, o.state == RUNNING, o.scheduled_for != r.scheduled_for
    )
    columns = (
        r.job_id,
        r.scheduled_for,
        r.state,
        r.attempt,
        r.failures,
        r.worker,
        _snapshot_of(r),
        r.checkpoint,
        r.manual,
        r.concurrency,
    )
    limit = bindparam("limit", type_=Integer)
    stale = (
        select(*columns)
        .where(
            r.state == RUNNING,
            r.heartbeat_at < db_now_plus(bindparam("stale", type_=Float)),
            r.labels_key.in_(list(labels)),
            or_(r.concurrency != Concurrency.FORBID, ~forbid_running_blocked),
        )
        .order_by(r.heartbeat_at)
        .limit(limit)
    )
    queued = (
        select(*columns)
        .where(
            r.state == QUEUED,
            or_(r.not_before.is_(None), r.not_before <= db_now()),
            r.labels_key.in_(list(labels)),
            or_(r.concurrency != Concurrency.FORBID, ~forbid_queued_blocked),
        )
        .order_by(r.state, r.scheduled_for, r.job_id)
        .limit(limit)
    )
    return stale, queued


@functools.lru_cache(maxsize=32)
def _claim_queued(labels: tuple[str, ...]) -> Any:
    """PostgreSQL: lock the due queued runs (SKIP LOCKED) and claim the non-forbid ones in the same statement;
    the rows come back as they were before the claim, like the two-step form's select. Forbid runs are only
    locked here: each is claimed on its own, under the unique (job_id, exclusive) index (``claim``)."""
    _, queued = _candidate_queries(labels)
    candidates = queued.with_for_update(skip_locked=True).cte("candidates")
    c = candidates.c
    r = job_runs.c
    take = (
        _claim_update(None, exclusive=False)
        .where(
            r.job_id == c.job_id,
            r.scheduled_for == c.scheduled_for,
            r.attempt == c.attempt,
            c.concurrency != Concurrency.FORBID,
        )
        .cte("claimed")
    )
    return select(candidates).add_cte(take)


def _snapshot_of(r: Any) -> Any:
    """The snapshot a run was queued with, read through its version. A subquery in the select list, not a
    join: ``FOR UPDATE`` locks only the run rows, never the version many runs share."""
    v = job_versions.c
    return (
        select(v.snapshot)
        .where(v.job_id == r.job_id, v.version == r.version)
        .scalar_subquery()
        .label("snapshot")
    )


def _claim_update(identity: str | None, exclusive: bool) -> Any:
    """The claiming UPDATE's SET; ``identity`` None leaves the worker a bind parameter named ``identity``."""
    r = job_runs.c
    return update(job_runs).values(
        state=RunState.RUNNING,
        attempt=r.attempt + 1,
        worker=bindparam("identity", type_=r.worker.type) if identity is None else identity,
        heartbeat_at=db_now(),
        started_at=func.coalesce(r.started_at, db_now()),
        exclusive=1 if exclusive else None,
        not_before=None,
        # The output stored is the previous attempt's: a follower of this attempt must not print it as new.
        output_tail=None,
        output_size=None,
    )


def _keys_in(columns: tuple[Any, ...], keys: Sequence[tuple[Any, ...]]) -> Any:
    """``(job_id, ...) IN keys``, plus ``job_id IN`` their ids: SQLite answers a row-value IN with a scan
    of the whole table, and the plain IN lets it (and every other planner) go by the primary key."""
    return and_(columns[0].in_(sorted({k[0] for k in keys})), tuple_(*columns).in_(list(keys)))


def _claimed(row: Any) -> ClaimedRun:
    return ClaimedRun(
        job_id=row["job_id"],
        scheduled_for=row["scheduled_for"],
        attempt=row["attempt"] + 1,
        failures=row["failures"],
        snapshot=row["snapshot"],
        checkpoint=row["checkpoint"],
        manual=bool(row["manual"]),
        took_over_from=row["worker"] if row["state"] == RunState.RUNNING else None,
    )


def heartbeat(conn: Connection, identity: str, runs: Sequence[tuple[str, datetime, int]]) -> BeatResult:
    """Beat for every run this worker holds in one UPDATE, then read back who still holds what.

    MariaDB has no UPDATE ... RETURNING, so the read-back is a second statement in the same transaction;
    our own UPDATE has locked the rows it matched, so the read sees them as we left them.
    """
    if not runs:
        return BeatResult(lost=[], cancel=[])
    r = job_runs.c
    conn.execute(
        update(job_runs)
        .where(_keys_in((r.job_id, r.scheduled_for, r.attempt), runs), r.state == RunState.RUNNING)
        .values(heartbeat_at=db_now())
    )
    current = conn.execute(
        select(r.job_id, r.scheduled_for, r.attempt, r.state, r.worker, r.cancel_requested).where(
            _keys_in((r.job_id, r.scheduled_for), [(j, s) for j, s, _ in runs])
        )
    ).all()
    held = {
        (row.job_id, row.scheduled_for, row.attempt): bool(row.cancel_requested)
        for row in current
        if row.state == RunState.RUNNING and row.worker == identity
    }
    lost = [(j, s) for j, s, a in runs if (j, s, a) not in held]
    cancel = [(j, s) for j, s, a in runs if held.get((j, s, a))]
    return BeatResult(lost=lost, cancel=cancel)


def save_checkpoint(conn: Connection, job_id: str, scheduled_for: datetime, attempt: int, value: Any) -> bool:
    r = job_runs.c
    result = conn.execute(
        update(job_runs)
        .where(
            r.job_id == job_id,
            r.scheduled_for == scheduled_for,
            r.attempt == attempt,
            r.state == RunState.RUNNING,
        )
        .values(checkpoint=value, checkpoint_at=db_now())  # its age is a running run's progress in `top`
    )
    return bool(result.rowcount)


def save_output(conn: Connection, outputs: Sequence[tuple[str, datetime, int, str, int]]) -> None:
    """Store the output so far of running runs, ``(job_id, scheduled_for, attempt, tail, size)`` each, in one
    executemany: what ``schedctl logs -f`` follows. A run no longer held at that attempt matches nothing."""
    if not outputs:
        return
    conn.execute(
        _output_statement(),
        [
            {
                "b_job_id": j,
                "b_scheduled_for": s,
                "b_attempt": a,
                "b_output_tail": _storable(t),
                "b_output_size": n,
            }
            for j, s, a, t, n in outputs
        ],
    )


@functools.lru_cache(maxsize=1)
def _output_statement() -> Any:
    r = job_runs.c
    return (
        update(job_runs)
        .where(
            r.job_id == bindparam("b_job_id"),
            r.scheduled_for == bindparam("b_scheduled_for"),
            r.attempt == bindparam("b_attempt"),
            r.state == RunState.RUNNING,
        )
        .values(
            output_tail=bindparam("b_output_tail"), output_size=bindparam("b_output_size", type_=BigInteger)
        )
    )


def record(conn: Connection, outcome: Outcome) -> bool:
    """Write how a run ended, a retry or a hand back. False: the run was taken over; nothing was written."""
    return record_many(conn, [outcome])[0]


def record_many(conn: Connection, outcomes: Sequence[Outcome]) -> list[bool]:
    """Record a batch of outcomes with one executemany per kind of outcome, each conditioned on the run
    still being ``running`` at the claimed attempt. A run that is no longer held gets False and no write.

    Usually every row matches and the summed rowcount says so. When it does not, one read tells which
    were written: a row still at our attempt but no longer running can only be one we just wrote, since
    a takeover bumps the attempt and nothing else moves a running run at the same attempt.
    """
    if not outcomes:
        return []
    groups: dict[tuple[_Write, bool], list[dict[str, Any]]] = {}
    for outcome in outcomes:
        groups.setdefault(_shape(outcome), []).append(_params(outcome))
    matched = 0
    for (kind, with_checkpoint), params in groups.items():
        matched += conn.execute(_record_statement(kind, with_checkpoint), params).rowcount or 0
    if matched == len(outcomes):
        return [True] * len(outcomes)
    r = job_runs.c
    keys = [(o.job_id, o.scheduled_for, o.attempt) for o in outcomes]
    ours = {
        (row.job_id, row.scheduled_for, row.attempt)
        for row in conn.execute(
            select(r.job_id, r.scheduled_for, r.attempt).where(
                _keys_in((r.job_id, r.scheduled_for, r.attempt), keys), r.state != RunState.RUNNING
            )
        )
    }
    return [key in ours for key in keys]


class _Write(StrEnum):
    """The shapes of an outcome's UPDATE: ``record_many`` runs one cached statement per shape (the values
    are only cache keys, never stored)."""

    RETRY = auto()  # back to queued behind its backoff, one more failure counted
    HAND_BACK = auto()  # back to queued as it stands, for another worker to resume (a worker's SIGTERM)
    FAILED = auto()  # finished as failed: one more failure counted
    FINISHED = auto()  # finished in any other final state


def _shape(outcome: Outcome) -> tuple[_Write, bool]:
    if outcome.state == RunState.QUEUED:
        kind = _Write.RETRY if outcome.retry_after is not None else _Write.HAND_BACK
    else:
        kind = _Write.FAILED if outcome.state == RunState.FAILED else _Write.FINISHED
    return kind, outcome.save_checkpoint


# Outcome fields bound as they are; ``_params`` adds the ones that need a conversion first.
_BOUND_AS_IS = (
    "job_id",
    "scheduled_for",
    "attempt",
    "state",
    "exit_status",
    "reason",
    "checkpoint",
    "output_size",
)


def _params(o: Outcome) -> dict[str, Any]:
    """The bind parameters of ``_record_statement``: each field as ``b_<field>``."""
    params = {f"b_{name}": getattr(o, name) for name in _BOUND_AS_IS}
    params["b_output_tail"] = _storable(o.output_tail)
    params["b_error"] = _storable(o.error)
    params["b_retry_after"] = float(o.retry_after or 0.0)
    return params


def _storable(text: str | None) -> str | None:
    """NUL as U+FFFD, like an undecodable byte: PostgreSQL's text refuses NUL, and one refused outcome would
    fail the worker's whole batch on every retry, so the run would be taken over and re-run forever."""
    return None if text is None else text.replace("\x00", "\ufffd")


@functools.lru_cache(maxsize=16)
def _record_statement(kind: _Write, with_checkpoint: bool) -> Any:
    r = job_runs.c
    values: dict[str, Any] = {"exclusive": None}
    if with_checkpoint:
        values["checkpoint"] = bindparam("b_checkpoint", type_=job_runs.c.checkpoint.type)
    if kind in (_Write.RETRY, _Write.HAND_BACK):
        values.update(state=RunState.QUEUED, worker=None, heartbeat_at=None)
    if kind is _Write.RETRY:
        values.update(
            failures=r.failures + 1,
            not_before=db_now_plus(bindparam("b_retry_after", type_=Float)),
            exit_status=bindparam("b_exit_status"),
            output_tail=bindparam("b_output_tail"),
            output_size=bindparam("b_output_size", type_=BigInteger),
            error=bindparam("b_error"),
        )
    if kind in (_Write.FINISHED, _Write.FAILED):
        values.update(
            state=bindparam("b_state"),
            finished_at=db_now(),
            exit_status=bindparam("b_exit_status"),
            output_tail=bindparam("b_output_tail"),
            output_size=bindparam("b_output_size", type_=BigInteger),
            error=bindparam("b_error"),
            reason=bindparam("b_reason"),
        )
    if kind is _Write.FAILED:
        values["failures"] = r.failures + 1
    return (
        update(job_runs)
        .where(
            r.job_id == bindparam("b_job_id"),
            r.scheduled_for == bindparam("b_scheduled_for"),
            r.attempt == bindparam("b_attempt"),
            r.state == RunState.RUNNING,
        )
        .values(**values)
    )
