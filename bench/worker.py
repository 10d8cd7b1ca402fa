"""Worker throughput: no-op runs (`command = "true"`) completed per second, against the bare spawn rate.

    python bench/worker.py [--runs N] [--slots S] [--workers 1,2,4] [--backends sqlite,postgresql]
                           [--postgres-url URL] [--profile DIR]

For each backend and worker count: start that many real `schedctl serve --role worker` processes on an empty
database, wait until every one is polling, queue N runs in one transaction (plus NOTIFY on PostgreSQL), and
time until all N are `succeeded`. The bare rate is `subprocess.run(["true"])` in a loop in one process: what
one Python process can spawn with nothing else to do. Goal (issue 19, goal 5): 4 workers on PostgreSQL reach
>= 75% of it (issue 9's goal, 50%, for the other rows).

Where the CPU goes, per run, over the timed window: the worker processes themselves, their children (the
jobs: `/bin/sh -c true`), the PostgreSQL server (every `postgres` process, exited backends included), and the
whole machine (/proc/stat; the rest is this script's polling and other tenants). `--profile DIR` runs each
worker under cProfile and leaves `DIR/<backend>-<workers>-<i>.prof` (read with `python -m pstats`); the
profiler slows the workers, so its rates are not figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, func, make_url, select, text

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import claims, open_store, parse_url
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

DEFAULT_PG = os.environ.get("SCHEDCTL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
GOAL_PG_4 = 0.75  # issue 19, goal 5: 4 workers on PostgreSQL
GOAL_OTHER = 0.50  # issue 9
TICK = os.sysconf("SC_CLK_TCK")

# `schedctl ...` with Worker.run under cProfile: the loop runs in its own thread, which `-m cProfile` misses.
PROFILED = """
import cProfile, sys, time
import schedctl.worker.loop as w
from schedctl.cli import main
out = sys.argv.pop(1)
plain = w.Worker.run
def run(self, *args):
    prof = cProfile.Profile(time.thread_time)  # CPU, not wall: the machine, not waiting, is the limit
    try:
        prof.runcall(plain, self, *args)
    finally:
        prof.dump_stats(out)
w.Worker.run = run
sys.argv[0] = "schedctl"
main()
"""


def bare_spawn_rate(seconds: float = 3.0) -> float:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        subprocess.run(["true"], check=True)
        count += 1
    return count / (time.perf_counter() - start)


class Database:
    """A private, empty database: a temporary SQLite file or a fresh PostgreSQL schema."""

    def __init__(self, backend: str, pg_url: str, folder: Path) -> None:
        self.backend = backend
        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        if backend == "sqlite":
            self.url = f"sqlite:///{folder / (self.schema + '.db')}"
        else:
            self._admin = create_engine(parse_url(pg_url), isolation_level="AUTOCOMMIT")
            with self._admin.connect() as conn:
                conn.execute(text(f'CREATE SCHEMA "{self.schema}"'))
            url = make_url(pg_url).update_query_dict({"options": f"-csearch_path={self.schema}"})
            self.url = url.render_as_string(hide_password=False)
        self.store = open_store(self.url)
        upgrade(self.store)

    def close(self) -> None:
        self.store.dispose()
        if self.backend != "sqlite":
            with self._admin.connect() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))
            self._admin.dispose()


def start_workers(
    url: str, count: int, slots: int, folder: Path, profile: Path | None, tag: str
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(count):
        log = open(folder / f"worker{i}.log", "wb")
        profiler = ["-c", PROFILED, str(profile / f"{tag}-{i}.prof")] if profile else ["-m", "schedctl"]
        argv = [
            sys.executable,
            *profiler,
            "serve",
            "--role",
            "worker",
            "--db",
            url,
            "--identity",
            f"bench{i}",
            "--slots",
            str(slots),
            "--poll-interval",
            "0.1",
            "--successful-history",
            "100000000",
            "--log-level",
            "warning",
        ]
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    return procs


def wait_ready(folder: Path, count: int, procs: list[subprocess.Popen[bytes]]) -> None:
    """A worker is ready once it has made its first claim; an empty claim leaves no trace, so just wait for
    each process to have imported and connected (the log stays empty at warning level): poll the DB instead."""
    time.sleep(2.5)
    for proc in procs:
        if proc.poll() is not None:
            raise SystemExit(f"a worker exited early: see {folder}")


@dataclass
class Result:
    rate: float  # runs/s
    worker_ms: float  # CPU per run: the worker processes
    child_ms: float  # the jobs they ran
    guard_ms: float  # the workers' watchdogs (schedctl.worker.groupguard), told of every job's start and end
    db_ms: float  # the PostgreSQL server (0 for SQLite: it runs inside the workers)
    busy: float  # the whole machine's busy fraction of its CPUs over the window


def measure(backend: str, workers: int, runs: int, slots: int, pg_url: str, profile: Path | None) -> Result:
    with tempfile.TemporaryDirectory(prefix="schedctl-bench-") as tmp:
        folder = Path(tmp)
        db = Database(backend, pg_url, folder)
        procs = start_workers(db.url, workers, slots, folder, profile, f"{backend}-{workers}")
        try:
            wait_ready(folder, workers, procs)
            job = Job(
                id="noop",
                schedule="* * * * *",
                timezone="UTC",
                catch_up=CatchUp.SKIP,
                command="true",
                concurrency=Concurrency.ALLOW,
            )
            base = datetime.now(UTC) - timedelta(hours=1)
            idle_cpu = sum(_cpu_seconds(proc.pid) for proc in procs)  # start-up: imports, connecting
            idle_children = sum(_cpu_seconds(proc.pid, children=True) for proc in procs)
            guards_before = _guard_cpu(procs)
            db_before, machine_before = _postgres_cpu(), _machine_busy()
            start = time.perf_counter()
            with db.store.begin() as conn:
                claims.queue_runs(conn, job, [base + timedelta(microseconds=i) for i in range(runs)])
                if backend == "postgresql":
                    conn.execute(text("NOTIFY schedctl_runs"))
            done = 0
            while done < runs:
                time.sleep(0.05)
                with db.store.connect() as conn:
                    done = conn.execute(
                        select(func.count()).select_from(job_runs).where(job_runs.c.state == "succeeded")
                    ).scalar_one()
                if time.perf_counter() - start > 300:
                    raise SystemExit(f"{backend} x{workers}: only {done}/{runs} after 300 s")
            elapsed = time.perf_counter() - start
            cpu = sum(_cpu_seconds(proc.pid) for proc in procs) - idle_cpu
            children = sum(_cpu_seconds(proc.pid, children=True) for proc in procs) - idle_children
            guard_cpu = _guard_cpu(procs) - guards_before
            db_cpu = _postgres_cpu() - db_before if backend == "postgresql" else 0.0
            busy_after, total_after = _machine_busy()
            busy = (busy_after - machine_before[0]) / max(1, total_after - machine_before[1])
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)
            db.close()
    ms = 1000 / runs
    return Result(runs / elapsed, cpu * ms, children * ms, guard_cpu * ms, db_cpu * ms, busy)


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU of a process so far (Linux /proc), with its start-up; ``children``: of its reaped
    children instead."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / TICK


def _guard_cpu(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU so far of the workers' live watchdog processes (each worker's child running schedctl.worker.groupguard)."""
    total = 0.0
    for proc in procs:
        kids = []
        for task in Path(f"/proc/{proc.pid}/task").glob("*/children"):  # the worker thread starts it
            try:
                kids += task.read_text().split()
            except OSError:
                continue
        for kid in kids:
            try:
                if b"schedctl.worker.groupguard" in Path(f"/proc/{kid}/cmdline").read_bytes():
                    total += _cpu_seconds(int(kid))
            except (OSError, IndexError):
                continue
    return total


def _postgres_cpu() -> float:
    """CPU of every ``postgres`` process on this machine, plus what its exited backends used (counted in the
    postmaster's children fields once reaped). 0 when the server is elsewhere or its /proc is hidden."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(postgres)" not in text:
            continue
        fields = text.rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15]) / TICK  # backends have no children of their own
    return total


def _machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    parser.add_argument("--profile", type=Path, help="run each worker under cProfile; .prof files land here")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, Python {sys.version.split()[0]}"
    )
    print(
        "bare = subprocess.run(['true']) in a loop, measured right before and after each row (the machine is"
    )
    print("shared, so the spawn rate moves; each ratio is against the mean of its own two measurements)")
    print("CPU ms per run: worker = the worker processes, jobs = their children, guard = their watchdogs,")
    print("db = the PostgreSQL server;")
    print("busy = the whole machine over the window, of its CPUs")
    print(
        f"{'backend':<11} {'workers':>7} {'slots':>5} {'runs':>6} {'runs/s':>8} {'bare/s':>7} {'ratio':>6} "
        f"{'goal':>5} {'met':>4} {'worker':>7} {'jobs':>6} {'guard':>6} {'db':>6} {'busy':>5}"
    )
    missed = False
    for backend in args.backends.split(","):
        for workers in (int(w) for w in args.workers.split(",")):
            goal = GOAL_PG_4 if (backend, workers) == ("postgresql", 4) else GOAL_OTHER
            before = bare_spawn_rate(1.5)
            r = measure(backend, workers, args.runs, args.slots, args.postgres_url, args.profile)
            bare = (before + bare_spawn_rate(1.5)) / 2
            met = r.rate / bare >= goal
            missed |= not met
            print(
                f"{backend:<11} {workers:>7} {args.slots:>5} {args.runs:>6} {r.rate:>8.0f} {bare:>7.0f} "
                f"{r.rate / bare:>6.0%} {goal:>5.0%} {'yes' if met else 'NO':>4} {r.worker_ms:>7.2f} "
                f"{r.child_ms:>6.2f} {r.guard_ms:>6.2f} {r.db_ms:>6.2f} {r.busy:>5.0%}",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
