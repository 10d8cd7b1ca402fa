"""Issue 16 items 3 and 4: what other local users could read. Created private, never chmod-ed after."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest
from factories import RUN, snapshot
from sqlalchemy import text

from schedctl.store import open_store
from schedctl.store.migrate import upgrade
from schedctl.timing.clock import SystemClock
from schedctl.worker.executor import Execution
from schedctl.worker.loop import Worker
from schedctl.worker.settings import WorkerSettings


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def finish(execution: Execution) -> Execution:
    deadline = time.monotonic() + 20
    while not execution.done():
        assert time.monotonic() < deadline, "the command did not finish"
        execution.enforce()
        time.sleep(0.01)
    return execution


# ------------------------------------------------------------------------------- item 3: checkpoints


def test_the_worker_folder_is_0700(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    worker = Worker(store, WorkerSettings(identity="w"), SystemClock())
    try:
        assert mode(worker._root) == 0o700
    finally:
        os.rmdir(worker._root)
        store.dispose()


def test_a_checkpoint_file_is_created_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "umask", os.umask)  # restored whatever happens
    old = os.umask(0o022)  # the usual umask: a plain open() would make the file 0644
    try:
        execution = finish(
            Execution(
                RUN,
                snapshot('stat -L -c %a "$SCHEDCTL_CHECKPOINT_FILE"'),
                {"offset": 1},
                tmp_path,
            )
        )
    finally:
        os.umask(old)
    assert execution.tail.text() == "600\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_a_job_running_as_another_user_writes_its_checkpoint_through_a_descriptor_not_a_folder(
    request: pytest.FixtureRequest,
) -> None:
    """Issue 24: the job user gets the worker's unnamed file, theirs to write, and no folder of its own: the
    worker's folder stays 0700 and closed, and nothing in it (or beside it) ever has a name the job chose."""
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="i24-test-"))
    os.chmod(base, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    root = base / "schedctl-worker-x"
    root.mkdir(mode=0o700)
    command = (
        'stat -L -c "%a %U" "$SCHEDCTL_CHECKPOINT_FILE"; cat "$SCHEDCTL_CHECKPOINT_FILE"; echo; '
        f'ls {root} >/dev/null 2>&1 && echo can-list-worker-folder; printf 7 > "$SCHEDCTL_CHECKPOINT_FILE"'
    )
    execution = Execution(
        RUN,
        snapshot(command, user="nobody", workdir="/"),
        {"offset": 1},
        root,
        run_as_job_user=True,
    )
    finish(execution)
    assert execution.tail.text() == f'600 {nobody.pw_name}\n{{"offset":1}}\n', execution.tail.text()
    assert mode(root) == 0o700 and os.listdir(root) == [] and os.listdir(base) == [root.name]
    assert execution.final_checkpoint() == 7
    execution.cleanup()


# ------------------------------------------------------------------------------- item 4: the SQLite file


def test_a_new_sqlite_database_and_its_wal_and_shm_are_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = open_store(f"sqlite:///{tmp_path / 'new.db'}")
        upgrade(store)
        with store.connect() as conn:  # an open connection keeps -wal and -shm in place
            conn.execute(text("SELECT count(*) FROM job_runs"))
            modes = {p.name: mode(p) for p in tmp_path.iterdir()}
        store.dispose()
    finally:
        os.umask(old)
    assert modes == {"new.db": 0o600, "new.db-wal": 0o600, "new.db-shm": 0o600}


def test_an_existing_sqlite_file_keeps_its_mode(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    db.touch(mode=0o640)
    os.chmod(db, 0o640)
    store = open_store(f"sqlite:///{db}")
    upgrade(store)
    store.dispose()
    assert mode(db) == 0o640
