"""Wake-ups between processes sharing one SQLite file: the one-host stand-in for PostgreSQL's LISTEN/NOTIFY.

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
from pathlib import Path

log = logging.getLogger("schedctl.wake")


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


class Inbox:
    """A worker's socket. ``fileno()`` goes into the worker's selector; ``drain()`` empties it."""

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
