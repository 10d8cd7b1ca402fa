"""Rows the store tests seed by hand, written once.

Tests import this as ``factories`` (``pythonpath = ["tests"]`` in pyproject's pytest options).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import insert

from schedctl.store.schema import lease_terms, scheduler_lease

LEASE_NAME = "cron"
# The seeded terms were last renewed this long before they expire, unless a test says otherwise.
RENEW_BEFORE_EXPIRY = timedelta(seconds=15)


def add_term(
    conn,
    term: int,
    holder: str,
    acquired: datetime,
    expires: datetime,
    ended: datetime | None = None,
    end_reason: str | None = None,
    *,
    current: bool = False,
    renewed: datetime | None = None,
    grace: float | None = None,
    tzdata: str = "2025b",
) -> None:
    """One leader term in lease_terms; with ``current``, also the live lease row it holds (replacing any)."""
    renewed = renewed if renewed is not None else expires - RENEW_BEFORE_EXPIRY
    conn.execute(
        insert(lease_terms).values(
            name=LEASE_NAME,
            term=term,
            holder=holder,
            acquired_at=acquired,
            renewed_at=renewed,
            expires_at=expires,
            ended_at=ended,
            end_reason=end_reason,
            schedctl_version="0.1.0",
            tzdata_version=tzdata,
            catch_up_grace=grace,
        )
    )
    if current:
        conn.execute(scheduler_lease.delete())
        conn.execute(
            insert(scheduler_lease).values(
                name=LEASE_NAME,
                holder=holder,
                term=term,
                acquired_at=acquired,
                renewed_at=renewed,
                expires_at=expires,
            )
        )
