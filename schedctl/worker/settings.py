"""What a worker's loop is tuned by, built by ``schedctl serve`` from its options (defaults documented here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from schedctl.jobs.job import Role
from schedctl.store.missedrecord import DEFAULT_KEEP_MISSED

if TYPE_CHECKING:
    from schedctl.worker.mail import SmtpServer


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
    # seconds between stores of running runs' new output (their tails), which `logs -f` follows; 0: at the end only
    output_interval: float = 2.0
    prune_interval: float = 60.0  # seconds between history prunes (and once more at shutdown)
    log_output: bool = False  # log each run's output tail when it ends (`serve --log-output`)
    role: str = Role.WORKER  # as recorded in the worker registry: Role.ALL when this process also schedules
    mail_hostname: str | None = None  # the host mail names (`serve --mail-hostname`); None: this host's name
    smtp: SmtpServer | None = None  # where run-output mail goes (`serve --smtp`); None: mail is not sent
