"""Leader election by lease, judged by the database's clock.

The seed's rule: a candidate wins if the lease is already its own or has expired, in one statement the
database serialises (the conditional UPDATE below; an INSERT under the primary key when there is no row
yet). Nothing here reads this host's clock: every instant compared or stored comes from ``db_now()``, so
a replica whose clock is minutes off elects and fences exactly like the others.

``term`` grows by one every time the lease changes hands (or is taken again after it lapsed or was
released); it is the fencing token. ``store.leases.fence()`` is called first inside every dispatch
transaction: it holds a shared lock on the lease row until that transaction ends, so a takeover (an UPDATE of
that row) waits for the dispatch to commit, and a stale leader's dispatch is refused before it writes
anything. ``store.leases.fence_commit()`` is the last statement before COMMIT: it refuses unless the lease
outlives it by the commit bound, and the server ends a transaction whose COMMIT comes later than that bound
(the session's idle-in-transaction timeout, ``store.bounds``), so nothing written under a term commits after
the term expired by the database's clock. docs/guarantees.md has the whole argument.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from schedctl.errors import StoreConflict, UsageError
from schedctl.jobs.job import DEFAULT_LEASE_NAME
from schedctl.store import Store, leases
from schedctl.store.dialect import select_db_now
from schedctl.store.rows import LeaseRecord, TermRecord
from schedctl.text.printable import cut
from schedctl.timing.zones import tzdata_version

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

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
        won = leases.take(conn, name, identity, duration)
        row = leases.lease_row(conn, name)
        if row is None:  # pragma: no cover - only when someone deletes the row between the two statements
            return LeaseResult(False, None, False, None, select_db_now(conn))
        if not won or row.holder != identity:
            return LeaseResult(False, row.term, False, row.expires_at, row.now, holder=row.holder)
        if leases.record_renewal(conn, name, identity, row):
            return LeaseResult(True, row.term, False, row.expires_at, row.now, holder=identity)
        row = leases.stamp_new_term(conn, name, duration)
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
        released = leases.release(conn, name, identity, term)
    if released:
        log.info(
            "released lease %s, term %s",
            name,
            term,
            extra={"event": "lease_released", "lease": name, "term": term, "holder": identity},
        )
    return released


def current(store: Store, name: str = DEFAULT_LEASE_NAME) -> LeaseRecord | None:
    """The lease row, lapsed or not; ``report`` has the database's now to judge it by."""
    with store.read() as conn:
        row = leases.lease_row(conn, name)
    return leases.lease_record(name, row) if row is not None else None


def history(store: Store, name: str = DEFAULT_LEASE_NAME, limit: int = 10) -> list[TermRecord]:
    """The last ``limit`` terms, newest first."""
    with store.read() as conn:
        return leases.terms(conn, name, limit)


@dataclass(frozen=True)
class LeaseReport:
    """What ``schedctl leases`` shows: the lease row (None if never held) and the last terms, newest first."""

    name: str
    state: LeaseRecord | None
    terms: list[TermRecord]
    db_now: datetime  # to judge ``state`` by (``held_at``, ``expires_in``)


def report(store: Store, name: str = DEFAULT_LEASE_NAME, limit: int = 10) -> LeaseReport:
    with store.read() as conn:
        row = leases.lease_row(conn, name)
        now = row.now if row is not None else select_db_now(conn)
        terms = leases.terms(conn, name, limit)
    state = leases.lease_record(name, row) if row is not None else None
    return LeaseReport(name=name, state=state, terms=terms, db_now=now)


def db_time(store: Store) -> datetime:
    with store.read() as conn:
        return select_db_now(conn)  # type: ignore[no-any-return]


def _check_names(name: str, identity: str) -> None:
    # MySQL's INSERT IGNORE would truncate an over-long value with a warning, and the holder would never
    # recognise its own lease: refuse up front, at the column widths of schema.py.
    if not 0 < len(name) <= leases.NAME_WIDTH:
        raise UsageError(f"lease name must be 1 to 64 characters, not {len(name)}")
    if not 0 < len(identity) <= leases.HOLDER_WIDTH:
        raise UsageError(
            f"holder identity must be 1 to 255 characters, not {len(identity)}: {cut(identity, 40)}"
        )


def _start_term(
    conn: Connection, name: str, identity: str, row: Any, catch_up_grace: float | None
) -> str | None:
    """Close the terms before this one and open this one. Returns the previous term's tzdata version."""
    from schedctl import __version__

    return leases.start_term(
        conn,
        name,
        identity,
        row,
        catch_up_grace=catch_up_grace,
        schedctl_version=__version__,
        tzdata_version=tzdata_version(),
    )
