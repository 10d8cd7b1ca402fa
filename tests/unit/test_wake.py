"""SQLite wake-ups: every live worker's socket gets one; a dead worker's socket is removed, not kept."""

from __future__ import annotations

import os
import selectors
from pathlib import Path

from schedctl.store import wake


def test_every_worker_of_the_file_is_woken_and_only_of_that_file(tmp_path: Path) -> None:
    db, other = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    inboxes = [wake.Inbox.open(db), wake.Inbox.open(db)]
    stranger = wake.Inbox.open(other)
    assert all(inboxes) and stranger is not None
    try:
        assert wake.wake_workers(db) == 2
        with selectors.DefaultSelector() as sel:
            for box in (*inboxes, stranger):
                sel.register(box.fileno(), selectors.EVENT_READ, box)
            ready = {key.data for key, _ in sel.select(1.0)}
        assert ready == set(inboxes)
        for box in inboxes:
            box.drain()
    finally:
        for box in (*inboxes, stranger):
            box.close()
    assert wake.wake_workers(db) == 0  # closed inboxes took their sockets with them


def test_a_socket_left_by_a_dead_worker_is_removed(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    box = wake.Inbox.open(db)
    assert box is not None
    box._sock.close()  # a worker killed with SIGKILL: its socket file stays, nobody reads it
    assert box.path.exists()
    assert wake.wake_workers(db) == 0
    assert not box.path.exists()
    box.close()
    assert not box.path.parent.exists()


def test_a_directory_someone_else_can_write_to_is_not_used(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    directory = wake.wake_dir(db)
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o777)
    try:
        assert wake.Inbox.open(db) is None
        assert wake.wake_workers(db) == 0
    finally:
        directory.rmdir()


class _FakePgConnection:
    """What PgListener uses of a psycopg connection: enough to follow it through a broken server."""

    def __init__(self, fd: int) -> None:
        self.fd, self.closed, self.broken, self.sql = fd, False, False, []
        self.waiting = 2  # notifications not yet read

    def execute(self, sql: str) -> None:
        self.sql.append(sql)

    def fileno(self) -> int:
        return self.fd

    def notifies(self, timeout: float):
        count, self.waiting = self.waiting, 0
        return iter(range(count))

    def close(self) -> None:
        self.closed = True


def test_a_postgresql_listener_is_watched_drained_and_reopened_after_its_server_breaks(monkeypatch) -> None:
    import sys
    import types

    from sqlalchemy.engine import make_url

    opened: list[_FakePgConnection] = []

    def connect(conninfo: str, autocommit: bool, connect_timeout: int) -> _FakePgConnection:
        assert autocommit and connect_timeout == 5
        opened.append(_FakePgConnection(100 + len(opened)))
        return opened[-1]

    monkeypatch.setitem(sys.modules, "psycopg", types.SimpleNamespace(connect=connect))
    watched: dict[int, object] = {}
    now = [0.0]
    url = make_url("postgresql+psycopg://u@db.example/app")
    listener = wake.PgListener(url, watched.__setitem__, lambda fd: watched.pop(fd, None), lambda: now[0])
    listener.refresh(0.0)
    assert opened[0].sql == [f"LISTEN {wake.CHANNEL}"] and watched == {100: listener}
    listener.drain()
    assert opened[0].waiting == 0
    opened[0].broken = True  # libpq closed the socket: epoll forgot it without a word
    now[0] = 1.0
    listener.refresh(1.0)
    assert opened[0].closed and watched == {} and len(opened) == 1  # dropped, not reopened at once
    listener.refresh(1.0 + wake.LISTEN_RETRY - 0.1)
    assert len(opened) == 1
    listener.refresh(1.0 + wake.LISTEN_RETRY)
    assert len(opened) == 2 and watched == {101: listener}
    listener.close()
    assert opened[1].closed and watched == {}


def test_each_database_gets_its_wake_ups(tmp_path: Path) -> None:
    import types

    (notify,) = wake.notify_columns("postgresql")
    assert str(notify.compile()).startswith("pg_notify(")
    assert wake.notify_columns("sqlite") == []  # only PostgreSQL has NOTIFY; SQLite's go after the commit
    assert wake.notify_columns("mysql") == []
    watched: dict[int, object] = {}
    lite = types.SimpleNamespace(dialect="sqlite", sqlite_file=str(tmp_path / "a.db"))
    inbox = wake.listener_for(lite, watched.__setitem__, watched.pop, lambda: 0.0)
    try:
        assert isinstance(inbox, wake.Inbox) and watched == {inbox.fileno(): inbox}
        wake.after_commit(lite)
        with selectors.DefaultSelector() as sel:
            sel.register(inbox.fileno(), selectors.EVENT_READ)
            assert sel.select(1.0)
    finally:
        inbox.close()
    mysql = types.SimpleNamespace(dialect="mysql", sqlite_file=None)
    polling = wake.listener_for(mysql, watched.__setitem__, watched.pop, lambda: 0.0)
    assert type(polling) is wake.Listener and polling.path is None  # MySQL/MariaDB: the worker polls
