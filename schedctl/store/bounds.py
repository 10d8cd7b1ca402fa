"""How long any database operation may take, on the client and on the server, derived from the lease.

A leader cut off (no RST) in the middle of a transaction keeps its row locks for as long as the *server*
keeps its session; Linux's own keepalive notices after about two hours. So every session tells the server
to abort what a lost client leaves behind, well before a standby's take-over is due:

- a transaction left idle (the client stopped sending) is ended after ``idle_in_transaction`` seconds;
- a statement waiting for a lock gives up after ``lock_wait`` seconds (the standby retries at its next turn);
- any statement ends after ``statement`` seconds;
- TCP keepalives and ``TCP_USER_TIMEOUT`` on both ends turn a silent peer into a closed connection.

``idle_in_transaction`` is also the *commit bound* of the fence (``leases.fence_commit``): a fenced
transaction commits only if its lease outlives the check by more than this bound, and the server aborts it
if the COMMIT arrives later than this bound after the check, so no write commits after its term expired.

Every value here is a default: an option given in the database URL wins (see ``connect_defaults``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import URL

DEFAULT_LEASE = 15.0  # SchedulerSettings.lease_duration's default; one-shot commands use the same bounds


@dataclass(frozen=True)
class Bounds:
    """Seconds. Built by ``for_lease``; the fields are what each backend is told."""

    idle_in_transaction: float
    lock_wait: float
    statement: float
    keepalive_idle: int
    keepalive_interval: int
    keepalive_count: int
    tcp_user_timeout: float
    connect: float = 5.0

    @classmethod
    def for_lease(cls, lease_duration: float = DEFAULT_LEASE) -> Bounds:
        lease = max(1.0, float(lease_duration))
        # Whole seconds: MariaDB's idle_transaction_timeout and innodb_lock_wait_timeout take no fractions,
        # and every backend must agree on the commit bound. A sixth of the lease: a standby's take-over
        # waits at most two of these behind a lost leader (its lock is gone one bound after the leader's
        # last statement, and a lock wait gives up after one), which keeps the new leader within
        # lease + renew + 3 s; at least 1 s, so a loaded client pausing between two statements of a
        # dispatch is not mistaken for a lost one.
        idle = float(max(1, math.ceil(lease / 6)))
        return cls(
            idle_in_transaction=idle,
            lock_wait=idle,
            # A backstop: statements that wait wait for locks (bounded above); this ends a runaway one.
            statement=max(10.0, 2 * lease),
            keepalive_idle=max(1, math.ceil(lease / 6)),
            keepalive_interval=1,
            keepalive_count=3,
            # Unacknowledged data (and unanswered keepalive probes) for this long closes the socket.
            tcp_user_timeout=max(2.0, lease / 2),
        )

    @property
    def commit_margin(self) -> float:
        """How much lease a fenced transaction must have left at its closing check (see leases.fence)."""
        # The idle bound, plus the time the closing statement itself may run after reading the clock
        # (it waits for nothing: the lease row is already locked by this transaction).
        return self.idle_in_transaction + 0.5

    @property
    def read(self) -> float:
        """A client-side bound on one reply: the longest statement plus a lock wait, plus slack."""
        return self.statement + self.lock_wait + 5.0


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def postgres_connect_args(bounds: Bounds, url: URL) -> dict[str, Any]:
    """libpq parameters: client-side keepalives and TCP_USER_TIMEOUT, and the server-side session settings
    as startup ``options``, so they cost no round trip. A parameter in the URL wins; the URL's own
    ``options`` come after ours, and PostgreSQL applies the last ``-c`` of a setting."""
    settings = {
        "idle_in_transaction_session_timeout": _ms(bounds.idle_in_transaction),
        "lock_timeout": _ms(bounds.lock_wait),
        "statement_timeout": _ms(bounds.statement),
        # The server's side of the same socket: it notices a vanished client and ends the session.
        "tcp_keepalives_idle": bounds.keepalive_idle,
        "tcp_keepalives_interval": bounds.keepalive_interval,
        "tcp_keepalives_count": bounds.keepalive_count,
        "tcp_user_timeout": _ms(bounds.tcp_user_timeout),
    }
    ours = " ".join(f"-c {name}={value}" for name, value in settings.items())
    args: dict[str, Any] = {
        "connect_timeout": math.ceil(bounds.connect),
        "keepalives": 1,
        "keepalives_idle": bounds.keepalive_idle,
        "keepalives_interval": bounds.keepalive_interval,
        "keepalives_count": bounds.keepalive_count,
        "tcp_user_timeout": _ms(bounds.tcp_user_timeout),
    }
    args = {key: value for key, value in args.items() if key not in url.query}
    theirs = url.query.get("options")
    args["options"] = (
        ours if not theirs else f"{ours} {theirs if isinstance(theirs, str) else ' '.join(theirs)}"
    )
    return args


def mysql_connect_args(bounds: Bounds, url: URL) -> dict[str, Any]:
    """PyMySQL's socket timeouts (its connect_timeout covers only the TCP connect: the handshake read is
    bounded by read_timeout). A parameter in the URL wins."""
    args: dict[str, Any] = {
        "connect_timeout": math.ceil(bounds.connect),
        "read_timeout": math.ceil(bounds.read),
        "write_timeout": math.ceil(bounds.read),
    }
    return {key: value for key, value in args.items() if key not in url.query}


def mysql_session_sql(bounds: Bounds, mariadb: bool) -> str:
    """The session settings, run once per new connection (before the URL's own ``init_command``)."""
    idle = math.ceil(bounds.idle_in_transaction)
    settings = [f"innodb_lock_wait_timeout = {math.ceil(bounds.lock_wait)}"]
    if mariadb:
        settings += [
            f"idle_transaction_timeout = {idle}",
            f"max_statement_time = {bounds.statement:g}",
            f"wait_timeout = {max(60, math.ceil(4 * bounds.statement))}",
        ]
    else:
        # MySQL has no idle-in-transaction timeout: wait_timeout (any idle session) is the commit bound,
        # and the pool pings a connection idle for half of it before use (see open_store).
        # max_execution_time bounds SELECTs only; the lock wait bounds the writes.
        settings += [f"max_execution_time = {_ms(bounds.statement)}", f"wait_timeout = {idle}"]
    return "SET SESSION " + ", ".join(settings)


def idle_ping_after(bounds: Bounds, backend: str, mariadb: bool, default: float) -> float:
    """Ping pooled connections idle longer than this: on MySQL the server drops them after wait_timeout."""
    if backend in ("mysql", "mariadb") and not mariadb:
        return min(default, bounds.idle_in_transaction / 2)
    return default
