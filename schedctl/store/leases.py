"""The lease tables' statements: ``scheduler_lease`` (who leads now) and ``lease_terms`` (who led when).

The election rule, its retries and its log lines are ``schedctl.leader.lease``'s; here is only how each step is
said to the database. Every instant compared or stored is the database's (``db_now()``), never this host's.
``fence``/``fence_commit`` bracket every fenced write transaction (``store.dispatch``); docs/guarantees.md has
the whole argument.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any

from sqlalchemy import and_, case, func, literal, or_, select, update
from sqlalchemy.engine import Connection

from schedctl.errors import LeaseTooShort, NotLeader
from schedctl.jobs.job import LeaseEndReason
from schedctl.store import wake
from schedctl.store.dialect import db_now, db_now_plus, insert_ignore, now_plus
from schedctl.store.rows import LeaseRecord, TermRecord
from schedctl.store.schema import lease_terms, scheduler_lease

# The column widths of schema.py: a longer name or holder would be truncated by MySQL's INSERT IGNORE.
NAME_WIDTH: int = scheduler_lease.c.name.type.length  # type: ignore[attr-defined]
HOLDER_WIDTH: int = scheduler_lease.c.holder.type.length  # type: ignore[attr-defined]


def lease_query(name: str, full: bool = False) -> Any:
    """The lease row (holder, term, expires_at; with ``full`` also acquired_at, renewed_at) and ``now``."""
    columns = [scheduler_lease.c.holder, scheduler_lease.c.term, scheduler_lease.c.expires_at]
    if full:
        columns += [scheduler_lease.c.acquired_at, scheduler_lease.c.renewed_at]
    return select(*columns, db_now().label("now")).where(scheduler_lease.c.name == name)


def lease_row(conn: Connection, name: str) -> Any:
    """The whole lease row with the database's now, or None when the lease was never taken."""
    return conn.execute(lease_query(name, full=True)).one_or_none()


def take(conn: Connection, name: str, identity: str, duration: float) -> bool:
    """The election: one conditional UPDATE, or the first INSERT. True when this candidate now holds it."""
    lease = scheduler_lease.c
    # Live means strictly before its expiry, the same test fence() applies; so a lease is free from the
    # instant it expires. A release writes expires_at = now, and a take-over read in that same clock tick
    # must see it free: SQLite's clock has millisecond steps, and a coarser server clock is equally legal.
    # Hence `<=` below, never `<`. Released or lapsed, the next holder starts a new term, even its old one.
    still_mine = and_(lease.holder == identity, lease.expires_at > db_now())
    # MySQL evaluates SET assignments left to right, each seeing the ones before it: the CASEs must read
    # the old holder and expiry, so they come first and holder/expires_at last.
    stmt = (
        update(scheduler_lease)
        .where(lease.name == name, or_(lease.holder == identity, lease.expires_at <= db_now()))
        .ordered_values(
            (lease.term, case((still_mine, lease.term), else_=lease.term + 1)),
            (lease.acquired_at, case((still_mine, lease.acquired_at), else_=db_now())),
            (lease.renewed_at, db_now()),
            (lease.expires_at, now_plus(duration)),
            (lease.holder, identity),
        )
    )
    # rowcount is rows matched on every backend (the PyMySQL dialect sets CLIENT_FOUND_ROWS).
    if conn.execute(stmt).rowcount == 1:
        return True
    # No row yet (or someone else's live lease: then the primary key makes this a no-op). A term number
    # continues the history even if someone deleted the lease row.
    first_term = select(func.coalesce(func.max(lease_terms.c.term), 0) + 1).where(lease_terms.c.name == name)
    row = dict(
        name=name,
        holder=identity,
        term=first_term.scalar_subquery(),
        acquired_at=db_now(),
        renewed_at=db_now(),
        expires_at=now_plus(duration),
    )
    return insert_ignore(conn, scheduler_lease, [row]) == 1


def stamp_new_term(conn: Connection, name: str, duration: float) -> Any:
    """Date a new term from now, when this transaction holds the row, and return the row as it now is.

    The take-over's UPDATE computed its instants before it may have waited for the row (MySQL's clock is
    the statement's start; PostgreSQL's new row is built before the lock wait): a history that starts the
    term then would claim a hand-over that never happened. Row-locked by that UPDATE, this cannot wait.
    """
    lease = scheduler_lease.c
    conn.execute(
        update(scheduler_lease)
        .where(lease.name == name)
        .values(acquired_at=db_now(), renewed_at=db_now(), expires_at=now_plus(duration))
    )
    return conn.execute(lease_query(name, full=True)).one()


def record_renewal(conn: Connection, name: str, identity: str, row: Any) -> bool:
    """Copy the renewal into the term's history row; False when the term is new (no row yet)."""
    stmt = (
        update(lease_terms)
        .where(lease_terms.c.name == name, lease_terms.c.term == row.term, lease_terms.c.holder == identity)
        .values(renewed_at=row.renewed_at, expires_at=row.expires_at)
    )
    return bool(conn.execute(stmt).rowcount == 1)


def start_term(
    conn: Connection,
    name: str,
    identity: str,
    row: Any,
    *,
    catch_up_grace: float | None,
    schedctl_version: str,
    tzdata_version: str,
) -> str | None:
    """Close the terms before this one and open this one. Returns the previous term's tzdata version."""
    terms = lease_terms.c
    previous = conn.execute(
        select(terms.tzdata_version)
        .where(terms.name == name, terms.term < row.term)
        .order_by(terms.term.desc())
        .limit(1)
    ).scalar_one_or_none()
    # A term still open here was not released: its holder stopped renewing, and it ended when it lapsed.
    conn.execute(
        update(lease_terms)
        .where(terms.name == name, terms.term < row.term, terms.ended_at.is_(None))
        .values(ended_at=terms.expires_at, end_reason=LeaseEndReason.EXPIRED)
    )
    conn.execute(
        lease_terms.insert().values(
            name=name,
            term=row.term,
            holder=identity,
            acquired_at=row.acquired_at,
            renewed_at=row.renewed_at,
            expires_at=row.expires_at,
            schedctl_version=schedctl_version,
            tzdata_version=tzdata_version,
            catch_up_grace=catch_up_grace,
        )
    )
    return previous


def release(conn: Connection, name: str, identity: str, term: int) -> bool:
    """End ``identity``'s ``term`` now, in the lease row and its history; False when it was not ours."""
    mine = and_(
        scheduler_lease.c.name == name,
        scheduler_lease.c.holder == identity,
        scheduler_lease.c.term == term,
    )
    # Never later than it was: releasing a lease that already lapsed must not extend it.
    now_or_earlier = case(
        (scheduler_lease.c.expires_at > db_now(), db_now()), else_=scheduler_lease.c.expires_at
    )
    released = (
        conn.execute(update(scheduler_lease).where(mine).values(expires_at=now_or_earlier)).rowcount == 1
    )
    if released:
        # The very instant written to the lease row, so the history and the lease agree exactly.
        released_at = (
            select(scheduler_lease.c.expires_at).where(scheduler_lease.c.name == name).scalar_subquery()
        )
        conn.execute(
            update(lease_terms)
            .where(lease_terms.c.name == name, lease_terms.c.term == term, lease_terms.c.ended_at.is_(None))
            .values(expires_at=released_at, ended_at=released_at, end_reason=LeaseEndReason.RELEASED)
        )
    return bool(released)


def fence(conn: Connection, name: str, identity: str, term: int) -> None:
    """Inside the caller's transaction: refuse unless ``identity`` holds the lease in ``term``, unexpired.

    The shared row lock (FOR SHARE / LOCK IN SHARE MODE; SQLite's BEGIN IMMEDIATE serialises writers
    already) lasts until the caller's transaction ends, so no one can take the lease over in between.
    """
    row = conn.execute(_fence_query(name)).one_or_none()
    if row is None:
        raise NotLeader(f"lease {name!r} has no holder; term {term} is not current")
    if row.holder != identity or row.term != term:
        raise NotLeader(
            f"lease {name!r} is held by {row.holder} in term {row.term}, not by {identity} in term {term}"
        )
    if row.expires_at <= row.now:
        raise NotLeader(f"lease {name!r} term {term} lapsed at {row.expires_at.isoformat()}")


def fence_commit(
    conn: Connection, name: str, identity: str, term: int, margin: float, wake_workers: bool = False
) -> None:
    """The last statement of a fenced transaction: the lease must outlive this instant by ``margin``.

    ``margin`` is the store's commit bound: the server aborts this transaction if its COMMIT arrives
    later than that after this statement, so a commit can only happen while the term is still live.
    The row lock taken by ``fence()`` is already ours, so this statement waits for nothing.
    ``wake_workers``: the transaction queued runs, so this statement also carries the workers' wake-up
    (``wake.notify_columns``), evaluated only when the lease row matches.
    """
    notify = conn.dialect.name if wake_workers else None
    row = conn.execute(_commit_query(name, identity, term, margin, notify)).first()
    if row is None:
        raise NotLeader(f"lease {name!r} term {term} is no longer held by {identity}")
    if not row.long_enough:
        raise LeaseTooShort(f"lease {name!r} term {term} expires within the commit bound of {margin:g} s")


# A leader runs these two statements in every fenced transaction, with the same values all term: built once,
# they skip SQLAlchemy's construction and cache-key walk, which cost more client CPU than the round trip.
@functools.lru_cache(maxsize=16)
def _fence_query(name: str) -> Any:
    return lease_query(name).with_for_update(read=True)


@functools.lru_cache(maxsize=16)
def _commit_query(name: str, identity: str, term: int, margin: float, notify: str | None) -> Any:
    """``notify``: the dialect whose wake-up columns ride along (None: none), so that variant is cached too."""
    lease = scheduler_lease.c
    long_enough = (lease.expires_at > db_now_plus(literal(float(margin)))).label("long_enough")
    query = select(lease.term, long_enough).where(
        lease.name == name, lease.holder == identity, lease.term == term
    )
    return query.add_columns(*wake.notify_columns(notify)) if notify else query


def terms(conn: Connection, name: str, limit: int) -> list[TermRecord]:
    """The last ``limit`` rows of the lease's history, newest first."""
    query = (
        select(lease_terms).where(lease_terms.c.name == name).order_by(lease_terms.c.term.desc()).limit(limit)
    )
    return [term_record(row) for row in conn.execute(query)]


def term_record(row: Any) -> TermRecord:
    """A ``lease_terms`` row as a record (the one mapper of that table)."""
    return TermRecord(**{name: getattr(row, name) for name in _TERM_FIELDS})


def lease_record(name: str, row: Any) -> LeaseRecord:
    """A ``scheduler_lease`` row (``lease_row``'s, or the whole row) as a record (the one mapper of that
    table)."""
    return LeaseRecord(name, **{field: getattr(row, field) for field in _LEASE_FIELDS})


_TERM_FIELDS = tuple(f.name for f in fields(TermRecord))
_LEASE_FIELDS = tuple(f.name for f in fields(LeaseRecord) if f.name != "name")
