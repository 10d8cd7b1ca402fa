"""Steady-state lag: from a tick's scheduled instant to the start of the job's process, with real processes.

    python bench/steady_lag.py [--db URL ...] [--minutes M] [--jobs N] [--slots S] [--role split|all]

``--db`` may be repeated; ``sqlite`` means a temporary SQLite file. Default: SQLite, then PostgreSQL at
$SCHEDCTL_TEST_POSTGRES_URL (or postgresql://postgres@127.0.0.1:5432/test). A PostgreSQL URL gets a private
database (created and dropped, so its NOTIFY channel is private too); a MySQL URL a private database.

For each database: N jobs with six-field schedules at second offsets ``i % 60`` (N=300: 5 due every second,
300 a minute), ``concurrency = "allow"``, whose command is a tiny compiled probe that reads the real-time
clock first thing and appends ``job_id SCHEDCTL_SCHEDULED_FOR start`` to a ledger. One ``schedctl serve
--role scheduler`` and one ``--role worker`` process (or one ``--role all``) run for M minutes; then it prints
p50/p90/p99/max of

- start:    probe start - scheduled instant (the goal: p99 <= 50 ms on PostgreSQL, <= poll interval elsewhere)
- dispatch: job_runs.queued_at - scheduled instant (the scheduler's commit side: it sleeps until the fire)
- claim:    job_runs.started_at - scheduled instant (the worker's claim, by the database clock)

and the ticks that never started. Then an idle phase: a scheduler alone with one hourly job for a while;
per-thread wakeups a second (voluntary context switches) and CPU show whether it sleeps until the next fire
or wakes on a fixed tick. The first 5 s of every run are warm-up and not counted.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import launch  # noqa: E402  (one launcher for the suite and the benchmarks)

DEFAULT_PG = os.environ.get("SCHEDCTL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
BIN = Path(sys.executable).parent / "schedctl"
SCHEDCTL = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "schedctl"]
WARMUP = 5.0
CLK_TCK = os.sysconf("SC_CLK_TCK")

PROBE_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* first thing: the process start as the job sees it */
    const char *id = getenv("SCHEDCTL_JOB_ID"), *at = getenv("SCHEDCTL_SCHEDULED_FOR");
    char line[512];
    int n = snprintf(line, sizeof line, "%s %s %lld.%09ld\n", id ? id : "-", at ? at : "-",
                     (long long)ts.tv_sec, ts.tv_nsec);
    int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, line, n) != n) return 1;
    return close(fd);
}
"""


# -- private databases ---------------------------------------------------------------------------------------
class Private:
    """A private database for one run: a temp SQLite file, or a fresh PostgreSQL / MySQL database."""

    def __init__(self, url: str, tmp: Path) -> None:
        from sqlalchemy import create_engine, make_url, text

        self.name = f"bench_{uuid.uuid4().hex[:8]}"
        self.admin: Any = None
        self._text = text
        if url == "sqlite" or url.startswith("sqlite"):
            self.backend = "sqlite"
            self.url = f"sqlite:///{tmp / (self.name + '.db')}" if url == "sqlite" else url
            return
        from schedctl.store import parse_url

        parsed = parse_url(url)
        self.backend = parsed.get_backend_name()
        self.admin = create_engine(parsed, isolation_level="AUTOCOMMIT")
        quote = '"' if self.backend == "postgresql" else "`"
        with self.admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {quote}{self.name}{quote}"))
        self.url = make_url(url).set(database=self.name).render_as_string(hide_password=False)

    def drop(self) -> None:
        if self.admin is None:
            return
        with self.admin.connect() as conn:
            if self.backend == "postgresql":
                conn.execute(self._text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
            else:
                conn.execute(self._text(f"DROP DATABASE IF EXISTS `{self.name}`"))
        self.admin.dispose()


def reachable(url: str) -> str | None:
    """None when the server answers, else why not (one line)."""
    if url == "sqlite" or url.startswith("sqlite"):
        return None
    from sqlalchemy import create_engine, text

    from schedctl.store import parse_url

    try:
        engine = create_engine(parse_url(url))
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any driver error: the benchmark skips this database
        return str(exc).splitlines()[0]
    return None


def migrate(url: str) -> None:
    from schedctl.store import open_store
    from schedctl.store.migrate import upgrade

    store = open_store(url)
    upgrade(store)
    store.dispose()


# -- processes -----------------------------------------------------------------------------------------------
def serve(url: str, jobs: Path | None, role: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    args = ["--role", role, "--db", url, "--log-level", "warning", *extra]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    return launch.serve(*args, log=log, append=True, program=SCHEDCTL)


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_switches(pid: int) -> dict[int, int]:
    """Voluntary context switches per thread: one per sleep that ended, i.e. per wake-up."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    out[int(task.name)] = int(line.split()[1])
        except OSError:
            continue
    return out


# -- the probe -----------------------------------------------------------------------------------------------
def build_probe(tmp: Path, ledger: Path) -> tuple[list[str], str]:
    """The job's command and what it is; a compiled probe when a C compiler exists, else bash."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        src, exe = tmp / "probe.c", tmp / "probe"
        src.write_text(PROBE_C)
        for flags in (["-O2", "-static"], ["-O2"]):
            if subprocess.run([cc, *flags, "-o", str(exe), str(src)], capture_output=True).returncode == 0:
                return [str(exe), str(ledger)], f"compiled probe ({' '.join(flags)})"
    script = f'printf "%s %s %s\\n" "$SCHEDCTL_JOB_ID" "$SCHEDCTL_SCHEDULED_FOR" "$EPOCHREALTIME" >> {ledger}'
    return ["/bin/bash", "-c", script], "bash -c with $EPOCHREALTIME (no C compiler: adds bash start-up)"


def write_jobs(path: Path, count: int, command: list[str]) -> None:
    argv = ", ".join(f'"{part}"' for part in command)
    lines = [
        f'[jobs.steady-{i:05d}]\nschedule = "{i % 60} * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\n'
        f'concurrency = "allow"\ncommand = [{argv}]\n'
        for i in range(count)
    ]
    path.write_text("\n".join(lines))


# -- figures -------------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(name: str, ms: list[float]) -> str:
    if not ms:
        return f"  {name:<9} no samples"
    return (
        f"  {name:<9} n={len(ms):<6} p50 {pct(ms, 0.5):7.1f} ms  p90 {pct(ms, 0.9):7.1f} ms  "
        f"p99 {pct(ms, 0.99):7.1f} ms  max {max(ms):7.1f} ms"
    )


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def read_ledger(ledger: Path, since: float, until: float) -> dict[tuple[str, datetime], float]:
    starts: dict[tuple[str, datetime], float] = {}
    if not ledger.exists():
        return starts
    for line in ledger.read_text().splitlines():
        job_id, at, started = line.split()
        instant = parse_instant(at)
        if since <= instant.timestamp() < until:
            starts[(job_id, instant)] = float(started)
    return starts


def read_rows(url: str, since: float, until: float) -> list[tuple[str, datetime, datetime, datetime | None]]:
    from sqlalchemy import select

    from schedctl.store import open_store
    from schedctl.store.schema import job_runs

    store = open_store(url)
    lo, hi = datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(until, UTC)
    query = select(
        job_runs.c.job_id, job_runs.c.scheduled_for, job_runs.c.queued_at, job_runs.c.started_at
    ).where(job_runs.c.scheduled_for >= lo, job_runs.c.scheduled_for < hi, job_runs.c.manual.is_(False))
    with store.engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(query)]
    store.dispose()
    return rows


def expected_ticks(count: int, since: float, until: float) -> int:
    per_second = [0] * 60
    for i in range(count):
        per_second[i % 60] += 1
    return sum(per_second[s % 60] for s in range(math.ceil(since), math.ceil(until)))


# -- one database ----------------------------------------------------------------------------------------------
def steady(url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    private = Private(url, tmp)
    out: dict[str, Any] = {"backend": private.backend}
    try:
        migrate(private.url)
        ledger = tmp / f"ledger-{private.name}"
        command, out["probe"] = build_probe(tmp, ledger)
        jobs = tmp / f"jobs-{private.name}.toml"
        write_jobs(jobs, args.jobs, command)
        worker_opts = [
            "--slots", str(args.slots), "--poll-interval", args.poll_interval,
            "--successful-history", "1000000", "--failed-history", "1000000",
        ]  # fmt: skip
        log = tmp / f"serve-{private.name}.log"
        if args.role == "all":
            procs = [serve(private.url, jobs, "all", log, *worker_opts)]
        else:
            procs = [
                serve(private.url, jobs, "scheduler", log),
                serve(private.url, None, "worker", log, *worker_opts),
            ]
        started = time.time()
        since = started + WARMUP + 2.0  # process start-up (imports) plus warm-up
        until = since + args.minutes * 60
        cpu0: dict[int, float] = {}
        try:
            time.sleep(max(0.0, since - time.time()))
            cpu0 = {p.pid: cpu_seconds(p.pid) for p in procs}
            time.sleep(max(0.0, until - time.time()))
            out["cpu"] = {p.pid: (cpu_seconds(p.pid) - cpu0[p.pid]) / (until - since) for p in procs}
            time.sleep(1.5)  # let the last ticks start and commit
            out["alive"] = all(p.poll() is None for p in procs)
        finally:
            launch.stop(procs)
        out["roles"] = ["all"] if args.role == "all" else ["scheduler", "worker"]
        starts = read_ledger(ledger, since, until)
        rows = read_rows(private.url, since, until)
        out["expected"] = expected_ticks(args.jobs, since, until)
        out["rows"] = len(rows)
        out["started"] = len(starts)
        out["start_ms"] = [(t - key[1].timestamp()) * 1000 for key, t in starts.items()]
        out["dispatch_ms"] = [(q - s).total_seconds() * 1000 for _, s, q, _ in rows]
        out["claim_ms"] = [(c - s).total_seconds() * 1000 for _, s, _, c in rows if c is not None]
        out["log_tail"] = log.read_text().splitlines()[-5:] if log.exists() else []
        out["idle"] = idle(private.url, tmp, args.idle_seconds)
    finally:
        private.drop()
    return out


def idle(url: str, tmp: Path, seconds: float) -> dict[str, Any]:
    """A leader with one hourly job and nothing due: how often each thread wakes, and the CPU it costs."""
    jobs = tmp / f"idle-{uuid.uuid4().hex[:6]}.toml"
    jobs.write_text(
        '[jobs.hourly]\nschedule = "0 0 * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'
    )
    proc = serve(url, jobs, "scheduler", tmp / "idle.log")
    try:
        time.sleep(WARMUP)  # imports, lease acquisition, first pass
        cpu0, sw0, t0 = cpu_seconds(proc.pid), thread_switches(proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, sw1, t1 = cpu_seconds(proc.pid), thread_switches(proc.pid), time.monotonic()
    finally:
        launch.stop([proc])
    span = t1 - t0
    main_rate = (sw1.get(proc.pid, 0) - sw0.get(proc.pid, 0)) / span
    rates = sorted(((sw1[t] - sw0.get(t, 0)) / span for t in sw1 if t != proc.pid), reverse=True)
    return {
        "seconds": span,
        "cpu_pct": 100 * (cpu1 - cpu0) / span,
        "main_wakeups": main_rate,
        "wakeups_per_s": rates,
    }


# -- main ------------------------------------------------------------------------------------------------------
def report(url: str, out: dict[str, Any], args: argparse.Namespace) -> bool:
    from schedctl.store import safe_url

    poll_ms = float(args.poll_interval.rstrip("s")) * 1000
    goal = 50.0 if out["backend"] == "postgresql" else poll_ms
    p99 = pct(out["start_ms"], 0.99)
    missing = out["expected"] - out["started"]
    ok = p99 <= goal and missing == 0 and out["alive"]
    print(
        f"\n{out['backend']} ({safe_url(url) if url != 'sqlite' else 'temporary file'}), roles {out['roles']}, "
        f"{args.jobs} jobs ({args.jobs} ticks a minute), {args.minutes} min measured, slots {args.slots}, "
        f"poll {args.poll_interval}; job command: {out['probe']}"
    )
    print(
        f"  ticks due {out['expected']}, rows {out['rows']}, process starts {out['started']}, "
        f"never started {missing}, processes alive at the end: {out['alive']}"
    )
    print(
        summary("start", out["start_ms"])
        + f"   goal p99 <= {goal:.0f} ms: {'OK' if p99 <= goal else 'MISSED'}"
    )
    print(summary("dispatch", out["dispatch_ms"]))
    print(summary("claim", out["claim_ms"]))
    cpu = ", ".join(
        f"{role} {100 * c:.1f}%" for role, c in zip(out["roles"], out["cpu"].values(), strict=True)
    )
    print(f"  CPU of one core while running: {cpu}")
    idle_ = out["idle"]
    rates = ", ".join(f"{r:.1f}" for r in idle_["wakeups_per_s"])
    print(
        f"  idle leader (one hourly job, {idle_['seconds']:.0f} s): CPU {idle_['cpu_pct']:.2f}% of one core, "
        f"wake-ups/s: main thread (signal supervisor) {idle_['main_wakeups']:.1f}, other threads {rates}"
    )
    if not out["alive"]:
        print("  a serve process died; last log lines:\n    " + "\n    ".join(out["log_tail"]))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", action="append", help="database URL, or 'sqlite' (repeatable)")
    parser.add_argument("--minutes", type=float, default=1.5, help="measured minutes per database")
    parser.add_argument("--jobs", type=int, default=300, help="jobs (each fires once a minute)")
    parser.add_argument("--slots", type=int, default=8, help="worker slots")
    parser.add_argument("--poll-interval", default="1s", help="worker poll interval (the SQLite goal)")
    parser.add_argument(
        "--role",
        choices=["split", "all"],
        default="split",
        help="split: a scheduler and a worker process; all: one --role all process",
    )
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument(
        "--cpu-hogs",
        type=int,
        default=0,
        help="busy-loop processes to run beside (a shared, loaded machine on purpose; 2 saturate 2 cores)",
    )
    args = parser.parse_args()
    urls = args.db or ["sqlite", DEFAULT_PG]
    print(
        f"steady-state lag, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    ok = True
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.cpu_hogs)]
    if hogs:
        print(f"with {len(hogs)} busy-loop processes beside the run")
    try:
        with tempfile.TemporaryDirectory(prefix="schedctl-steady-") as tmp:
            for url in urls:
                why = reachable(url)
                if why is not None:
                    print(f"\n{url}: skipped, not reachable: {why}")
                    continue
                ok = report(url, steady(url, args, Path(tmp)), args) and ok
                print(f"  load average at the end: {os.getloadavg()[0]:.2f}")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
