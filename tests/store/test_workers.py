"""The worker registry, "no worker can run this" and `top` frames, on every backend.

Instants are the database's: a row is made stale by moving its `last_seen_at` back with the database's own
clock (`db_now_plus`), never by sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from factories import seed_settled_jobs
from sqlalchemy import event, select, update

from schedctl.inspect.status import Verdict, all_status, job_status
from schedctl.inspect.top import read_frame
from schedctl.jobs.job import CatchUp, Job
from schedctl.store import claims, open_store
from schedctl.store import workers as registry
from schedctl.store.dialect import now_plus, select_db_now
from schedctl.store.eligibility import stranded_runs
from schedctl.store.schema import job_runs, job_state, workers
from schedctl.worker.registry import Registry


def me(identity: str, labels: dict[str, str] | None = None, stale_after: float = 60.0, role: str = "worker"):
    return registry.Registration(
        identity, role, "host", 1, "0.1.0", "2025b", labels or {}, 4, 0.5, stale_after
    )


def register(store, *registrations) -> None:
    with store.begin() as conn:
        for r in registrations:
            registry.register(conn, r)


def silent_for(store, identity: str, seconds: float) -> None:
    with store.begin() as conn:
        conn.execute(
            update(workers).where(workers.c.identity == identity).values(last_seen_at=now_plus(-seconds))
        )


def listed(store) -> dict[str, registry.WorkerRecord]:
    with store.connect() as conn:
        return {w.identity: w for w in registry.list_workers(conn, select_db_now(conn))}


def job(job_id: str, **kw) -> Job:
    return Job(id=job_id, schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true", **kw)


def lead(store) -> None:
    """A scheduler holds the lease: without one `status` says "not running" first, whatever the queue."""
    from schedctl.leader.lease import acquire_or_renew

    assert acquire_or_renew(store, "cron", "sched-1", 300.0).held


def queue_old(store, j: Job, minutes: float = 12.0) -> datetime:
    """A run of ``j`` queued ``minutes`` ago by the database's clock."""
    with store.begin() as conn:
        now = select_db_now(conn)
        at = (now - timedelta(minutes=minutes)).replace(microsecond=0)
        claims.queue_runs(conn, j, [at])
        conn.execute(
            update(job_runs).where(job_runs.c.job_id == j.id).values(queued_at=at - timedelta(seconds=1))
        )
    return at


def test_states_follow_each_rows_own_stale_window_by_the_database_clock(store):
    register(store, me("a"), me("b", stale_after=5.0), me("c"))
    silent_for(store, "b", 10.0)  # past its 5 s
    silent_for(store, "a", 10.0)  # well inside its 60 s
    with store.begin() as conn:
        registry.mark_stopped(conn, "c", "shutdown (SIGTERM or SIGINT)")
    found = listed(store)
    assert {k: w.state for k, w in found.items()} == {"a": "alive", "b": "stale", "c": "stopped"}
    assert found["c"].stop_reason == "shutdown (SIGTERM or SIGINT)"
    assert 9.0 <= found["b"].seen_ago < 60.0  # margin: the statements between the update and the read


def test_refresh_brings_back_a_stale_row_and_reregistering_a_fixed_identity_starts_afresh(store):
    register(store, me("pod-0"))
    with store.begin() as conn:
        registry.mark_stopped(conn, "pod-0", "shutdown")
    register(store, me("pod-0", labels={"pool": "batch"}))  # the pod restarted under the same name
    assert listed(store)["pod-0"].state == "alive"
    assert listed(store)["pod-0"].labels == {"pool": "batch"}
    silent_for(store, "pod-0", 120.0)
    assert listed(store)["pod-0"].state == "stale"
    with store.begin() as conn:
        assert registry.refresh(conn, "pod-0")
        assert not registry.refresh(conn, "never-registered")
    assert listed(store)["pod-0"].state == "alive"


def test_prune_removes_long_stopped_and_long_silent_rows_only(store):
    register(store, me("old-stop"), me("new-stop"), me("old-stale"), me("alive"))
    with store.begin() as conn:
        registry.mark_stopped(conn, "old-stop", "shutdown")
        registry.mark_stopped(conn, "new-stop", "shutdown")
        conn.execute(
            update(workers)
            .where(workers.c.identity == "old-stop")
            .values(stopped_at=now_plus(-registry.PRUNE_STOPPED_AFTER - 60))
        )
    silent_for(store, "old-stale", registry.PRUNE_STALE_AFTER + 60)
    with store.begin() as conn:
        assert registry.prune(conn) == 2
    assert set(listed(store)) == {"new-stop", "alive"}


def test_the_registry_object_registers_refreshes_and_stops(store):
    clock = [0.0]
    reg = Registry(
        store, identity="w", role="all", interval=15.0, stale_after=60.0, monotonic=lambda: clock[0], slots=2
    )
    assert reg.due()
    reg.refresh()
    assert not reg.due()
    first = listed(store)["w"]
    assert (first.role, first.slots, first.state) == ("all", 2, "alive")
    with (
        store.begin() as conn
    ):  # the row vanished (pruned while we were cut off): the next refresh re-registers
        conn.execute(workers.delete())
    clock[0] = 15.0
    assert reg.due()
    reg.refresh()
    assert listed(store)["w"].state == "alive"
    reg.stop("shutdown (SIGTERM or SIGINT)")
    assert listed(store)["w"].state == "stopped"


def test_a_registry_write_to_an_unreachable_database_is_logged_not_raised(tmp_path, caplog):
    gone = open_store(f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}")
    reg = Registry(gone, identity="w", role="worker", interval=1.0, stale_after=3.0, monotonic=time.monotonic)
    reg.refresh()
    reg.refresh()
    assert sum("cannot update the worker registry" in r.getMessage() for r in caplog.records) == 1
    gone.dispose()


def test_running_runs_are_listed_under_their_worker(store):
    register(store, me("w1"))
    j = job("report")
    queue_old(store, j, minutes=1)
    with store.begin() as conn:
        [run] = claims.claim(conn, "w1", 1, claims.label_keys({}), 60.0)
        claims.save_checkpoint(conn, run.job_id, run.scheduled_for, run.attempt, {"day": 3})
    w = listed(store)["w1"]
    assert [(r.job_id, r.attempt) for r in w.running] == [("report", 1)]
    assert w.running[0].checkpoint_at is not None


# -- no worker can run this -----------------------------------------------------------------------------


def test_labels_no_alive_worker_has_get_their_own_verdict(store):
    lead(store)
    register(store, me("web-1", {"pool": "web"}), me("any-1"), me("batch-dead", {"pool": "batch"}))
    silent_for(store, "batch-dead", 600)
    batch, plain = job("nightly", labels={"pool": "batch"}), job("plain")
    queue_old(store, batch)
    queue_old(store, plain, minutes=0.5)  # unlabeled: any alive worker may take it; just busy workers
    with store.connect() as conn:
        stranded = stranded_runs(conn, select_db_now(conn))
    assert set(stranded) == {"nightly"}
    with store.connect() as conn:
        now = select_db_now(conn)
    one = job_status(store, batch, now)
    assert one.verdict_code is Verdict.NO_WORKER and one.verdict_code.bad
    assert one.verdict.startswith("queued 12 min: no alive worker has labels pool=batch (2 workers alive: ")
    assert "web-1 (pool=web)" in one.verdict and "--label pool=batch" in one.verdict
    every = {s.job.id: s for s in all_status(store, [batch, plain], now)}
    assert every["nightly"].verdict == one.verdict
    assert every["plain"].verdict_code is not Verdict.NO_WORKER


def test_no_worker_alive_at_all_and_a_fresh_queue_is_not_stranded(store):
    lead(store)
    register(store, me("gone"))
    with store.begin() as conn:
        registry.mark_stopped(conn, "gone", "shutdown")
    j = job("backup")
    queue_old(store, j, minutes=3)
    with store.connect() as conn:
        now = select_db_now(conn)
    s = job_status(store, j, now)
    assert s.verdict_code is Verdict.NO_WORKER
    assert s.verdict.startswith("queued 3 min: no worker alive at all (1 stale or stopped; ")
    # A run queued a moment ago is waiting for the next poll, not stranded.
    fresh = job("fresh")
    with store.begin() as conn:
        claims.queue_runs(conn, fresh, [select_db_now(conn)])
    with store.connect() as conn:
        assert "fresh" not in stranded_runs(conn, select_db_now(conn))


def test_the_stranded_metric_counts_runs_no_alive_worker_may_take(store):
    from schedctl.observability import metrics
    from schedctl.observability.queue import sample_queue

    register(store, me("web-1", {"pool": "web"}))
    queue_old(store, job("a", labels={"pool": "batch"}))
    queue_old(store, job("b", labels={"pool": "web"}))
    sample_queue(store)
    assert metrics.RUNS_WITHOUT_ELIGIBLE_WORKER._value.get() == 1


# -- top -----------------------------------------------------------------------------------------------------


def seed_jobs(store, n: int) -> None:
    """``n`` jobs as a leader leaves them: a job_state row each, a finished run each, a few failed/skipped."""
    seed_settled_jobs(
        store,
        n,
        datetime.now(UTC).replace(microsecond=0),
        job_id=lambda i: f"job-{i:05d}",
        schedule_key=lambda i: f"{i % 60} * * * *|{'Europe/London' if i % 2 else 'UTC'}|",
    )


def count_statements(store, action) -> int:
    seen: list[str] = []

    def on_execute(conn, cursor, statement, *args) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", on_execute)
    try:
        action()
    finally:
        event.remove(store.engine, "before_cursor_execute", on_execute)
    return len(seen)


def test_a_frame_costs_the_same_statements_with_10_or_10000_jobs(store):
    register(store, me("w1"), me("sched-2", role="scheduler"))
    seed_jobs(store, 10)
    small = count_statements(store, lambda: read_frame(store))
    seed_jobs_more = 10_000
    with store.begin() as conn:
        conn.execute(job_state.delete())
        conn.execute(job_runs.delete())
    seed_jobs(store, seed_jobs_more)
    frames = []
    large = count_statements(store, lambda: frames.append(read_frame(store)))
    assert small == large <= 12, (small, large)  # BEGIN/COMMIT included where the driver shows them
    frame = frames[0]
    assert frame.job_count == 10_000
    assert len(frame.next_fires) == 10 and len(frame.failures) == 10 and len(frame.missed) == 10
    assert [p.identity for p in frame.standbys()] == ["sched-2"]  # no lease held: every scheduler stands by


def test_a_frame_never_takes_the_sqlite_writer_lock(sqlite_url):
    """A frame held open between two statements must not delay a dispatch-like write from another process.

    Before Store.read() the frame's transaction began IMMEDIATE, and the write below waited for it (up to the
    30 s busy timeout); the margin here (5 s for a write that takes milliseconds) holds on a loaded machine.
    """
    from schedctl.store.migrate import upgrade

    reader, writer = open_store(sqlite_url), open_store(sqlite_url)
    upgrade(reader)
    register(reader, me("w1"))
    inside, release = threading.Event(), threading.Event()

    def pause_after_first(conn, cursor, statement, *args) -> None:
        if not inside.is_set() and "workers" in statement:
            inside.set()
            release.wait(20)

    event.listen(reader.engine, "after_cursor_execute", pause_after_first)
    frame = threading.Thread(target=lambda: read_frame(reader), daemon=True)
    frame.start()
    try:
        assert inside.wait(10)
        done = threading.Event()

        def dispatch() -> None:
            with writer.begin() as conn:
                claims.queue_runs(conn, job("tick"), [datetime.now(UTC).replace(microsecond=0)])
            done.set()

        threading.Thread(target=dispatch, daemon=True).start()
        assert done.wait(5), "the write waited for the frame's transaction"
    finally:
        release.set()
        frame.join(10)
        event.remove(reader.engine, "after_cursor_execute", pause_after_first)
        reader.dispose()
        writer.dispose()
    with open_store(sqlite_url).connect() as conn:
        assert conn.execute(select(job_runs.c.job_id)).scalars().all() == ["tick"]


def test_version_skew_among_alive_processes_is_named_in_workers_and_leases(store):
    from click.testing import CliRunner

    from schedctl.cli import cli

    newer = registry.Registration("w-new", "worker", "h", 2, "0.2.0", "2026a", {}, 4, 0.5, 60.0)
    register(store, me("w-old"), newer, me("sched-old", role="scheduler"), me("gone"))
    with store.begin() as conn:  # a stopped process of yet another version does not count
        conn.execute(update(workers).where(workers.c.identity == "gone").values(schedctl_version="0.0.9"))
        registry.mark_stopped(conn, "gone", "shutdown")
    assert registry.version_skew(list(listed(store).values())) == [
        "schedctl 0.1.0 (2), 0.2.0 (1)",
        "tzdata 2025b (2), 2026a (1)",
    ]
    url = store.url.render_as_string(hide_password=False)
    for command in ("workers", "leases"):
        result = CliRunner().invoke(cli, [command, "--db", url])
        assert result.exit_code == 0, result.output
        assert (
            "version skew among alive" in result.stderr and "schedctl 0.1.0 (2), 0.2.0 (1)" in result.stderr
        )
