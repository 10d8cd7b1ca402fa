"""What one `missed`, `status` or `replay` read looks at: the ``Lookup`` asked for, and the span of ticks it
resolves to per job (by default since the job's definition, at most a week back, until the catch-up grace
before now; ``--since``/``--until`` narrow or move it). Pure: ``store.snapshot`` reads the rows of these spans
and ``inspect.missed`` explains them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedctl.jobs.job import DEFAULT_CATCH_UP_GRACE, DEFAULT_LEASE_NAME
from schedctl.store.rows import StateRecord

LOOKBACK = timedelta(days=7)  # the default window never reaches further back than this
TINY = timedelta(microseconds=1)


@dataclass(frozen=True)
class Lookup:
    """The window asked for (None: each job's default), the database's now, and how late ticks are judged.
    One frozen value that the readers in ``inspect`` and ``store.snapshot`` pass along instead of five
    parameters each."""

    now: datetime
    since: datetime | None = None
    until: datetime | None = None
    grace: float | None = None  # seconds; None: the grace the latest leader recorded
    lease_name: str = DEFAULT_LEASE_NAME  # whose terms say who led when
    late: bool = False  # also the unrecorded ticks an explicit ``until`` reaches past the grace, as late


@dataclass(frozen=True)
class TickSpan:
    """Ticks ``after < t < until``: the span a job's ticks are looked up in (not the planner's catch-up Window)."""

    after: datetime
    until: datetime


def default_window(
    state: StateRecord | None,
    first_dispatch: datetime | None,
    now: datetime,
    grace: float = DEFAULT_CATCH_UP_GRACE,
) -> TickSpan:
    """Since the job's definition (or, with no state row, its first dispatch), at most ``LOOKBACK`` back,
    until the grace before now. Before the history mark only the lasting record of missed ticks speaks."""
    floor = now - LOOKBACK
    end = now - timedelta(seconds=grace)
    if state is None and first_dispatch is None:
        # Nobody ever dispatched or saw the job: no tick can be said to be missed without a --since.
        return TickSpan(after=end, until=end)
    starts = [floor]
    if state is not None:
        starts.append(state.defined_at)
    elif first_dispatch is not None:
        starts.append(first_dispatch - TINY)  # the first dispatched tick itself is in the window
    return TickSpan(after=max(starts), until=end)


def resolve_window(
    state: StateRecord | None,
    first_dispatch: datetime | None,
    since: datetime | None,
    until: datetime | None,
    now: datetime,
    grace: float = DEFAULT_CATCH_UP_GRACE,
) -> TickSpan:
    """The window a command looks at: the default, narrowed or moved by ``--since`` (inclusive) and ``--until``
    (exclusive); never closer to now than the grace (younger ticks: see ``younger_window``)."""
    base = default_window(state, first_dispatch, now, grace)
    after = base.after if since is None else since - TINY
    end = base.until if until is None else min(until, base.until)
    return TickSpan(after=after, until=end)


def younger_window(window: TickSpan, until: datetime | None, now: datetime) -> TickSpan | None:
    """The ticks younger than the grace: ``[window end, until)``, ``until`` at most now (default: now, included).

    The leader may still dispatch a tick there, so only what it already recorded (a skip) is missed; the
    others are late, listed only for an explicit ``--until`` (``Lookup.late``)."""
    end = now + TINY if until is None else min(until, now + TINY)
    if end <= window.until:
        return None
    return TickSpan(after=max(window.after, window.until - TINY), until=end)
