"""SQLite: read-only paths begin deferred, so a long read never delays the leader's or a worker's writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, select

from schedctl.inspect.missed import missed_counts
from schedctl.inspect.status import all_status
from schedctl.jobs.job import CatchUp, Job
from schedctl.leader import lease
from schedctl.observability.queue import sample_last_success, sample_queue
from schedctl.store import Store, claims, dispatch, listing, open_store
from schedctl.store import runs as store_runs
from schedctl.store.migrate import check, upgrade
from schedctl.store.schema import job_runs


def _job(job_id: str) -> Job:
    return Job(id=job_id, schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true")


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


READS: dict[str, Callable[[Store], object]] = {
    "status": lambda s: all_status(s, [_job("a")], _now()),
    "missed": lambda s: missed_counts(s, [_job("a")], _now()),
    "runs": lambda s: store_runs.list_runs(s, limit=10),
    "jobs": lambda s: listing.last_runs(s, ["a"]),
    "leases": lambda s: lease.report(s),
    "queue sampler": sample_queue,
    "last-success sampler": sample_last_success,
    "leader resume": dispatch.load_states,
    "schema check": check,
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_a_long_read_does_not_delay_a_dispatch(sqlite_url, read) -> None:
    """The read is held open after its first statement while another store (another process, as far as
    SQLite knows) queues a run. Had the read begun IMMEDIATE, the write would wait for it, up to the 30 s
    busy timeout; the margin (5 s for a write that takes milliseconds) holds on a loaded machine."""
    reader, writer = open_store(sqlite_url), open_store(sqlite_url)
    upgrade(reader)
    inside, release = threading.Event(), threading.Event()

    def pause_after_first(*_args: object) -> None:
        if not inside.is_set():
            inside.set()
            release.wait(20)

    event.listen(reader.engine, "after_cursor_execute", pause_after_first)
    failures: list[BaseException] = []

    def run_read() -> None:
        try:
            read(reader)
        except BaseException as exc:  # surfaced below: a read that fails proves nothing
            failures.append(exc)

    reading = threading.Thread(target=run_read, daemon=True)
    reading.start()
    try:
        assert inside.wait(10), "the read ran no statement"
        done = threading.Event()

        def dispatch_one() -> None:
            with writer.begin() as conn:
                claims.queue_runs(conn, _job("tick"), [_now()])
            done.set()

        threading.Thread(target=dispatch_one, daemon=True).start()
        assert done.wait(5), "the write waited for the read's transaction"
    finally:
        release.set()
        reading.join(10)
        event.remove(reader.engine, "after_cursor_execute", pause_after_first)
        reader.dispose()
        writer.dispose()
    assert not failures, failures
    probe = open_store(sqlite_url)
    try:
        with probe.read() as conn:
            assert conn.execute(select(job_runs.c.job_id)).scalars().all() == ["tick"]
    finally:
        probe.dispose()


def test_a_write_transaction_still_begins_immediate(sqlite_url) -> None:
    """A read followed by a write in one transaction (a claim's check-then-write) must hold the writer lock
    from its first statement: while one is open, another writer waits instead of slipping in between."""
    first, second = open_store(sqlite_url), open_store(sqlite_url)
    upgrade(first)
    statements: list[str] = []
    event.listen(first.engine, "before_cursor_execute", lambda _c, _cur, sql, *_a: statements.append(sql))
    try:
        with first.begin() as conn:
            conn.execute(select(job_runs.c.job_id)).all()
        with first.read() as conn:
            conn.execute(select(job_runs.c.job_id)).all()
    finally:
        first.dispose()
        second.dispose()
    begins = [s for s in statements if s.startswith("BEGIN")]
    assert begins == ["BEGIN IMMEDIATE", "BEGIN"], statements
