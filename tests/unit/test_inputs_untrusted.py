"""What a job prints, reads or names is nobody's promise: the worker must record it on every backend.

TOML and crontab fuzzing live with their modules (test_config_fuzz, test_crontab_parse); the import's
0600 file is in tests/cli/test_import_export.py and serve's job-file warning in test_service.py. This file
covers what only shows once a real worker records a hostile run: bytes PostgreSQL's ``text`` refuses (NUL),
output that is not UTF-8, and a large hostile stdin, through the worker's own loop.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import claims
from schedctl.store.schema import job_runs
from schedctl.timing.clock import SystemClock
from schedctl.worker.loop import Worker
from schedctl.worker.settings import WorkerSettings

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def job(job_id: str, command: Any, **kw: Any) -> Job:
    return Job(job_id, "* * * * *", "UTC", CatchUp.SKIP, command, concurrency=Concurrency.ALLOW, **kw)


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def runs(store: Any) -> dict[str, Any]:
    with store.connect() as conn:
        return {r["job_id"]: r for r in conn.execute(select(job_runs)).mappings()}


def run_worker_until(
    store: Any, done: Callable[[dict[str, Any]], bool], timeout: float = 20.0
) -> dict[str, Any]:
    settings = WorkerSettings(
        identity="w1",
        poll_interval=0.1,
        heartbeat_interval=0.5,
        stale_after=30.0,
        successful_history=100,
        failed_history=100,
    )
    worker = Worker(store, settings, SystemClock())
    stopping, killing = threading.Event(), threading.Event()
    thread = threading.Thread(target=worker.run, args=(stopping, killing), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not done(rows := runs(store)):
            assert time.monotonic() < deadline, {k: (r["state"], r["attempt"]) for k, r in rows.items()}
            time.sleep(0.1)
        return rows
    finally:
        stopping.set()
        thread.join(15)
        assert not thread.is_alive()


def all_finished(rows: dict[str, Any]) -> bool:
    return bool(rows) and all(r["state"] in claims.FINISHED_STATES for r in rows.values())


def test_output_with_nul_and_invalid_utf8_is_recorded_and_does_not_wedge_the_worker(store: Any) -> None:
    """``find -print0`` or a binary dump is ordinary output. PostgreSQL's text cannot hold NUL: a worker that
    sends it as is fails every later write in the same batch, claims nothing more, and the run is re-executed
    by a takeover forever. The tail is for people: such bytes show as U+FFFD, like any undecodable byte."""
    nul = job("prints-nul", python("import sys; sys.stdout.buffer.write(b'a\\x00b\\xff\\xfec\\n')"))
    plain = job("plain", python("print('fine')"))
    with store.begin() as conn:
        claims.queue_runs(conn, nul, [T0])
        claims.queue_runs(conn, plain, [T0])
    rows = run_worker_until(store, all_finished)
    assert (rows["prints-nul"]["state"], rows["prints-nul"]["attempt"]) == ("succeeded", 1)
    assert rows["prints-nul"]["output_tail"] == "a\ufffdb\ufffd\ufffdc\n"
    assert (rows["plain"]["state"], rows["plain"]["output_tail"]) == ("succeeded", "fine\n")


def test_a_large_hostile_stdin_arrives_whole_and_its_echo_is_tailed(store: Any, tmp_path: Path) -> None:
    """More than a pipe holds, so it is fed by a thread; the job echoes it and compares it with the file."""
    chunk = "日本語; $(rm -rf /) `id` 'q' \"d\" \\ %\n"
    stdin = chunk * 20000  # ~1 MB of UTF-8
    expected = tmp_path / "expected.txt"
    expected.write_text(stdin, encoding="utf-8")
    code = (
        "import sys; data = sys.stdin.buffer.read(); "
        f"ok = data == open({str(expected)!r}, 'rb').read(); "
        "sys.stdout.buffer.write(data); print('SAME' if ok else 'DIFFERENT'); sys.exit(0 if ok else 1)"
    )
    with store.begin() as conn:
        claims.queue_runs(conn, job("big-stdin", python(code), stdin=stdin), [T0])
    rows = run_worker_until(store, all_finished)
    row = rows["big-stdin"]
    assert row["state"] == "succeeded", row["output_tail"][-200:]
    assert row["output_tail"].endswith(chunk + "SAME\n")
    assert len(row["output_tail"].encode()) <= 8192


def test_a_checkpoint_the_job_writes_with_hostile_json_is_saved_as_written(store: Any) -> None:
    """JSON escapes a shell or SQL would trip on (NUL, quotes, non-ASCII, deep nesting) reach the next attempt."""
    value = {"s": "a\u0000b'\"; DROP TABLE job_runs; --", "ü": ["🚀", None, 1e300, -0.5], "deep": [[[[[1]]]]]}
    code = (
        "import json, os, sys; "
        f"json.dump({value!r}, open(os.environ['SCHEDCTL_CHECKPOINT_FILE'], 'w')); sys.exit(3)"
    )
    with store.begin() as conn:
        claims.queue_runs(conn, job("cp", python(code)), [T0])
    rows = run_worker_until(store, all_finished)
    assert (rows["cp"]["state"], rows["cp"]["exit_status"]) == ("failed", 3)
    assert rows["cp"]["checkpoint"] == value
    assert rows["cp"]["finished_at"] - rows["cp"]["started_at"] < timedelta(seconds=20)


def test_an_outcome_the_database_refuses_is_stored_without_its_output(store: Any, monkeypatch: Any) -> None:
    """Should some future content slip past the sanitising again, the worker must not wedge: after a few
    refused writes it records the outcome without the output (PostgreSQL refuses NUL in text; the other
    backends accept it, and there the output is stored as printed)."""
    import schedctl.store.claims
    import schedctl.worker.executor

    monkeypatch.setattr(schedctl.store.claims, "_storable", lambda text: text)
    monkeypatch.setattr(schedctl.worker.executor, "clean_text", lambda text, limit=None: text)
    nul = job("prints-nul", python("import sys; sys.stdout.buffer.write(b'a\\x00b\\n')"))
    with store.begin() as conn:
        claims.queue_runs(conn, nul, [T0])
    rows = run_worker_until(store, all_finished)
    row = rows["prints-nul"]
    assert (row["state"], row["attempt"]) == ("succeeded", 1)
    if store.dialect == "postgresql":
        assert row["output_tail"] is None and "refused" in row["error"]
    else:
        assert row["output_tail"] == "a\x00b\n"
