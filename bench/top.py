"""`schedctl top`: statements and wall time of one frame as the number of jobs grows.

    python bench/top.py [--db URL] [--jobs 10 1000 10000] [--print-frame]

Seeds a fresh database (a temporary SQLite file unless --db names an empty PostgreSQL/MySQL database or
schema) with N jobs as a leader leaves them (a job_state row each, one finished or skipped run each, two
workers, a scheduler standby, a few running and queued runs), then reads frames and counts the statements
each one sends (a SQLAlchemy ``before_cursor_execute`` listener). The count must not grow with N. With
``--print-frame`` the last frame is printed as `schedctl top --once` prints it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import event

from schedctl.inspect.top import ScheduleCache, read_frame
from schedctl.jobs.job import CatchUp, Job
from schedctl.leader.lease import acquire_or_renew
from schedctl.store import claims, describe_target, open_store
from schedctl.store import workers as registry
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs, job_state, workers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.factories import seed_settled_jobs  # noqa: E402  (the suite's seeder: the same rows as its scale test)

ZONES = ("UTC", "Europe/London", "America/New_York", "Asia/Tokyo")


def seed(store, n: int) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    with store.begin() as conn:
        conn.execute(job_runs.delete())
        conn.execute(job_state.delete())
        conn.execute(workers.delete())
        for ident, labels, role in (
            ("worker-a", {}, "worker"),
            ("worker-b", {"pool": "batch"}, "worker"),
            ("sched-1", {}, "scheduler"),
            ("sched-2", {}, "scheduler"),
        ):
            registry.register(
                conn,
                registry.Registration(ident, role, "bench", 1, "0.1.0", "2025b", labels, 8, 1.0, 60.0),
            )
    seed_settled_jobs(
        store,
        n,
        now,
        job_id=lambda i: f"job-{i:06d}",
        schedule_key=lambda i: f"{i % 60} {i % 24} * * *|{ZONES[i % len(ZONES)]}|",
        states=("succeeded", "succeeded", "failed", "skipped"),
        spread_minutes=600,
        offset_minutes=2,
    )
    busy = [
        Job(id=f"job-{i:06d}", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="x")
        for i in range(min(n, 3))
    ]
    batch = Job(
        id="nightly-batch",
        schedule="0 2 * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP,
        command="x",
        labels={"pool": "gpu"},
    )
    with store.begin() as conn:
        for j in busy:
            claims.queue_runs(conn, j, [now])
        claims.claim(conn, "worker-a", 3, claims.label_keys({}), 60.0)
        claims.queue_runs(conn, batch, [now - timedelta(minutes=12)])
        conn.execute(
            job_runs.update()
            .where(job_runs.c.job_id == batch.id)
            .values(queued_at=now - timedelta(minutes=12))
        )
    assert acquire_or_renew(store, "cron", "sched-1", 300.0).held


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", help="an empty database (default: a temporary SQLite file)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[10, 1000, 10000])
    parser.add_argument("--frames", type=int, default=5)
    parser.add_argument("--print-frame", action="store_true")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="schedctl-bench-top-")
    url = args.db or f"sqlite:///{Path(tmp) / 'top.db'}"
    store = open_store(url)
    upgrade(store)
    counted: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: counted.append(a[2]))
    print(f"# {describe_target(url)}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'jobs':>7}  {'statements/frame':>16}  {'first frame':>11}  {'median frame':>12}")
    counts = set()
    frame = None
    for n in args.jobs:
        seed(store, n)
        cache = ScheduleCache()
        times, per_frame = [], []
        for _ in range(args.frames):
            counted.clear()
            began = time.perf_counter()
            frame = read_frame(store, schedules=cache)
            times.append(time.perf_counter() - began)
            per_frame.append(len(counted))
        counts.update(per_frame)
        print(
            f"{n:>7}  {per_frame[0]:>16}  {times[0] * 1000:>9.0f}ms  {statistics.median(times) * 1000:>10.0f}ms"
        )
    if args.print_frame and frame is not None:
        from rich.console import Console

        from schedctl.cli.top import render

        Console(width=120, soft_wrap=True, highlight=False).print(render(frame, describe_target(url)))
    store.dispose()
    if len(counts) != 1:
        print(f"statement count varies with the job count: {sorted(counts)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
