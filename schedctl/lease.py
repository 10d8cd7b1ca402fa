"""Leader election by lease, judged by the database's clock.

The seed's rule: a candidate wins if the lease is already its own or has expired, in one statement the
database serialises (the conditional UPDATE below; an INSERT under the primary key when there is no row
yet). Nothing here reads this host's clock: every instant compared or stored comes from ``db_now()``, so
a replica whose clock is minutes off elects and fences exactly like the others.

``term`` grows by one every time the lease changes hands (or is taken again after it lapsed or was
released); it is the fencing token. ``fence()`` is called first inside every dispatch transaction: it holds
a shared lock on the lease row until that transaction ends, so a takeover (an UPDATE of that row) waits
for the dispatch to commit, and a stale leader's dispatch is refused before it writes anything.
``fence_commit()`` is the last statement before COMMIT: it refuses unless the lease outlives it by the
commit bound, and the server ends a transaction whose COMMIT comes later than that bound (the session's
idle-in-transaction timeout, ``store.bounds``), so nothing written under a term commits after the term
expired by the database's clock. docs/guarantees.md has the whole argument.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, literal, or_, select, update
from sqlalchemy.engine import Connection

from schedctl.errors import LeaseTooShort, NotLeader, StoreConflict, UsageError
from schedctl.job import LeaseEndReason
from schedctl.settings import DEFAULT_LEASE_NAME
from schedctl.store import Store
from schedctl.store.dialect import db_now, db_now_plus, insert_ignore, now_plus
from schedctl.store.schema import lease_terms, scheduler_lease

log = logging.getLogger("schedctl.lease")


@dataclass(frozen=True)
class LeaseResult:
    """The outcome of one acquire-or-renew attempt, as the database saw it.

    ``term``/``expires_at``/``holder`` describe the lease after the attempt, whoever holds it (None when
    there is no lease row). ``previous_tzdata`` is set on a new term: the tzdata version the previous term's
    holder recorded, so the new leader can warn when the two zone databases differ.
    """

    held: bool
    term: int | None
    new_term: bool
    expires_at: datetime | None
    db_now: datetime
    holder: str | None = None
    previous_tzdata: str | None = None


@dataclass(frozen=True)
class LeaseState:
    """The lease row as ``schedctl leases`` shows it; every instant is the database's."""

    name: str
    holder: str
    term: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    db_now: datetime

    @property
    def expires_in(self) -> float:
        """Seconds until it lapses; negative once it has."""
        return (self.expires_at - self.db_now).total_seconds()

    @property
    def renewed_ago(self) -> float:
        return (self.db_now - self.renewed_at).total_seconds()

    @property
    def duration(self) -> float:
        """The lease duration its holder asked for at its last renewal."""
        return (self.expires_at - self.renewed_at).total_seconds()

    @property
    def transitions(self) -> int:
        """Kubernetes' leaseTransitions: terms start at 1, so every later term is one change of hands."""
        return self.term - 1

    @property
    def live(self) -> bool:
        return self.expires_in > 0


@dataclass(frozen=True)
class Term:
    """One row of the lease history."""

    name: str
    term: int
    holder: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None  # a LeaseEndReason, None while it lasts
    schedctl_version: str
    tzdata_version: str
    catch_up_grace: float | None = None  # seconds; None for terms recorded before schema 0003


def acquire_or_renew(
    store: Store, name: str, identity: str, duration: float, catch_up_grace: float | None = None
) -> LeaseResult:
    """Take the lease if it is free or lapsed, renew it if it is ours; one transaction.

    ``duration`` is in seconds, counted from the database's now. ``catch_up_grace`` is recorded with a new
    term, so `missed`, `status` and `replay` judge that term's ticks by the grace its leader used.
    """
    _check_names(name, identity)
    for attempt in range(CONFLICT_RETRIES):
        try:
            return _acquire_or_renew(store, name, identity, duration, catch_up_grace)
        except StoreConflict:
            # MySQL may pick a renewal as the deadlock victim against a standby's attempt on the same row;
            # losing a renewal to that would cost a leader its lease for nothing.
            if attempt == CONFLICT_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


CONFLICT_RETRIES = 3


def _acquire_or_renew(
    store: Store, name: str, identity: str, duration: float, catch_up_grace: float | None
) -> LeaseResult:
    with store.begin() as conn:
        won = _take(conn, name, identity, duration)
        row = conn.execute(_lease_query(name, full=True)).one_or_none()
        if row is None:  # pragma: no cover - only when someone deletes the row between the two statements
            return LeaseResult(False, None, False, None, conn.execute(select(db_now())).scalar_one())
        if not won or row.holder != identity:
            return LeaseResult(False, row.term, False, row.expires_at, row.now, holder=row.holder)
        if _record_renewal(conn, name, identity, row):
            return LeaseResult(True, row.term, False, row.expires_at, row.now, holder=identity)
        row = _stamp_new_term(conn, name, duration)
        previous = _start_term(conn, name, identity, row, catch_up_grace)
    log.info(
        "acquired lease %s, term %s",
        name,
        row.term,
        extra={"event": "lease_acquired", "lease": name, "term": row.term, "holder": identity},
    )
    return LeaseResult(
        True, row.term, True, row.expires_at, row.now, holder=identity, previous_tzdata=previous
    )


def release(store: Store, name: str, identity: str, term: int) -> bool:
    """Give the lease up now, so a standby takes it at its next attempt instead of after a whole lease.

    False when it was not ours (any more) to release.
    """
    with store.begin() as conn:
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
                .where(
                    lease_terms.c.name == name, lease_terms.c.term == term, lease_terms.c.ended_at.is_(None)
                )
                .values(expires_at=released_at, ended_at=released_at, end_reason=LeaseEndReason.RELEASED)
            )
    if released:
        log.info(
            "released lease %s, term %s",
            name,
            term,
            extra={"event": "lease_released", "lease": name, "term": term, "holder": identity},
        )
    return released


def fence(conn: Connection, name: str, identity: str, term: int) -> None:
    """Inside the caller's transaction: refuse unless ``identity`` holds the lease in ``term``, unexpired.

    The shared row lock (FOR SHARE / LOCK IN SHARE MODE; SQLite's BEGIN IMMEDIATE serialises writers
    already) lasts until the caller's transaction ends, so no one can take the lease over in between.
    """
    row = conn.execute(_lease_query(name).with_for_update(read=True)).one_or_none()
    if row is None:
        raise NotLeader(f"lease {name!r} has no holder; term {term} is not current")
    if row.holder != identity or row.term != term:
        raise NotLeader(
            f"lease {name!r} is held by {row.holder} in term {row.term}, not by {identity} in term {term}"
        )
    if row.expires_at <= row.now:
        raise NotLeader(f"lease {name!r} term {term} lapsed at {row.expires_at.isoformat()}")


def fence_commit(conn: Connection, name: str, identity: str, term: int, margin: float) -> None:
    """The last statement of a fenced transaction: the lease must outlive this instant by ``margin``.

    ``margin`` is the store's commit bound: the server aborts this transaction if its COMMIT arrives
    later than that after this statement, so a commit can only happen while the term is still live.
    The row lock taken by ``fence()`` is already ours, so this statement waits for nothing.
    """
    lease = scheduler_lease.c
    query = select(lease.term, (lease.expires_at > db_now_plus(literal(float(margin)))).label("long_enough"))
    row = conn.execute(query.where(lease.name == name, lease.holder == identity, lease.term == term)).first()
    if row is None:
        raise NotLeader(f"lease {name!r} term {term} is no longer held by {identity}")
    if not row.long_enough:
        raise LeaseTooShort(f"lease {name!r} term {term} expires within the commit bound of {margin:g} s")


def current(store: Store, name: str = DEFAULT_LEASE_NAME) -> LeaseState | None:
    with store.read() as conn:
        return _state(name, conn.execute(_lease_query(name, full=True)).one_or_none())


def history(store: Store, name: str = DEFAULT_LEASE_NAME, limit: int = 10) -> list[Term]:
    """The last ``limit`` terms, newest first."""
    with store.read() as conn:
        return _terms(conn, name, limit)


def _state(name: str, row: Any) -> LeaseState | None:
    if row is None:
        return None
    return LeaseState(
        name=name,
        holder=row.holder,
        term=row.term,
        acquired_at=row.acquired_at,
        renewed_at=row.renewed_at,
        expires_at=row.expires_at,
        db_now=row.now,
    )


def _terms(conn: Connection, name: str, limit: int) -> list[Term]:
    query = (
        select(lease_terms).where(lease_terms.c.name == name).order_by(lease_terms.c.term.desc()).limit(limit)
    )
    return [Term(**row._mapping) for row in conn.execute(query)]


@dataclass(frozen=True)
class LeaseReport:
    """What ``schedctl leases`` shows: the lease row (None if never held) and the last terms, newest first."""

    name: str
    state: LeaseState | None
    terms: list[Term]
    db_now: datetime


def report(store: Store, name: str = DEFAULT_LEASE_NAME, limit: int = 10) -> LeaseReport:
    with store.read() as conn:
        row = conn.execute(_lease_query(name, full=True)).one_or_none()
        now = row.now if row is not None else conn.execute(select(db_now())).scalar_one()
        terms = _terms(conn, name, limit)
    return LeaseReport(name=name, state=_state(name, row), terms=terms, db_now=now)


def db_time(store: Store) -> datetime:
    with store.read() as conn:
        return conn.execute(select(db_now())).scalar_one()  # type: ignore[no-any-return]


def _check_names(name: str, identity: str) -> None:
    # MySQL's INSERT IGNORE would truncate an over-long value with a warning, and the holder would never
    # recognise its own lease: refuse up front, at the column widths of schema.py.
    if not 0 < len(name) <= scheduler_lease.c.name.type.length:  # type: ignore[attr-defined]
        raise UsageError(f"lease name must be 1 to 64 characters, not {len(name)}")
    if not 0 < len(identity) <= scheduler_lease.c.holder.type.length:  # type: ignore[attr-defined]
        raise UsageError(
            f"holder identity must be 1 to 255 characters, not {len(identity)}: {identity[:40]}..."
        )


def _lease_query(name: str, full: bool = False) -> Any:
    columns = [scheduler_lease.c.holder, scheduler_lease.c.term, scheduler_lease.c.expires_at]
    if full:
        columns += [scheduler_lease.c.acquired_at, scheduler_lease.c.renewed_at]
    return select(*columns, db_now().label("now")).where(scheduler_lease.c.name == name)


def _take(conn: Connection, name: str, identity: str, duration: float) -> bool:
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


def _stamp_new_term(conn: Connection, name: str, duration: float) -> Any:
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
    return conn.execute(_lease_query(name, full=True)).one()


def _record_renewal(conn: Connection, name: str, identity: str, row: Any) -> bool:
    """Copy the renewal into the term's history row; False when the term is new (no row yet)."""
    stmt = (
        update(lease_terms)
        .where(lease_terms.c.name == name, lease_terms.c.term == row.term, lease_terms.c.holder == identity)
        .values(renewed_at=row.renewed_at, expires_at=row.expires_at)
    )
    return bool(conn.execute(stmt).rowcount == 1)


def _start_term(
    conn: Connection, name: str, identity: str, row: Any, catch_up_grace: float | None = None
) -> str | None:
    """Close the terms before this one and open this one. Returns the previous term's tzdata version."""
    from schedctl import __version__

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
            schedctl_version=__version__,
            tzdata_version=tzdata_version(),
            catch_up_grace=catch_up_grace,
        )
    )
    return previous


def tzdata_version() -> str:
    """The zone data this process computes fire times with: the tzdata package ``zones.load_zone`` reads,
    never the host's files (``tzdata 2026f``). Two replicas on different zone data can put the same
    wall-clock tick at different instants, so each term records which one its leader had."""
    from schedctl.zones import data_version

    return f"tzdata {data_version()}"[:32]
