"""Chaos harness: real `schedctl serve` processes, real signals, a database restart, then the guarantees checked.

    python bench/chaos.py [--duration SECONDS] [--seed N] [--db URL] [--keep]

Without --db it starts a private PostgreSQL (initdb into a temporary folder, its own port, stopped at the end)
so it can restart the database without touching a shared one; with --db it runs there and skips the faults
that need a database restart. Three schedulers and three workers run second-resolution jobs of every catch-up
and concurrency policy; every job appends (job_id, scheduled_for, attempt, pid, start, end) to a ledger and
checkpoints as it goes. At the end the database, the ledger and the processes' JSON logs are checked; any
violation exits 1. It finishes within its duration plus 60 s; Ctrl-C or SIGTERM stops every process it started.

What it prints: faults injected by kind; ticks expected vs claimed per job and whether each policy did exactly
what it allows; runs left unfinished; runs started before their tick; re-executions, each attributed to the
fault that explains it (a worker fault on the worker that ran the earlier attempt, or a database restart);
takeovers, likewise; hand-backs and whether the next attempt resumed exactly from the checkpoint; time to a
new leader after each leader fault; warning/error events by kind; logs with a traceback.

Network faults (silent partitions with no RST, a slow link) are in ``bench/partition.py``, which reuses this
module's private PostgreSQL and checks and puts each process behind a link it can cut (``bench/netlink.py``).
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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JOB_SCRIPT = HERE / "chaos_job.py"

# Settings a loaded 2-core machine meets: a heartbeat every second against a 6 s stale window leaves five
# missed beats before a takeover, so a takeover with no fault behind it is a finding, not noise.
LEASE = 3.0
RENEW = 1.0
HEARTBEAT = 1.0
STALE = 6.0
GRACE = 4.0  # the jobs' grace_period: SIGTERM to hand-back
OVERRUN = 60.0  # the whole run, set-up to report, fits in duration + this
SLACK = 1.0  # seconds around a fault window for the clock differences between the harness and the processes


@dataclass
class Fault:
    kind: str
    target: str  # the identity of the process it hit ("postgres" for a database restart)
    start: float
    end: float  # until when its effects may last (a takeover needs the stale window after the restart)
    leader: bool = False

    def covers(self, start: float, end: float) -> bool:
        return self.start - SLACK <= end and start <= self.end + SLACK

    def explains(self, worker: str | None, start: float, end: float) -> bool:
        """A re-execution or takeover of a run held by ``worker`` during [start, end]."""
        hits_worker = self.target == worker or self.kind == "db_restart"
        return hits_worker and self.covers(start, end)


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

    def _own_folders(self) -> None:
        """The server's folder and socket folder, owned by `postgres` when root starts it."""
        self.sock.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            for path in (self.root, self.sock):
                os.chown(path, user.pw_uid, user.pw_gid)

    def start(self) -> None:
        self._own_folders()
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"
        )
        self.pg_ctl("start")

    def pg_ctl(self, action: str) -> None:
        opts = (
            f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        )
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
        self.every: list[subprocess.Popen[bytes]] = []  # every process ever started, for the final cleanup
        self.generation: dict[str, int] = defaultdict(int)
        self.logs: list[Path] = []
        self.slots = 4

    def start(self, name: str, skew: float | None = None) -> None:
        role = "scheduler" if name.startswith("s") else "worker"
        self.generation[name] += 1
        identity = f"{name}.{self.generation[name]}"
        log = self.root / f"{identity}.log"
        self.logs.append(log)
        args = [
            sys.executable,
            "-m",
            "schedctl",
            "serve",
            "--role",
            role,
            "--db",
            self.db_url,
            "--jobs",
            str(self.jobs),
            "--identity",
            identity,
            "--log-format",
            "json",
        ]
        if role == "scheduler":
            args += ["--lease-duration", f"{LEASE}s", "--renew-interval", f"{RENEW}s"]
        else:
            args += [
                "--slots",
                str(self.slots),
                "--heartbeat-interval",
                f"{HEARTBEAT}s",
                "--stale-after",
                f"{STALE}s",
                "--poll-interval",
                "0.5s",
                # keep every finished row: the check reads the per-tick record of the whole run
                "--successful-history",
                "1000000",
                "--failed-history",
                "1000000",
            ]
        env = dict(os.environ)
        if skew is not None:
            env["SCHEDCTL_CLOCK_SKEW"] = str(skew)
        with open(log, "ab") as out:
            self.procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.every.append(self.procs[name])

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
        """SIGTERM to the current processes (each must exit 0); earlier generations are reaped or killed."""
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
        self.kill_all()
        return codes

    def kill_all(self) -> None:
        """Whatever still runs, whatever happened to the harness: no process outlives it."""
        for proc in self.every:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGCONT)
                    proc.kill()
                except ProcessLookupError:
                    pass
        for proc in self.every:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


def write_jobs(path: Path, ledger: Path) -> dict[str, dict[str, object]]:
    def cmd(steps: int, step: float) -> list[str]:
        return [sys.executable, str(JOB_SCRIPT), str(ledger), str(steps), str(step)]

    jobs: dict[str, dict[str, object]] = {
        # every tick must be claimed and run: no hole, whatever the faults
        "ledger-all": {
            "schedule": "*/2 * * * * *",
            "catch_up": "all",
            "max_catch_up": 1000,
            "concurrency": "allow",
            "command": cmd(1, 0.2),
        },
        "ledger-skip": {
            "schedule": "*/3 * * * * *",
            "catch_up": "skip",
            "concurrency": "allow",
            "command": cmd(1, 0.2),
        },
        "ledger-latest": {
            "schedule": "*/5 * * * * *",
            "catch_up": "latest",
            "concurrency": "allow",
            "command": cmd(1, 0.2),
        },
        # long enough to span several faults; checkpoints every second; one at a time
        "backfill-forbid": {
            "schedule": "*/15 * * * * *",
            "catch_up": "all",
            "max_catch_up": 1000,
            "concurrency": "forbid",
            "command": cmd(24, 1.0),
        },
        "report-replace": {
            "schedule": "*/10 * * * * *",
            "catch_up": "latest",
            "concurrency": "replace",
            "command": cmd(14, 1.0),
        },
    }
    import tomli_w

    doc = {
        "jobs": {jid: {**spec, "timezone": "UTC", "grace_period": f"{GRACE}s"} for jid, spec in jobs.items()}
    }
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


def inject(
    cluster: Cluster,
    pg: PrivatePostgres | None,
    engine: object,
    until: float,
    *,
    seed: int,
    pause: tuple[float, float],
    spare: frozenset[str] = frozenset(),
) -> list[Fault]:
    """Faults until the monotonic instant ``until``, one every ``pause`` seconds (a uniform draw); each fault's
    window lasts as long as its effects may. The processes named in ``spare`` are frozen, never killed or
    restarted, so that they live the whole run (``bench/soak.py`` watches their memory)."""
    rng = random.Random(seed)
    kinds = [
        "kill_leader",
        "term_leader",
        "stop_leader",
        "kill_worker",
        "term_worker",
        "stop_worker",
        "restart_process",
        "skewed_replica",
    ]
    if pg is not None:
        kinds.append("db_restart")
    faults: list[Fault] = []
    pending_restart: list[tuple[float, str, Fault]] = []
    order = list(kinds)
    rng.shuffle(order)  # every kind at least once in a run of a few minutes, then random ones
    longest = STALE + 3  # what a fault usually keeps the loop busy (a restart may take GRACE more)
    while True:
        time.sleep(rng.uniform(*pause))
        now = time.monotonic()
        if now + longest > until:
            break
        for due, name, fault in list(pending_restart):
            if now >= due:
                cluster.start(name)
                fault.end = time.time() + STALE + 2  # a takeover of its runs may follow the restart
                pending_restart.remove((due, name, fault))
        kind = order.pop() if order else rng.choice(kinds)
        leader_identity = current_leader(engine)
        leader = next((n for n in cluster.procs if cluster.identity(n) == leader_identity), None)
        workers = [n for n in cluster.procs if n.startswith("w") and cluster.alive(n)]
        if kind in ("kill_leader", "term_leader") and leader in spare:
            kind = "stop_leader"
        if kind in ("kill_worker", "term_worker") and workers:
            victim = rng.choice(workers)
            workers = [victim]
            if victim in spare:
                kind = "stop_worker"
        t0 = time.time()
        fault: Fault | None = None
        if kind in ("kill_leader", "term_leader", "stop_leader") and leader is not None:
            fault = Fault(kind, cluster.identity(leader), t0, t0, leader=True)
            if kind == "stop_leader":
                cluster.signal(leader, signal.SIGSTOP)
                time.sleep(LEASE + 2)
                cluster.signal(leader, signal.SIGCONT)
                fault.end = time.time() + 1
            else:
                cluster.signal(leader, signal.SIGKILL if kind == "kill_leader" else signal.SIGTERM)
                fault.end = t0 + 3 + LEASE
                pending_restart.append((now + 3, leader, fault))
        elif kind in ("kill_worker", "term_worker", "stop_worker") and workers:
            victim = rng.choice(workers)
            fault = Fault(kind, cluster.identity(victim), t0, t0)
            if kind == "stop_worker":
                # Past the stale window: its runs are taken over, and when it wakes it must stop its copies.
                cluster.signal(victim, signal.SIGSTOP)
                time.sleep(STALE + 3)
                cluster.signal(victim, signal.SIGCONT)
                fault.end = time.time() + HEARTBEAT + 2
            else:
                cluster.signal(victim, signal.SIGKILL if kind == "kill_worker" else signal.SIGTERM)
                delay = 2 if kind == "kill_worker" else GRACE + 2
                fault.end = t0 + delay + STALE + 2
                pending_restart.append((now + delay, victim, fault))
        elif kind == "restart_process" and (
            # the skewed replica is not restarted: a restart would bring it back with a correct clock
            candidates := sorted(
                n for n in cluster.procs if n != "s-skewed" and n not in spare and cluster.alive(n)
            )
        ):
            victim = rng.choice(candidates)
            identity = cluster.identity(victim)
            fault = Fault(kind, identity, t0, t0, leader=identity == leader_identity)
            cluster.signal(victim, signal.SIGTERM)
            try:
                cluster.procs[victim].wait(GRACE + 10)
            except subprocess.TimeoutExpired:
                cluster.signal(victim, signal.SIGKILL)
            cluster.start(victim)
            fault.end = time.time() + STALE + 2
        elif kind == "skewed_replica":
            # Its clock runs five minutes fast: it must neither dispatch early nor steal the lease.
            fault = Fault(kind, "", t0, t0)
            cluster.start("s-skewed", skew=300.0)
            fault.target = cluster.identity("s-skewed")
            time.sleep(rng.uniform(5, 10))
            # it may have become leader meanwhile (a lease released by a restart): then killing it is a leader fault
            fault.leader = current_leader(engine) == fault.target
            cluster.signal("s-skewed", signal.SIGKILL)
            cluster.procs["s-skewed"].wait(5)
            fault.end = time.time()
        elif kind == "db_restart" and pg is not None:
            fault = Fault(kind, "postgres", t0, t0)
            pg.pg_ctl("restart")
            fault.end = time.time() + STALE + 2
        if fault is None:
            order.insert(0, kind)  # no leader right now (or no worker): try this kind again later
            continue
        faults.append(fault)
        print(f"chaos: {datetime.now(UTC):%H:%M:%S} fault {kind} on {fault.target}", flush=True)
    for _, name, fault in pending_restart:
        cluster.start(name)
        fault.end = time.time() + STALE + 2
    return faults


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class LogFacts:
    """What the processes' JSON logs say: who started which attempt, takeovers, hand-backs, bad events."""

    started_by: dict[tuple[str, str, int], str] = field(
        default_factory=dict
    )  # (job, tick, attempt) -> identity
    takeovers: list[dict[str, Any]] = field(default_factory=list)
    handed_back: set[tuple[str, str, int]] = field(default_factory=set)
    events: Counter[str] = field(default_factory=Counter)  # "level event" for warnings and errors
    tracebacks: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    not_json: int = 0


def read_logs(logs: list[Path]) -> LogFacts:
    facts = LogFacts()
    for log in logs:
        if not log.exists():
            continue
        identity = log.name.removesuffix(".log")
        text = log.read_text(errors="replace")
        if "Traceback (most recent call last)" in text:
            lines = text[text.index("Traceback (most recent call last)") :].splitlines()
            shown = next((lines[:i] for i, ln in enumerate(lines) if ln.startswith("{")), lines)[-12:]
            facts.tracebacks.append(log.name + ":\n      " + "\n      ".join(shown))
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                facts.not_json += 1
                continue
            event = str(rec.get("event", ""))
            key = (str(rec.get("job_id")), str(rec.get("scheduled_for")), int(rec.get("attempt") or 0))
            if event == "run_started":
                facts.started_by[key] = identity
            elif event == "run_taken_over":
                facts.takeovers.append({**rec, "by": identity, "at": ts(str(rec["ts"]))})
            elif event == "run_handed_back":
                facts.handed_back.add(key)
            if event == "loop_crashed" or rec.get("level") == "critical":
                facts.crashed.append(f"{log.name}: {rec.get('message')}")
            if rec.get("level") in ("warning", "error", "critical"):
                facts.events[f"{rec['level']} {event}"] += 1
    return facts


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def explained(faults: list[Fault], worker: str | None, start: float, end: float) -> Fault | None:
    """The fault behind it: one on that very worker first, else a database restart."""
    found = [f for f in faults if f.explains(worker, start, end)]
    return min(found, key=lambda f: f.target != worker) if found else None


def at(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%H:%M:%S.%f")[:-3]


def check(
    engine: object,
    jobs: dict[str, dict[str, object]],
    ledger: list[dict[str, Any]],
    faults: list[Fault],
    window: tuple[datetime, datetime],
    logs: list[Path],
    report: Report,
) -> None:
    from sqlalchemy import select

    from schedctl.store.schema import job_runs, job_state, lease_terms

    with engine.connect() as conn:  # type: ignore[attr-defined]
        runs = conn.execute(select(job_runs)).mappings().all()
        states = {r.job_id: r for r in conn.execute(select(job_state)).mappings().all()}
        terms = conn.execute(select(lease_terms).order_by(lease_terms.c.term)).mappings().all()
    facts = read_logs(logs)
    check_ticks(jobs, runs, states, window, report)
    check_terminal(runs, window, report)
    check_executions(ledger, faults, facts, report)
    check_takeovers(faults, facts, report)
    check_leaders(terms, faults, report)
    check_logs(facts, logs, report)


def check_ticks(
    jobs: dict[str, dict[str, object]],
    runs: list[Any],
    states: dict[str, Any],
    window: tuple[datetime, datetime],
    report: Report,
) -> None:
    """Every tick has exactly one row (the primary key), no hole for any policy, and each policy did what it
    allows: the harness's outages are shorter than catch_up_grace, so only forbid and replace leave marks."""
    from schedctl.timing.cron import schedule_for

    by_job: dict[str, list[Any]] = defaultdict(list)
    for r in runs:
        by_job[r["job_id"]].append(r)
    lo, hi = window
    report.say(f"\nticks expected vs claimed (window {lo.isoformat()} .. {hi.isoformat()})")
    total = 0
    for job_id, spec in jobs.items():
        state = states.get(job_id)
        if state is None:
            report.fail(f"{job_id}: never seen by any leader")
            continue
        start = max(lo, state["defined_at"])
        expected = [f.utc for f in schedule_for(str(spec["schedule"]), "UTC").fires(start, hi)]
        total += len(expected)
        rows = {r["scheduled_for"]: r for r in by_job[job_id] if not r["manual"]}
        holes = [t for t in expected if t not in rows]
        mine = [rows[t] for t in expected if t in rows]
        counts: Counter[str] = Counter(r["state"] + (f"({r['reason']})" if r["reason"] else "") for r in mine)
        report.say(
            f"  {job_id:16} expected {len(expected):4}  claimed {len(mine):4}  holes {len(holes):3}  "
            + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        )
        if holes:
            report.fail(f"{job_id}: {len(holes)} ticks never claimed, first {holes[0].isoformat()}")
        for r in mine:
            why = policy_breach(spec, r, by_job[job_id])
            if why:
                report.fail(f"{job_id} {r['scheduled_for'].isoformat()}: {why}")
    report.say(f"  ticks checked: {total}")


def policy_breach(spec: dict[str, object], row: Any, rows: list[Any]) -> str | None:
    concurrency, state = spec["concurrency"], row["state"]
    if state == "skipped":
        if concurrency != "forbid" or row["reason"] != "concurrency":
            return f"skipped ({row['reason']}): no outage here lasts catch_up_grace"
        # forbid skips a tick only while another run of the job is queued or running
        at = row["queued_at"]
        busy = any(
            o is not row
            and o["state"] != "skipped"
            and o["queued_at"] <= at + timedelta(seconds=SLACK)
            and (o["finished_at"] is None or o["finished_at"] >= at - timedelta(seconds=SLACK))
            for o in rows
        )
        return None if busy else "skipped for concurrency while no other run was active"
    if state == "cancelled":
        if concurrency != "replace":
            return "cancelled, and nobody cancels runs in this harness"
        later = any(
            o["scheduled_for"] > row["scheduled_for"]
            and o["queued_at"] <= row["finished_at"] + timedelta(seconds=SLACK)
            for o in rows
        )
        return None if later else "cancelled with no newer tick queued to replace it"
    if state in ("succeeded", "queued", "running"):
        return None
    return f"ended {state}: {row['error']}"


def check_terminal(runs: list[Any], window: tuple[datetime, datetime], report: Report) -> None:
    unfinished = [r for r in runs if r["state"] in ("queued", "running") and r["scheduled_for"] < window[1]]
    finished = sum(1 for r in runs if r["state"] not in ("queued", "running"))
    report.say(
        f"\nruns: {len(runs)} rows, {finished} terminal; unfinished after the drain: {len(unfinished)}"
    )
    for r in unfinished[:10]:
        report.fail(f"{r['job_id']} {r['scheduled_for'].isoformat()} still {r['state']} after the drain")
    queued = [r for r in runs if r["term"] is not None and r["queued_at"] is not None]
    lags = sorted((r["queued_at"] - r["scheduled_for"]).total_seconds() for r in queued)
    if lags:
        report.say(
            f"dispatch lag (queued_at - tick): median {statistics.median(lags):.3f}s "
            f"p99 {lags[int(0.99 * (len(lags) - 1))]:.3f}s max {lags[-1]:.3f}s"
        )


def check_executions(
    ledger: list[dict[str, Any]], faults: list[Fault], facts: LogFacts, report: Report
) -> None:
    starts = [e for e in ledger if e["kind"] == "start"]
    early = [e for e in starts if float(e["at"]) < ts(str(e["scheduled_for"])) - 0.05]
    report.say(f"runs started before their tick: {len(early)}")
    for e in early[:5]:
        report.fail(
            f"{e['job_id']} {e['scheduled_for']} started "
            f"{ts(str(e['scheduled_for'])) - float(e['at']):.2f}s early"
        )
    ends = {
        (str(e["job_id"]), str(e["scheduled_for"]), int(e["attempt"])): e
        for e in ledger
        if e["kind"] in ("end", "stopped")
    }
    executions: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in starts:
        executions[(str(e["job_id"]), str(e["scheduled_for"]))].append(e)
    again: Counter[str] = Counter()
    handed = exact = 0
    for (job_id, tick), group in executions.items():
        group.sort(key=lambda e: int(e["attempt"]))
        for prev, nxt in zip(group, group[1:], strict=False):
            key = (job_id, tick, int(prev["attempt"]))
            worker = facts.started_by.get(key)
            prev_end = float(ends[key]["at"]) if key in ends else float(nxt["at"])
            if key in facts.handed_back:
                # SIGTERM hand-back: not a re-execution; the next attempt resumes where this one stopped
                handed += 1
                done = int(ends[key].get("done", 0)) if key in ends else None
                if done is not None and int(nxt.get("resumed_from", 0) or 0) == done:
                    exact += 1
                else:
                    report.fail(
                        f"{job_id} {tick}: handed back at step {done}, attempt {nxt['attempt']} "
                        f"resumed from {nxt.get('resumed_from')}"
                    )
                continue
            fault = explained(faults, worker, float(prev["at"]), max(prev_end, float(nxt["at"])))
            again[fault.kind if fault else "NONE"] += 1
            report.say(
                f"    {job_id} {tick} attempt {prev['attempt']} on {worker} ran again as attempt "
                f"{nxt['attempt']} at {at(float(nxt['at']))}: "
                + (f"{fault.kind} on {fault.target} at {at(fault.start)}" if fault else "NO FAULT")
            )
            if fault is None:
                report.fail(
                    f"{job_id} {tick} executed again (attempt {nxt['attempt']}; attempt "
                    f"{prev['attempt']} ran on {worker}) with no fault behind it"
                )
            if int(nxt.get("resumed_from", 0) or 0) > int(ends.get(key, {}).get("done", 10**9)):
                report.fail(f"{job_id} {tick}: attempt {nxt['attempt']} resumed past where the last one got")
    report.say(
        "re-executions (at-least-once, across a fault): "
        f"{sum(again.values())}" + "".join(f"  {k}={v}" for k, v in sorted(again.items()))
    )
    resumed = [e for e in starts if int(e.get("resumed_from", 0) or 0) > 0]
    report.say(
        f"work resumed from checkpoints: {len(resumed)} runs, "
        f"{sum(int(e['resumed_from']) for e in resumed)} steps not redone; "
        f"hand-backs {handed}, resumed exactly where they stopped {exact}"
    )


def check_takeovers(faults: list[Fault], facts: LogFacts, report: Report) -> None:
    """A takeover means a worker missed its heartbeats for the stale window: only a fault may cause that."""
    why: Counter[str] = Counter()
    for t in facts.takeovers:
        fault = explained(faults, str(t["previous_worker"]), t["at"] - STALE - SLACK, t["at"])
        why[fault.kind if fault else "NONE"] += 1
        report.say(
            f"    {at(t['at'])} {t['by']} took over {t['job_id']} {t['scheduled_for']} from "
            f"{t['previous_worker']}: "
            + (f"{fault.kind} on {fault.target} at {at(fault.start)}" if fault else "NO FAULT")
        )
        if fault is None:
            report.fail(
                f"{t['by']} took over {t['job_id']} {t['scheduled_for']} from {t['previous_worker']} "
                "with no fault behind it (missed heartbeats on a healthy worker)"
            )
    report.say(f"takeovers: {len(facts.takeovers)}" + "".join(f"  {k}={v}" for k, v in sorted(why.items())))


def check_leaders(terms: list[Any], faults: list[Fault], report: Report) -> None:
    for a, b in zip(terms, terms[1:], strict=False):
        if b["acquired_at"] < (a["ended_at"] or a["expires_at"]) - timedelta(milliseconds=1):
            if b["acquired_at"] < a["expires_at"] and a["end_reason"] != "released":
                report.fail(f"terms {a['term']} and {b['term']} overlap")
    skewed = [t["term"] for t in terms if str(t["holder"]).startswith("s-skewed")]
    report.say(f"lease terms: {len(terms)} (held by the skewed replica: {len(skewed)})")
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
        # SIGKILL/SIGSTOP: the lease must lapse first; SIGTERM releases it. Slack covers a loaded machine.
        bound = LEASE + RENEW + 3.0
        if gap > bound:
            report.fail(f"{f.kind}: new leader after {gap:.1f}s (bound {bound:.1f}s)")
    for kind in sorted({k for k, _ in gaps}):
        values = [g for k, g in gaps if k == kind]
        report.say(
            f"time to new leader after {kind}: min {min(values):.2f}s median "
            f"{statistics.median(values):.2f}s max {max(values):.2f}s (n={len(values)})"
        )
    if gaps:
        values = [g for _, g in gaps]
        report.say(
            f"time to new leader, all leader faults: min {min(values):.2f}s median "
            f"{statistics.median(values):.2f}s max {max(values):.2f}s (n={len(values)})"
        )


def check_logs(facts: LogFacts, logs: list[Path], report: Report) -> None:
    report.say(
        "warning/error events: " + (", ".join(f"{k}={v}" for k, v in sorted(facts.events.items())) or "none")
    )
    for name in facts.tracebacks:
        report.fail(f"unhandled exception in {name}")
    for line in facts.crashed:
        report.fail(f"loop crashed: {line}")
    if facts.not_json:
        report.fail(f"{facts.not_json} log lines are not JSON (a stray print or a traceback)")
    report.say(f"logs with a traceback: {len(facts.tracebacks)} of {len(logs)}")


def wait_for_leader(engine: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if current_leader(engine):
            return
        time.sleep(0.2)
    raise RuntimeError("no scheduler became leader")


def drain(engine: object, before: datetime, timeout: float) -> int:
    """Wait until every run dispatched before ``before`` finished; returns how many are left."""
    from sqlalchemy import func, select

    from schedctl.store.schema import job_runs

    deadline = time.monotonic() + timeout
    left = -1
    while time.monotonic() < deadline:
        try:
            with engine.connect() as conn:  # type: ignore[attr-defined]
                left = conn.execute(
                    select(func.count())
                    .select_from(job_runs)
                    .where(job_runs.c.state.in_(["queued", "running"]), job_runs.c.scheduled_for < before)
                ).scalar_one()
        except Exception:  # the database is still coming back from a restart
            left = -1
        if left == 0:
            return 0
        time.sleep(0.5)
    return left


def require_empty(store: Any) -> None:
    from sqlalchemy import func, select

    from schedctl.store.schema import job_runs, job_state

    with store.engine.connect() as conn:
        used = sum(
            conn.execute(select(func.count()).select_from(t)).scalar_one() for t in (job_runs, job_state)
        )
    if used:
        raise RuntimeError("the database already holds schedctl runs or jobs: give the harness an empty one")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of the run (faults and all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", help="run against this empty database (no database restarts)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, ledger)")
    args = parser.parse_args()
    began = time.monotonic()
    deadline = began + args.duration + OVERRUN
    signal.signal(signal.SIGTERM, _interrupt)

    root = Path(tempfile.mkdtemp(prefix="schedctl-chaos-"))
    root.chmod(0o755)  # the private PostgreSQL runs as `postgres` and must reach its folder below
    pg = None
    cluster: Cluster | None = None
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
        require_empty(store)
        ledger = root / "ledger.jsonl"
        jobs_path = root / "jobs.toml"
        jobs = write_jobs(jobs_path, ledger)
        print(
            f"chaos: seed {args.seed}, duration {args.duration:.0f}s, database {safe_url(db_url)}, folder {root}",
            flush=True,
        )
        cluster = Cluster(root, db_url, jobs_path)
        for name in ("s1", "s2", "s3", "w1", "w2", "w3"):
            cluster.start(name)
        wait_for_leader(store.engine)
        window_start = datetime.now(UTC) + timedelta(seconds=2)
        # A short run (the test suite's) packs its faults closer, so that it still sees most kinds.
        pause = (2.0, 5.0) if args.duration < 120 else (4.0, 9.0)
        faults = inject(cluster, pg, store.engine, began + args.duration - 5, seed=args.seed, pause=pause)
        window_end = datetime.now(UTC)
        # Let everything dispatched finish with all processes healthy before checking terminal states;
        # leave time to stop the processes (GRACE each, in parallel) and to check.
        drain(store.engine, window_end, timeout=max(5.0, min(45.0, deadline - time.monotonic() - GRACE - 20)))
        codes = cluster.stop_all(timeout=max(GRACE + 5, min(30.0, deadline - time.monotonic() - 10)))
        report.say(
            "\nfaults injected: "
            + ", ".join(
                f"{k}={sum(1 for f in faults if f.kind == k)}" for k in sorted({f.kind for f in faults})
            )
            + f" (total {len(faults)})"
        )
        bad_exit = {n: c for n, c in codes.items() if c not in (0, -signal.SIGKILL)}
        if bad_exit:
            report.fail(f"processes that did not exit 0 on SIGTERM: {bad_exit}")
        check(
            store.engine, jobs, read_ledger(ledger), faults, (window_start, window_end), cluster.logs, report
        )
        store.dispose()
    except RuntimeError as exc:
        report.fail(f"harness: {exc}")
    except KeyboardInterrupt:
        report.fail("harness: interrupted")
    finally:
        if cluster is not None:
            cluster.kill_all()
        if pg is not None and pg.data.exists():
            try:
                pg.pg_ctl("stop")
            except Exception as exc:  # a stop failure must not hide the report
                print(f"chaos: stopping the private PostgreSQL failed: {exc}", file=sys.stderr)
        if args.keep or report.violations:
            print(f"chaos: logs, ledger and jobs kept in {root}", flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - began
    print(f"\nelapsed: {elapsed:.0f}s (limit {args.duration + OVERRUN:.0f}s)")
    if elapsed > args.duration + OVERRUN:
        report.fail(f"harness: took {elapsed:.0f}s, more than duration + {OVERRUN:.0f}s")
    print(f"violations: {len(report.violations)}")
    for v in report.violations:
        print(f"  VIOLATION {v}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
