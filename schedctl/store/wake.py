"""Wake-ups from the scheduler to the workers after a dispatch: one interface over two mechanisms.

The notifier side is ``notify_columns`` (inside the dispatch transaction) and ``after_commit`` (once it committed);
the worker side is a ``Listener`` (``listener_for``): a descriptor for the worker's selector, and ``drain()``
when it is readable. PostgreSQL has LISTEN/NOTIFY on channel ``CHANNEL``. MySQL/MariaDB have nothing: their
workers only poll. SQLite gets a stand-in, below.

SQLite is one host by design, so the scheduler can reach every worker of the same file through the
filesystem: each worker binds a Unix datagram socket in a directory named after the database, and the
scheduler sends a byte to every socket there after a dispatch commits. A worker that receives one claims at
once instead of at its next poll. Everything here is best effort: a wake-up that cannot be delivered (another
user's worker, a directory we do not own, a full socket buffer) leaves that worker to its poll, which is
what it would have done without this module.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import URL
    from sqlalchemy.sql.elements import ColumnElement

    from schedctl.store import Store

log = logging.getLogger("schedctl.wake")

CHANNEL = "schedctl_runs"  # PostgreSQL's NOTIFY channel: the scheduler notifies it, every worker listens
LISTEN_RETRY = 5.0  # seconds between attempts to (re)open a worker's LISTEN connection

Watch = Callable[[int, Any], None]  # the worker's selector: register a descriptor with its data
Unwatch = Callable[[int], None]


def notify_columns(dialect: str) -> list[ColumnElement[Any]]:
    """For the last SELECT of the transaction that queued runs (``leases.fence_commit``), so the wake-up
    costs no round trip of its own. PostgreSQL delivers a notification at commit, and never for a
    rolled-back transaction, so a worker woken by it sees the rows. Other databases: none."""
    if dialect == "postgresql":
        from sqlalchemy import func, literal

        return [func.pg_notify(literal(CHANNEL), literal(""))]
    return []


def after_commit(store: Store) -> None:
    """Once that transaction committed: SQLite's datagrams are not transactional, so they go only now."""
    if store.sqlite_file is not None:
        wake_workers(store.sqlite_file)


class Listener:
    """A worker's end of the wake-ups. This base listens to nothing (MySQL/MariaDB, or a SQLite inbox that
    could not open): the worker polls, as it would without wake-ups."""

    path: Path | None = None  # a file to remove if the worker dies without closing (its group guard's job)

    def refresh(self, now: float) -> None:
        """Before a claim: (re)open what has to be open, at most every LISTEN_RETRY seconds."""

    def drain(self) -> None:
        """Empty what made the descriptor readable: the worker claims next."""

    def suspect(self) -> None:
        """A database write failed: a connection kept to the same server is likely dead too."""

    def forgotten(self) -> None:
        """Its descriptor was closed behind our back and the number reused; the worker unwatched it."""

    def close(self) -> None:
        pass


def listener_for(store: Store, watch: Watch, unwatch: Unwatch, monotonic: Callable[[], float]) -> Listener:
    """The listener for ``store``'s database, watched through ``watch``/``unwatch`` with itself as data."""
    if store.dialect == "postgresql":
        return PgListener(store.url, watch, unwatch, monotonic)
    if store.sqlite_file is not None:
        inbox = Inbox.open(store.sqlite_file)
        if inbox is not None:
            watch(inbox.fileno(), inbox)
            return inbox
    return Listener()


class PgListener(Listener):
    """LISTEN on a connection of its own, in autocommit. libpq closes the socket itself when the server goes
    away (epoll then forgets it silently), so a closed or broken connection is dropped and opened again."""

    def __init__(self, url: URL, watch: Watch, unwatch: Unwatch, monotonic: Callable[[], float]) -> None:
        self._url = url
        self._watch = watch
        self._unwatch = unwatch
        self._monotonic = monotonic
        self._conn: Any = None
        self._fd = -1
        self._next_try = 0.0

    def refresh(self, now: float) -> None:
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._drop()
        if self._conn is not None or now < self._next_try:
            return
        try:
            import psycopg

            conninfo = self._url.set(drivername="postgresql").render_as_string(hide_password=False)
            conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
            conn.execute(f"LISTEN {CHANNEL}")
        except Exception as exc:  # any driver failure: polling still works, so retry later
            log.debug("LISTEN unavailable: %s", exc, extra={"event": "listen_failed"})
            self._next_try = now + LISTEN_RETRY
            return
        # Remember the descriptor: once the server is gone psycopg raises instead of answering fileno().
        fd = conn.fileno()
        self._watch(fd, self)
        self._conn = conn
        self._fd = fd

    def drain(self) -> None:
        try:
            for _ in self._conn.notifies(timeout=0):
                pass
        except Exception:
            self._drop()

    def suspect(self) -> None:
        self._drop()

    def forgotten(self) -> None:
        self._fd = -1
        self._drop()

    def close(self) -> None:
        self._drop()

    def _drop(self) -> None:
        if self._conn is None:
            return
        try:
            self._unwatch(self._fd)
        except OSError:
            pass
        try:
            self._conn.close()
        except Exception:
            pass
        self._conn = None
        self._next_try = self._monotonic() + LISTEN_RETRY


def wake_dir(database: str) -> Path:
    """Where the sockets of ``database``'s workers live. Under the temporary directory, not beside the file:
    a socket path is limited to 107 bytes, and this one stays short however deep the database lives."""
    digest = hashlib.sha1(os.path.realpath(database).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"schedctl-wake-{os.getuid()}-{digest}"


def _own_dir(path: Path, create: bool) -> bool:
    """True when ``path`` is a directory of ours that no one else can write to (never follow a planted link)."""
    if create:
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


class Inbox(Listener):
    """A worker's socket on SQLite. ``fileno()`` goes into the worker's selector; ``drain()`` empties it."""

    path: Path

    def __init__(self, sock: socket.socket, path: Path) -> None:
        self._sock = sock
        self.path = path

    @classmethod
    def open(cls, database: str) -> Inbox | None:
        directory = wake_dir(database)
        # Twice: the last worker of the file to leave removes the directory, maybe between our two steps.
        for _ in range(2):
            if not _own_dir(directory, create=True):
                log.debug("no wake-ups: %s is not a private directory of ours", directory)
                return None
            path = directory / f"{os.getpid()}-{secrets.token_hex(4)}"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(str(path))
                sock.setblocking(False)
            except FileNotFoundError:
                sock.close()
                continue
            except OSError as exc:
                sock.close()
                log.debug("no wake-ups: cannot bind %s: %s", path, exc)
                return None
            return cls(sock, path)
        return None

    def fileno(self) -> int:
        return self._sock.fileno()

    def drain(self) -> None:
        try:
            while self._sock.recv(64):
                pass
        except OSError:  # BlockingIOError: empty
            pass

    def close(self) -> None:
        self._sock.close()
        for remove in (self.path.unlink, self.path.parent.rmdir):  # rmdir only when we were the last
            try:
                remove()
            except OSError:
                pass


def wake_workers(database: str) -> int:
    """Nudge every worker of ``database``; returns how many were reached. Sockets left by dead workers
    (their path refuses the datagram) are removed, so the directory does not grow."""
    directory = wake_dir(database)
    if not _own_dir(directory, create=False):
        return 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    reached = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for name in names:
            path = directory / name
            try:
                sock.sendto(b"!", str(path))
                reached += 1
            except (ConnectionRefusedError, FileNotFoundError):
                try:
                    path.unlink()
                except OSError:
                    pass
            except OSError:  # a full buffer: that worker has wake-ups waiting already
                pass
    return reached
