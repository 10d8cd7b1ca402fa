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
