"""Chaos harness: real `schedctl serve` processes, real signals, a database restart, then the guarantees checked.

    python bench/chaos.py [--duration SECONDS] [--seed N] [--db URL] [--keep]

Without --db it starts a private PostgreSQL (initdb into a temporary folder, its own port, stopped at the end)
so it can restart the database without touching a shared one; with --db it runs there and skips the faults
that need a database restart. Three schedulers and three workers run second-resolution jobs of every catch-up
and concurrency policy; every job appends (job_id, scheduled_for, attempt, pid, start, end) to a ledger and
checkpoints as it goes. At the end the database and the ledger are checked; any violation exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOB_SCRIPT = HERE / "chaos_job.py"

# Settings a loaded 2-core machine meets: a heartbeat every second against a 6 s stale window leaves five
# missed beats before a takeover, so a takeover with no fault behind it is a finding, not noise.
LEASE = 3.0
RENEW = 1.0
HEARTBEAT = 1.0
STALE = 6.0
GRACE = 4.0  # the jobs' grace_period: SIGTERM to hand-back


@dataclass
class Fault:
    kind: str
    target: str
    start: float
    end: float
    leader: bool = False


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.violations.append(message)

    def say(self, message: str) -> None:
        self.lines.append(message)
        print(message, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """A throwaway PostgreSQL server; as root it runs as the `postgres` user, with a socket folder it owns."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "pgdata"
        self.sock = root / "pgsock"
        self.log = root / "postgres.log"
        self.port = free_port()
        self.bindir = self._bindir()

    @staticmethod
    def _bindir() -> Path:
        found = shutil.which("pg_ctl")
        if found:
            return Path(found).resolve().parent
        candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        if not candidates:
            raise SystemExit("chaos: no PostgreSQL server binaries (initdb, pg_ctl) found; pass --db URL")
        return candidates[-1]

    def _run(self, *args: str) -> None:
        preexec = None
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")

            def preexec() -> None:
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)

        done = subprocess.run(args, preexec_fn=preexec, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.decode(errors='replace').strip()}")

    def start(self) -> None:
        self.sock.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            for path in (self.root, self.sock):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.pg_ctl("start")

    def pg_ctl(self, action: str) -> None:
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        args = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60"]
        if action == "stop":
            self._run(*args, "-m", "fast", "stop")
        else:
            self._run(*args, "-o", opts, "-m", "fast", action)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class Cluster:
    """The schedctl processes, by name, each with its own log file."""

    def __init__(self, root: Path, db_url: str, jobs: Path) -> None:
        self.root = root
        self.db_url = db_url
        self.jobs = jobs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.generation: dict[str, int] = defaultdict(int)
        self.logs: list[Path] = []

    def start(self, name: str, skew: float | None = None) -> None:
        role = "scheduler" if name.startswith("s") else "worker"
        self.generation[name] += 1
        identity = f"{name}.{self.generation[name]}"
        log = self.root / f"{identity}.log"
        self.logs.append(log)
        args = [sys.executable, "-m", "schedctl", "serve", "--role", role, "--db", self.db_url,
                "--jobs", str(self.jobs), "--identity", identity, "--log-format", "json"]
        if role == "scheduler":
            args += ["--lease-duration", f"{LEASE}s", "--renew-interval", f"{RENEW}s"]
        else:
            args += ["--slots", "4", "--heartbeat-interval", f"{HEARTBEAT}s", "--stale-after", f"{STALE}s",
                     "--poll-interval", "0.5s",
                     # keep every finished row: the check reads the per-tick record of the whole run
                     "--successful-history", "1000000", "--failed-history", "1000000"]
        env = dict(os.environ)
        if skew is not None:
            env["SCHEDCTL_CLOCK_SKEW"] = str(skew)
        with open(log, "ab") as out:
            self.procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)

    def identity(self, name: str) -> str:
        return f"{name}.{self.generation[name]}"

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def signal(self, name: str, sig: int) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def stop_all(self, timeout: float = 30.0) -> dict[str, int | None]:
        for name in self.procs:
            self.signal(name, signal.SIGCONT)
            self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = None
        return codes


def write_jobs(path: Path, ledger: Path) -> dict[str, dict[str, object]]:
    def cmd(steps: int, step: float) -> list[str]:
        return [sys.executable, str(JOB_SCRIPT), str(ledger), str(steps), str(step)]

    jobs: dict[str, dict[str, object]] = {
        # every tick must be claimed and run: no hole, whatever the faults
        "ledger-all": {"schedule": "*/2 * * * * *", "catch_up": "all", "max_catch_up": 1000,
                       "concurrency": "allow", "command": cmd(1, 0.2)},
        "ledger-skip": {"schedule": "*/3 * * * * *", "catch_up": "skip", "concurrency": "allow",
                        "command": cmd(1, 0.2)},
        "ledger-latest": {"schedule": "*/5 * * * * *", "catch_up": "latest", "concurrency": "allow",
                          "command": cmd(1, 0.2)},
        # long enough to span several faults; checkpoints every second; one at a time
        "backfill-forbid": {"schedule": "*/15 * * * * *", "catch_up": "all", "max_catch_up": 1000,
                            "concurrency": "forbid", "command": cmd(24, 1.0)},
        "report-replace": {"schedule": "*/10 * * * * *", "catch_up": "latest", "concurrency": "replace",
                           "command": cmd(14, 1.0)},
    }
    import tomli_w

    doc = {"jobs": {jid: {**spec, "timezone": "UTC", "grace_period": f"{GRACE}s"} for jid, spec in jobs.items()}}
    path.write_text(tomli_w.dumps(doc))
    return jobs


def current_leader(engine: object) -> str | None:
    from sqlalchemy import select

    from schedctl.store.dialect import db_now
    from schedctl.store.schema import scheduler_lease

    try:
        with engine.connect() as conn:  # type: ignore[attr-defined]
            row = conn.execute(
                select(scheduler_lease.c.holder).where(scheduler_lease.c.expires_at > db_now())
            ).first()
    except Exception:  # the database may be restarting; the harness just asks again
        return None
    return None if row is None else str(row[0])


def inject(args: argparse.Namespace, cluster: Cluster, pg: PrivatePostgres | None, engine: object) -> list[Fault]:
    rng = random.Random(args.seed)
    kinds = ["kill_leader", "term_leader", "stop_leader", "kill_worker", "term_worker", "stop_worker",
             "restart_process", "skewed_replica"]
    if pg is not None:
        kinds.append("db_restart")
    faults: list[Fault] = []
    started = time.monotonic()
    end = started + args.duration
    pending_restart: list[tuple[float, str]] = []
    order = list(kinds)
    rng.shuffle(order)  # every kind at least once in a run of a few minutes, then random ones
    while time.monotonic() < end - 10:
        time.sleep(rng.uniform(4.0, 9.0))
        now = time.monotonic()
        for due, name in list(pending_restart):
            if now >= due:
                cluster.start(name)
                pending_restart.remove((due, name))
        kind = order.pop() if order else rng.choice(kinds)
        leader_identity = current_leader(engine)
        leader = next((n for n in cluster.procs if cluster.identity(n) == leader_identity), None)
        workers = [n for n in cluster.procs if n.startswith("w") and cluster.alive(n)]
        t0 = time.time()
        if kind in ("kill_leader", "term_leader", "stop_leader") and leader is not None:
            if kind == "kill_leader":
                cluster.signal(leader, signal.SIGKILL)
                pending_restart.append((now + 3, leader))
            elif kind == "term_leader":
                cluster.signal(leader, signal.SIGTERM)
                pending_restart.append((now + 3, leader))
            else:
                cluster.signal(leader, signal.SIGSTOP)
                time.sleep(LEASE + 2)
                cluster.signal(leader, signal.SIGCONT)
            faults.append(Fault(kind, cluster.identity(leader), t0, time.time(), leader=True))
        elif kind in ("kill_worker", "term_worker", "stop_worker") and workers:
            victim = rng.choice(workers)
            identity = cluster.identity(victim)
            if kind == "kill_worker":
                cluster.signal(victim, signal.SIGKILL)
                pending_restart.append((now + 2, victim))
            elif kind == "term_worker":
                cluster.signal(victim, signal.SIGTERM)
                pending_restart.append((now + GRACE + 2, victim))
            else:
                cluster.signal(victim, signal.SIGSTOP)
                time.sleep(STALE + 3)
                cluster.signal(victim, signal.SIGCONT)
            faults.append(Fault(kind, identity, t0, time.time() + STALE))
        elif kind == "restart_process":
            victim = rng.choice(sorted(cluster.procs))
            identity = cluster.identity(victim)
            cluster.signal(victim, signal.SIGTERM)
            try:
                cluster.procs[victim].wait(GRACE + 10)
            except subprocess.TimeoutExpired:
                cluster.signal(victim, signal.SIGKILL)
            cluster.start(victim)
            faults.append(Fault(kind, identity, t0, time.time() + STALE, leader=identity == leader_identity))
        elif kind == "skewed_replica":
            # Its clock runs five minutes fast: it must neither dispatch early nor steal the lease.
            cluster.start("s-skewed", skew=300.0)
            time.sleep(rng.uniform(5, 10))
            cluster.signal("s-skewed", signal.SIGKILL)
            faults.append(Fault(kind, cluster.identity("s-skewed"), t0, time.time()))
        elif kind == "db_restart" and pg is not None:
            pg.pg_ctl("restart")
            faults.append(Fault(kind, "postgres", t0, time.time() + STALE))
        else:
            continue
        print(f"chaos: {datetime.now(UTC):%H:%M:%S} fault {kind} on {faults[-1].target}", flush=True)
    for _, name in pending_restart:
        cluster.start(name)
    return faults


def read_ledger(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def overlaps_fault(start: float, end: float, faults: list[Fault]) -> bool:
    return any(f.start - 1.0 <= end and start <= f.end + 1.0 for f in faults)


def check(args: argparse.Namespace, engine: object, jobs: dict[str, dict[str, object]], ledger: list[dict],
          faults: list[Fault], window: tuple[datetime, datetime], logs: list[Path], report: Report) -> None:
    from sqlalchemy import select

    from schedctl.cron import schedule_for
    from schedctl.store.schema import job_runs, job_state, lease_terms

    with engine.connect() as conn:  # type: ignore[attr-defined]
        runs = conn.execute(select(job_runs)).mappings().all()
        states = {r.job_id: r for r in conn.execute(select(job_state)).mappings().all()}
        terms = conn.execute(select(lease_terms).order_by(lease_terms.c.term)).mappings().all()
    by_job: dict[str, list] = defaultdict(list)
    for r in runs:
        by_job[r["job_id"]].append(r)
    lo, hi = window
    report.say("\nticks expected vs claimed (window %s .. %s)" % (lo.isoformat(), hi.isoformat()))
    for job_id, spec in jobs.items():
        state = states.get(job_id)
        if state is None:
            report.fail(f"{job_id}: never seen by any leader")
            continue
        start = max(lo, state["defined_at"])
        expected = [f.utc for f in schedule_for(str(spec["schedule"]), "UTC").fires(start, hi)]
        claimed = {r["scheduled_for"] for r in by_job[job_id] if not r["manual"]}
        in_window = [t for t in expected if t in claimed]
        holes = [t for t in expected if t not in claimed]
        counts = defaultdict(int)
        for r in by_job[job_id]:
            if start < r["scheduled_for"] < hi:
                counts[r["state"]] += 1
        report.say(f"  {job_id:16} expected {len(expected):4}  claimed {len(in_window):4}  holes {len(holes):3}  "
                   + " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        if holes:
            # Failover and restarts take far less than the catch-up grace, so no policy may leave a hole here.
            report.fail(f"{job_id}: {len(holes)} ticks never claimed, first {holes[0].isoformat()}")
    # Runs that ended in a terminal state: everything dispatched before the drain began must have finished.
    unfinished = [r for r in runs if r["state"] in ("queued", "running") and r["scheduled_for"] < hi]
    report.say(f"\nruns: {len(runs)} rows; unfinished after the drain: {len(unfinished)}")
    for r in unfinished[:10]:
        report.fail(f"{r['job_id']} {r['scheduled_for'].isoformat()} still {r['state']} after the drain")
    # Early dispatch: a skewed replica must never start a run before its tick.
    starts = [e for e in ledger if e["kind"] == "start"]
    early = [e for e in starts if float(e["at"]) < ts(str(e["scheduled_for"])) - 0.05]
    report.say(f"runs started before their tick: {len(early)}")
    for e in early[:5]:
        report.fail(f"{e['job_id']} {e['scheduled_for']} started {ts(str(e['scheduled_for'])) - float(e['at']):.2f}s early")
    # Re-executions are allowed only across a fault (at-least-once).
    executions: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in starts:
        executions[(str(e["job_id"]), str(e["scheduled_for"]))].append(e)
    ends = {(str(e["job_id"]), str(e["scheduled_for"]), int(e["attempt"])): float(e["at"])
            for e in ledger if e["kind"] in ("end", "stopped")}
    again = 0
    unexplained = 0
    for key, group in executions.items():
        group.sort(key=lambda e: float(e["at"]))
        for prev, nxt in zip(group, group[1:], strict=False):
            again += 1
            prev_end = ends.get((key[0], key[1], int(prev["attempt"])), float(nxt["at"]))
            if not overlaps_fault(float(prev["at"]), max(prev_end, float(nxt["at"])), faults):
                unexplained += 1
                report.fail(f"{key[0]} {key[1]} executed again (attempt {nxt['attempt']}) with no fault behind it")
    report.say(f"re-executions: {again} (outside any fault window: {unexplained})")
    resumed = [e for e in starts if int(e.get("resumed_from", 0) or 0) > 0]
    report.say(f"work resumed from checkpoints: {len(resumed)} runs")
    # forbid: never two executions of the job at once, except a partitioned copy across a fault
    intervals = sorted(
        (float(e["at"]), ends.get((str(e["job_id"]), str(e["scheduled_for"]), int(e["attempt"])), float(e["at"])))
        for e in starts if e["job_id"] == "backfill-forbid"
    )
    for (a0, a1), (b0, b1) in zip(intervals, intervals[1:], strict=False):
        if b0 < a1 - 0.05 and not overlaps_fault(b0, a1, faults):
            report.fail(f"backfill-forbid ran two copies at once at {datetime.fromtimestamp(b0, UTC).isoformat()}")
    # One leader at a time: terms never overlap by the database's clock.
    for a, b in zip(terms, terms[1:], strict=False):
        if b["acquired_at"] < (a["ended_at"] or a["expires_at"]) - timedelta(milliseconds=1):
            if b["acquired_at"] < a["expires_at"] and a["end_reason"] != "released":
                report.fail(f"terms {a['term']} and {b['term']} overlap")
    report.say(f"lease terms: {len(terms)}")
    # Time to a new leader after each leader fault.
    gaps = []
    for f in faults:
        if not f.leader:
            continue
        nxt = [t for t in terms if t["acquired_at"].timestamp() > f.start]
        if not nxt:
            report.fail(f"no new leader after {f.kind} at {datetime.fromtimestamp(f.start, UTC).isoformat()}")
            continue
        gap = nxt[0]["acquired_at"].timestamp() - f.start
        gaps.append((f.kind, gap))
        # SIGKILL: the lease must lapse first; SIGTERM releases it. Slack covers a loaded machine.
        bound = LEASE + RENEW + 3.0
        if gap > bound:
            report.fail(f"{f.kind}: new leader after {gap:.1f}s (bound {bound:.1f}s)")
    for kind in sorted({k for k, _ in gaps}):
        values = [g for k, g in gaps if k == kind]
        report.say(f"time to new leader after {kind}: min {min(values):.2f}s median "
                   f"{statistics.median(values):.2f}s max {max(values):.2f}s (n={len(values)})")
    # Zero unhandled exceptions in any process's log.
    tracebacks = 0
    for log in logs:
        if log.exists():
            text = log.read_text(errors="replace")
            if "Traceback (most recent call last)" in text:
                tracebacks += 1
                report.fail(f"unhandled exception in {log.name}")
    report.say(f"logs with a traceback: {tracebacks} of {len(logs)}")


def wait_for_leader(engine: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if current_leader(engine):
            return
        time.sleep(0.2)
    raise SystemExit("chaos: no scheduler became leader")


def drain(engine: object, before: datetime, timeout: float) -> None:
    from sqlalchemy import func, select

    from schedctl.store.schema import job_runs

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:  # type: ignore[attr-defined]
            left = conn.execute(
                select(func.count()).select_from(job_runs).where(
                    job_runs.c.state.in_(["queued", "running"]), job_runs.c.scheduled_for < before
                )
            ).scalar_one()
        if left == 0:
            return
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of fault injection")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", help="run against this database (no database restarts)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, ledger)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="schedctl-chaos-"))
    root.chmod(0o755)  # the private PostgreSQL runs as `postgres` and must reach its folder below
    pg = None
    report = Report()
    try:
        if args.db:
            db_url = args.db
        else:
            pg = PrivatePostgres(root / "pg")
            pg.root.mkdir()
            pg.start()
            db_url = pg.url
        from schedctl.store import open_store, safe_url
        from schedctl.store.migrate import upgrade

        store = open_store(db_url)
        upgrade(store)
        ledger = root / "ledger.jsonl"
        jobs_path = root / "jobs.toml"
        jobs = write_jobs(jobs_path, ledger)
        print(f"chaos: seed {args.seed}, duration {args.duration:.0f}s, database {safe_url(db_url)}, folder {root}",
              flush=True)
        cluster = Cluster(root, db_url, jobs_path)
        for name in ("s1", "s2", "s3", "w1", "w2", "w3"):
            cluster.start(name)
        wait_for_leader(store.engine)
        window_start = datetime.now(UTC) + timedelta(seconds=2)
        faults = inject(args, cluster, pg, store.engine)
        window_end = datetime.now(UTC)
        # Let everything dispatched finish with all processes healthy before checking terminal states.
        drain(store.engine, window_end, timeout=45.0)
        codes = cluster.stop_all()
        report.say("\nfaults injected: " + ", ".join(
            f"{k}={sum(1 for f in faults if f.kind == k)}" for k in sorted({f.kind for f in faults})))
        bad_exit = {n: c for n, c in codes.items() if c not in (0, -signal.SIGKILL)}
        if bad_exit:
            report.fail(f"processes that did not exit 0 on SIGTERM: {bad_exit}")
        check(args, store.engine, jobs, read_ledger(ledger), faults, (window_start, window_end),
              cluster.logs, report)
        store.dispose()
    except RuntimeError as exc:
        report.fail(f"harness: {exc}")
    finally:
        if pg is not None and pg.data.exists():
            try:
                pg.pg_ctl("stop")
            except Exception as exc:  # a stop failure must not hide the report
                print(f"chaos: stopping the private PostgreSQL failed: {exc}", file=sys.stderr)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nviolations: {len(report.violations)}")
    for v in report.violations:
        print(f"  VIOLATION {v}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
