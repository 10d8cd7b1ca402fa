"""What one `missed`, `status` or `replay` read is about, as one frozen value: the readers in ``missed``,
``status``, ``replay`` and ``store.snapshot`` pass it along instead of the same five parameters each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schedctl.settings import DEFAULT_LEASE_NAME


@dataclass(frozen=True)
class Lookup:
    """The window asked for (None: each job's default), the database's now, and how late ticks are judged."""

    now: datetime
    since: datetime | None = None
    until: datetime | None = None
    grace: float | None = None  # seconds; None: the grace the latest leader recorded
    lease_name: str = DEFAULT_LEASE_NAME  # whose terms say who led when
    late: bool = False  # also the ticks an explicit ``until`` reaches past the grace, as late
