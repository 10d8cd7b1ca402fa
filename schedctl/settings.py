"""Settings of the long-running loops, built by ``schedctl serve`` from its options (defaults documented here)."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from schedctl.job import Role

if TYPE_CHECKING:
    from schedctl.mail import SmtpServer


def default_identity() -> str:
    """``HOST:PID:SUFFIX``; the random suffix keeps a reused PID in a new container from looking like the old holder."""
    return (
        os.environ.get("SCHEDCTL_IDENTITY") or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
    )


# A tick younger than this is late, not missed. Defined once: the leader records the grace it uses with its
# term, and readers fall back to this only for terms recorded before that (schema revision 0003).
DEFAULT_CATCH_UP_GRACE = 60.0
DEFAULT_LEASE_NAME = "cron"  # one lease per installation; `--lease-name` / `--name` change it everywhere
DEFAULT_KEEP_MISSED = 7 * 86400.0  # seconds skipped/missed evidence is kept, whatever the run history limits


@dataclass(frozen=True)
class SchedulerSettings:
    identity: str
    lease_name: str = DEFAULT_LEASE_NAME
    lease_duration: float = 15.0  # seconds a lease lasts past its last renewal, by the database's clock
    renew_interval: float = 5.0  # renew well inside the lease, not at its edge
    catch_up_grace: float = DEFAULT_CATCH_UP_GRACE  # a younger tick is late, not missed: dispatched normally
    batch_size: int = 5000  # run rows per dispatch transaction; each batch re-checks the lease term


@dataclass(frozen=True)
class WorkerSettings:
    identity: str
    slots: int = 4  # runs executed at once by this process
    poll_interval: float = 1.0  # seconds between claim attempts when idle (PostgreSQL also wakes on NOTIFY)
    heartbeat_interval: float = 15.0
    stale_after: float = 60.0  # a running run whose heartbeat is older than this is taken over
    labels: dict[str, str] = field(default_factory=dict)  # claims only runs whose job labels are a subset
    run_as_job_user: bool = False  # as root, run each job as its `user`
    successful_history: int = 3  # finished runs kept per job, like Kubernetes' successfulJobsHistoryLimit
    failed_history: int = 5  # like failedJobsHistoryLimit
    keep_missed: float = DEFAULT_KEEP_MISSED  # seconds skipped and missed ticks stay explainable by `missed`
    output_tail_bytes: int = 8192  # how much of stdout/stderr is stored on the run
    prune_interval: float = 60.0  # seconds between history prunes (and once more at shutdown)
    log_output: bool = False  # log each run's output tail when it ends (`serve --log-output`)
    role: str = Role.WORKER  # as recorded in the worker registry: Role.ALL when this process also schedules
    smtp: SmtpServer | None = None  # where run-output mail goes (`serve --smtp`); None: mail is not sent
