"""What the leader's loop is tuned by, built by ``schedctl serve`` from its options (defaults documented here)."""

from __future__ import annotations

from dataclasses import dataclass

from schedctl.jobs.job import DEFAULT_CATCH_UP_GRACE, DEFAULT_LEASE_NAME


@dataclass(frozen=True)
class SchedulerSettings:
    identity: str
    lease_name: str = DEFAULT_LEASE_NAME
    lease_duration: float = 15.0  # seconds a lease lasts past its last renewal, by the database's clock
    renew_interval: float = 5.0  # renew well inside the lease, not at its edge
    catch_up_grace: float = DEFAULT_CATCH_UP_GRACE  # a younger tick is late, not missed: dispatched normally
    batch_size: int = 5000  # run rows per dispatch transaction; each batch re-checks the lease term
