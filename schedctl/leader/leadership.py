"""Keeping the scheduler's lease: acquire or renew it, know by our own clock whether it still holds, resign.

A leader stops writing before its lease could have expired by its own monotonic clock (``_safe``), and every
write it makes is fenced with its term (``_fence``). "Now" for planning is the database's clock, anchored at
each renewal and carried forward by this process's monotonic clock (``now``), so a replica whose wall clock is
minutes off plans the same instants as any other. What is planned under a term is the subclass's
(``Scheduler``): it is told when a term begins and when leading stops.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from schedctl.errors import StoreConflict, StoreError
from schedctl.leader import lease
from schedctl.leader.settings import SchedulerSettings
from schedctl.observability import health, metrics
from schedctl.store import Store
from schedctl.store.dispatch import Fence
from schedctl.timing.backoff import Backoff
from schedctl.timing.clock import Clock
from schedctl.timing.zones import tzdata_version

log = logging.getLogger("schedctl.scheduler")

BACKOFF_MIN = 0.5


def dispatch_window(lease_duration: float) -> float:
    """Seconds after a renewal began during which a leader with this lease may start a fenced write."""
    from schedctl.store.bounds import Bounds

    return lease_duration - min(1.0, 0.1 * lease_duration) - Bounds.for_lease(lease_duration).commit_margin


class Leadership:
    """The lease half of the scheduler loop."""

    def __init__(self, store: Store, settings: SchedulerSettings, clock: Clock, db_clock: bool) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self._db_clock = db_clock  # False only in tests that drive a FakeClock against a real database
        self._term: int | None = None  # the term we lead in; None while not leading
        self._renewed_at = float("-inf")  # monotonic time at which the last successful renewal STARTED
        self._next_renew = 0.0
        self._anchor: tuple[datetime, float] | None = None  # (database now, monotonic) at the last renewal
        # An outage lasts from the first failed call until a renewal and a leader's pass both succeed: a full
        # disk lets the lease row's in-place UPDATE through while every insert fails, and each such renewal
        # must not count as "reachable again" (it did: four log lines and a reset backoff every half second).
        self._db_down = False
        self._backoff = Backoff(BACKOFF_MIN, settings.renew_interval)
        self._standing_by: tuple[str | None, int | None] | None = None  # the holder we last said we wait for

    @property
    def leading(self) -> bool:
        return self._term is not None

    def _new_term(self) -> None:
        """A term began (or changed under a pass): what was planned under the old one is dropped."""

    def _stop_leading(self) -> None:
        """The lease is lost: nothing planned may be written any more."""

    # -- time --------------------------------------------------------------------------------------------
    def now(self) -> datetime:
        """The planning clock: the database's now, carried forward from the last renewal by monotonic time."""
        if not self._db_clock or self._anchor is None:
            return self.clock.now()
        db_at, mono_at = self._anchor
        return db_at + timedelta(seconds=self.clock.monotonic() - mono_at)

    def _margin(self) -> float:
        # Plus the commit bound: a dispatch begun later could not commit before the lease ends, and
        # lease.fence_commit would roll it back.
        return min(1.0, 0.1 * self.settings.lease_duration) + self.store.bounds.commit_margin

    def _safe(self) -> bool:
        """Leading, and sure by our own clock that the lease has not expired yet."""
        if self._term is None:
            return False
        return self.clock.monotonic() - self._renewed_at < self.settings.lease_duration - self._margin()

    # -- the lease ---------------------------------------------------------------------------------------
    def _renew(self) -> bool:
        """One acquire-or-renew; True when this process holds the lease afterwards."""
        s = self.settings
        started = self.clock.monotonic()
        try:
            result = lease.acquire_or_renew(
                self.store, s.lease_name, s.identity, s.lease_duration, catch_up_grace=s.catch_up_grace
            )
        except StoreConflict as exc:
            # The row's lock was not granted within the bounded wait: a cut-off session holds it until the
            # server ends it. Not an outage, and a holder keeps its term while _safe() says so: try again soon.
            metrics.LEASE_RENEWAL_FAILURES.inc()
            log.info("lease row busy, retrying: %s", exc, extra={"event": "lease_busy"})
            self._next_renew = self.clock.monotonic() + BACKOFF_MIN
            return False
        except StoreError as exc:
            metrics.LEASE_RENEWAL_FAILURES.inc()
            self._database_down(exc)
            return False
        finished = self.clock.monotonic()
        if self._db_down and not result.held:
            self._writes_succeeded()  # a standby writes nothing but its attempt: that is all it needs
        self._next_renew = started + s.renew_interval
        if not result.held:
            if self._term is not None:
                # A standby finding the lease taken is normal; only a holder losing it is a failure to alert on.
                metrics.LEASE_RENEWAL_FAILURES.inc()
                self._lost(f"held by {result.holder} in term {result.term}")
            self._note_standby(result)
            return False
        self._standing_by = None
        metrics.LEASE_RENEWALS.inc()
        self._renewed_at = started
        # The database read its now somewhere inside the round trip. Anchoring it at the reply's arrival makes
        # the planning clock lag the database's by at most the round trip and never run ahead of it: the middle
        # was the better guess on average, but a slow request leg then put it ahead, and a tick was dispatched
        # (and started) up to half a round trip early (the chaos audit saw 0.06 s on a loaded MariaDB).
        self._anchor = (result.db_now, finished)
        if self._term != result.term:
            self._became_leader(result)
        return True

    def _note_standby(self, result: lease.LeaseResult) -> None:
        """Say once that this process stands by, and again whenever the holder changes (not every renewal)."""
        holder = (result.holder, result.term)
        if holder == self._standing_by:
            return
        self._standing_by = holder
        until = result.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if result.expires_at else "-"
        log.info(
            "standing by: lease held by %s (term %s) until %s",
            result.holder,
            result.term,
            until,
            extra={"event": "standing_by", "holder": result.holder, "term": result.term},
        )

    def _became_leader(self, result: lease.LeaseResult) -> None:
        self._term = result.term
        self._new_term()
        metrics.LEADER.set(1)
        metrics.LEASE_TERM.set(result.term or 0)
        log.info(
            "became leader in term %s", result.term, extra={"event": "became_leader", "term": result.term}
        )
        mine = tzdata_version()
        if result.previous_tzdata and result.previous_tzdata != mine:
            log.warning(
                "tzdata %s here differs from %s used by the previous leader: the same wall-clock tick may fall "
                "at a different instant",
                mine,
                result.previous_tzdata,
                extra={"event": "tzdata_differs"},
            )

    def _writes_succeeded(self) -> None:
        """A leader's pass (or a standby's renewal) went through: an outage, if any, is over."""
        if self._db_down:
            self._db_down = False
            self._backoff.reset()
            health.store_working("scheduler")
            log.info("database reachable again", extra={"event": "db_available"})

    def _lost(self, why: str, quiet: bool = False) -> None:
        if self._term is not None and not quiet:
            log.warning("lost the lease (%s): stopped dispatching", why, extra={"event": "lost_lease"})
        self._term = None
        self._stop_leading()
        metrics.LEADER.set(0)

    def _database_down(self, exc: StoreError) -> None:
        health.store_failing("scheduler", str(exc))
        first = not self._db_down
        if first:
            self._db_down = True
            log.warning(
                "database unavailable, stopped dispatching and retrying: %s",
                exc,
                extra={"event": "db_unavailable"},
            )
        if self._term is not None:
            self._lost("database unavailable", quiet=not first)  # once per outage, not at every retry
        self._next_renew = self.clock.monotonic() + self._backoff.delay
        self._backoff.grow()

    def resign(self) -> None:
        if self._term is None:
            return
        term, self._term = self._term, None
        metrics.LEADER.set(0)
        for attempt in range(3):
            try:
                lease.release(self.store, self.settings.lease_name, self.settings.identity, term)
                return
            except StoreError as exc:
                # MySQL may pick the release as a deadlock victim against a standby's acquire: try again,
                # since a lease left to expire costs a whole lease duration of no dispatching.
                if attempt == 2:
                    log.warning("could not release the lease: %s", exc, extra={"event": "release_failed"})
                else:
                    self.clock.sleep(0.05)

    def _fence(self) -> Fence:
        assert self._term is not None
        return Fence(self.settings.lease_name, self.settings.identity, self._term)

    def _yield_to_renewal(self) -> bool:
        """Between two batches: renew when due, so 100,000 due ticks never cost the lease.

        False when this plan must not write any more (the lease is lost, or a new term began).
        """
        if self.clock.monotonic() >= self._next_renew or not self._safe():
            term = self._term
            self._renew()
            if not self._safe():
                self._lost("could not renew in time")
                return False
            if self._term != term:  # a new term: what was planned was planned under the old one
                self._new_term()
                return False
        return True
