"""Worker throughput: no-op runs (`command = "true"`) completed per second, against the bare spawn rate.

    python bench/worker.py [--runs N] [--slots S] [--workers 1,2,4] [--backends sqlite,postgresql]
                           [--postgres-url URL]

For each backend and worker count: start that many real `schedctl serve --role worker` processes on an empty
database, wait until every one is polling, queue N runs in one transaction (plus NOTIFY on PostgreSQL), and
time until all N are `succeeded`. The bare rate is `subprocess.run(["true"])` in a loop in one process: what
one Python process can spawn with nothing else to do. Goal: 4 workers reach >= 50% of it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, func, make_url, select, text

from schedctl.job import CatchUp, Concurrency, Job
from schedctl.store import claims, open_store, parse_url
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

DEFAULT_PG = os.environ.get("SCHEDCTL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


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


def start_workers(url: str, count: int, slots: int, folder: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(count):
        log = open(folder / f"worker{i}.log", "wb")
        argv = [
            sys.executable,
            "-m",
            "schedctl",
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


def measure(backend: str, workers: int, runs: int, slots: int, pg_url: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="schedctl-bench-") as tmp:
        folder = Path(tmp)
        db = Database(backend, pg_url, folder)
        procs = start_workers(db.url, workers, slots, folder)
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
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)
            db.close()
    return runs / elapsed, 1000 * cpu / runs


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux /proc), with its start-up."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, Python {sys.version.split()[0]}"
    )
    print(
        "bare = subprocess.run(['true']) in a loop, measured right before and after each row (the machine is"
    )
    print("shared, so the spawn rate moves; each ratio is against the mean of its own two measurements)")
    print(
        f"{'backend':<11} {'workers':>7} {'slots':>5} {'runs':>6} {'runs/s':>8} {'bare/s':>7} {'ratio':>6} "
        f"{'worker CPU ms/run':>18}"
    )
    for backend in args.backends.split(","):
        for workers in (int(w) for w in args.workers.split(",")):
            before = bare_spawn_rate(1.5)
            rate, cpu_ms = measure(backend, workers, args.runs, args.slots, args.postgres_url)
            bare = (before + bare_spawn_rate(1.5)) / 2
            print(
                f"{backend:<11} {workers:>7} {args.slots:>5} {args.runs:>6} {rate:>8.0f} {bare:>7.0f} "
                f"{rate / bare:>6.0%} {cpu_ms:>18.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
