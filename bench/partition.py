"""Network faults between `schedctl serve` processes and their database, and the fencing checked at the end.

    python bench/partition.py [--db URL] [--seed N] [--partition SECONDS] [--kinds K,K] [--keep]

Three schedulers and two workers run (lease 6 s, renew 2 s by default), each connected to the database
through its own ``netlink.Link`` on 127.0.0.1, which can stop forwarding without closing (a silent
partition: the server sees a session that just stops talking, exactly as behind a dead router) or delay
every chunk. Without --db a private PostgreSQL is started (with track_commit_timestamp, so the check reads
when each run row *committed*); with --db it runs on that empty database (MariaDB/MySQL: the rows' insert
instants come from an audit trigger). The fault kinds, in a seeded order:

- leader_idle: the leader is cut off at an arbitrary moment;
- leader_mid_renewal: right after its lease UPDATE reached the server (it holds the row lock, uncommitted);
- leader_mid_fence: right after its fence (SELECT ... FOR SHARE) reached the server, inside a dispatch;
- worker_mid_run: a worker running a job is cut off for longer than the stale window;
- slow_link: the leader's link delays every chunk by a second each way;
- with --netns every process runs in its own network namespace (veth pair to this host, names prefixed
  ``i15-``), which adds link_down: the leader's pair is set down at both ends, so real packets are dropped
  and TCP retransmits into the void (packet loss would need ``tc netem``, which this kernel lacks);
  namespaces are removed at the end, whatever happened.

Checks: after every leader partition a newer term dispatches within lease + renew + 3 s; no run row is
written (or, on PostgreSQL, committed) by a term after that term's expiry by the database's clock, nor
before it was acquired (the history is true); terms never overlap; no tick is claimed twice; the cut-off
leader logs `lost_lease` once and its term writes nothing after the cut; no traceback; every process exits
0 on SIGTERM. Exits 1 on any violation; every process, link and private server is gone at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import chaos  # noqa: E402
from netlink import FENCE, RENEWAL, Link, Namespace, free_subnet  # noqa: E402

KINDS = ("leader_idle", "leader_mid_renewal", "leader_mid_fence", "worker_mid_run", "slow_link")
NETNS_KINDS = ("link_down",)  # real packets dropped, in a namespace (--netns)
HEARTBEAT = 1.0
STALE = 6.0


@dataclass
class Fault:
    kind: str
    target: str  # process name
    term: int | None  # the leader's term when it was cut off
    cut_at: float  # time.time() when the link froze (or slowed)
    healed_at: float = 0.0


class Processes:
    def __init__(self, root: Path, db_url: str, jobs: Path, lease: float, renew: float, netns: bool) -> None:
        from sqlalchemy import make_url

        self.netns = netns
        self.namespaces: dict[str, Namespace] = {}
        self.root, self.jobs, self.lease, self.renew = root, jobs, lease, renew
        self.url = make_url(db_url)
        self.links: dict[str, Link] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str) -> None:
        prefix: list[str] = []
        listen = "127.0.0.1"
        if self.netns:
            # Names carry the branch and this run's pid, so parallel runs never meet.
            ns = Namespace(f"i15-{os.getpid()}-{name}", f"i15{os.getpid() % 100000}{name}", free_subnet())
            self.namespaces[name] = ns
            prefix, listen = ns.prefix, ns.host_ip
        port = self.url.port or (5432 if "postgres" in self.url.drivername else 3306)
        link = Link(self.url.host or "127.0.0.1", port, listen_host=listen)
        self.links[name] = link
        url = self.url.set(host=listen, port=link.port).render_as_string(hide_password=False)
        role = "scheduler" if name.startswith("s") else "worker"
        args = [
            *prefix,
            sys.executable,
            "-m",
            "schedctl",
            "serve",
            "--role",
            role,
            "--db",
            url,
            "--jobs",
            str(self.jobs),
        ]
        args += ["--identity", name, "--log-format", "json", "--lease-duration", f"{self.lease}s"]
        args += ["--renew-interval", f"{self.renew}s"]
        if role == "worker":
            args += ["--slots", "4", "--heartbeat-interval", f"{HEARTBEAT}s", "--stale-after", f"{STALE}s"]
            args += [
                "--poll-interval",
                "0.5s",
                "--successful-history",
                "1000000",
                "--failed-history",
                "1000000",
            ]
        self.logs[name] = self.root / f"{name}.log"
        with open(self.logs[name], "ab") as out:
            self.procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def stop_all(self, timeout: float) -> dict[str, int | None]:
        for link in self.links.values():
            link.heal()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[name] = None
        self.kill_all()
        return codes

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        for link in self.links.values():
            link.close()
        for ns in self.namespaces.values():
            ns.delete()


class PrivateMariaDB:
    """A throwaway MariaDB server (mariadb-install-db into a temporary folder, its own port), removed at the end."""

    def __init__(self, root: Path) -> None:
        self.root, self.data = root, root / "data"
        self.port = chaos.free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            shutil.chown(self.root, "mysql", "mysql")
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.data}", *user, "--skip-test-db"]
            + ["--auth-root-authentication-method=normal"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        args = ["mariadbd", "--no-defaults", f"--datadir={self.data}", *user, f"--port={self.port}"]
        args += ["--bind-address=127.0.0.1", f"--socket={self.root / 'sock'}", "--skip-log-bin"]
        with open(self.root / "server.log", "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                chaos.socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        subprocess.run(
            ["mariadb", "-h127.0.0.1", f"-P{self.port}", "-uroot", "-e", "CREATE DATABASE chaos"],
            check=True,
            capture_output=True,
            timeout=30,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/chaos"


def write_jobs(path: Path) -> None:
    import tomli_w

    sleep = [sys.executable, "-c", "import time; time.sleep(8)"]
    jobs = {
        "every-second": {
            "schedule": "* * * * * *",
            "catch_up": "all",
            "max_catch_up": 1000,
            "command": ["true"],
        },
        "long": {"schedule": "*/5 * * * * *", "catch_up": "latest", "command": sleep},
    }
    doc = {"jobs": {jid: {**spec, "timezone": "UTC", "grace_period": "2s"} for jid, spec in jobs.items()}}
    path.write_text(tomli_w.dumps(doc))


AUDIT_PG = """
CREATE TABLE run_audit (job_id text, scheduled_for timestamptz, term bigint, at timestamptz);
CREATE FUNCTION run_audit_f() RETURNS trigger AS $$ BEGIN
  INSERT INTO run_audit VALUES (NEW.job_id, NEW.scheduled_for, NEW.term, clock_timestamp()); RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER run_audit_t AFTER INSERT ON job_runs FOR EACH ROW EXECUTE FUNCTION run_audit_f();
"""
AUDIT_MY = [
    "CREATE TABLE run_audit (job_id varchar(255), scheduled_for datetime(6), term bigint, at datetime(6))",
    # SYSDATE, not UTC_TIMESTAMP: the instant the row is written, not the instant its statement began.
    "CREATE TRIGGER run_audit_t AFTER INSERT ON job_runs FOR EACH ROW INSERT INTO run_audit VALUES "
    "(NEW.job_id, NEW.scheduled_for, NEW.term, CONVERT_TZ(SYSDATE(6), @@session.time_zone, '+00:00'))",
]


def install_audit(engine: Any) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(AUDIT_PG)
        else:
            for stmt in AUDIT_MY:
                conn.exec_driver_sql(stmt)


def leader(engine: Any) -> tuple[str, int] | None:
    from sqlalchemy import select

    from schedctl.store.dialect import db_now
    from schedctl.store.schema import scheduler_lease

    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(scheduler_lease.c.holder, scheduler_lease.c.term).where(
                    scheduler_lease.c.expires_at > db_now()
                )
            ).first()
    except Exception:
        return None
    return None if row is None else (str(row[0]), int(row[1]))


def running_worker(engine: Any) -> str | None:
    from sqlalchemy import select

    from schedctl.store.schema import job_runs

    with engine.connect() as conn:
        row = conn.execute(
            select(job_runs.c.worker)
            .where(job_runs.c.state == "running", job_runs.c.job_id == "long")
            .limit(1)
        ).first()
    return None if row is None else str(row[0])


def wait_for(what: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    return None


def inject(kind: str, procs: Processes, engine: Any, partition: float, rng: random.Random) -> Fault | None:
    settle = procs.lease + procs.renew + 2
    if kind == "worker_mid_run":
        worker = wait_for(lambda: running_worker(engine), 15)
        if worker is None or worker not in procs.links:
            return None
        link = procs.links[worker]
        link.freeze()
        fault = Fault(kind, worker, None, link.frozen_at or time.time())
        time.sleep(max(partition, STALE + 3))
    else:
        name, term, link = _current_leader(engine, procs)
        if kind == "slow_link":
            link.delay = 1.0
            fault = Fault(kind, name, term, time.time())
            time.sleep(partition)
        elif kind in NETNS_KINDS:
            ns = procs.namespaces[name]
            time.sleep(rng.uniform(0, procs.renew))
            ns.cut()
            fault = Fault(kind, name, term, time.time())
            time.sleep(partition)
            ns.heal()
        else:
            if kind == "leader_idle":
                time.sleep(rng.uniform(0, procs.renew))
                link.freeze()
            else:
                # The lease row may still name a leader that has just lost the lease (the previous fault's
                # victim, healed but not yet expired): it sends no renewal or fence, so after a wait the
                # current leader is looked up again and armed instead; three tries.
                for _attempt in range(3):
                    link.freeze_after(*(RENEWAL if kind == "leader_mid_renewal" else FENCE))
                    if wait_for(lambda armed=link: armed.frozen, 3 * procs.renew + 5):
                        break
                    link.heal()
                    name, term, link = _current_leader(engine, procs)
                else:
                    raise RuntimeError(f"{kind}: the leader sent no matching statement in three tries")
            fault = Fault(kind, name, term, link.frozen_at or time.time())
            time.sleep(max(0.0, fault.cut_at + partition - time.time()))
    link.heal()
    fault.healed_at = time.time()
    time.sleep(settle)
    return fault


def _current_leader(engine: Any, procs: Any) -> tuple[str, int, Any]:
    held = wait_for(lambda: leader(engine), 30)
    if held is None:
        raise RuntimeError("no leader before a leader fault")
    name, term = held
    return name, term, procs.links[name]


def fetch(engine: Any) -> tuple[list[Any], list[Any], list[Any]]:
    from sqlalchemy import select, text

    from schedctl.store.schema import lease_terms

    with engine.connect() as conn:
        terms = list(conn.execute(select(lease_terms).order_by(lease_terms.c.term)))
        audit = list(
            conn.execute(text("SELECT job_id, scheduled_for, term, at FROM run_audit WHERE term IS NOT NULL"))
        )
        commits: list[Any] = []
        if engine.dialect.name == "postgresql":
            # The audit row's xmin is the transaction that inserted the run (the run row itself is updated
            # later by its worker, which changes its xmin).
            commits = list(
                conn.execute(
                    text(
                        "SELECT job_id, scheduled_for, term, pg_xact_commit_timestamp(xmin) FROM run_audit "
                        "WHERE term IS NOT NULL"
                    )
                )
            )
    return terms, audit, commits


def _utc(value: Any) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def check(
    engine: Any,
    faults: list[Fault],
    procs: Processes,
    codes: dict[str, int | None],
    lease: float,
    renew: float,
) -> list[str]:
    from collections import Counter

    bad: list[str] = []
    terms, audit, commits = fetch(engine)
    by_term = {t.term: t for t in terms}
    for earlier, later in zip(terms, terms[1:], strict=False):
        end = earlier.ended_at or earlier.expires_at
        if _utc(later.acquired_at) < _utc(end):
            bad.append(f"terms {earlier.term} and {later.term} overlap ({end} > {later.acquired_at})")
    after_expiry: Counter[str] = Counter()
    for label, rows in (("written", audit), ("committed", commits)):
        for job_id, tick, term, at in rows:
            t = by_term.get(term)
            if t is None:
                bad.append(f"run {job_id} {tick} {label} by term {term}, which the history does not record")
            elif _utc(at) >= _utc(t.expires_at):
                after_expiry[label] += 1
                bad.append(
                    f"run {job_id} {tick} {label} by term {term} at {at}, after it expired at {t.expires_at}"
                )
            elif _utc(at) < _utc(t.acquired_at):
                bad.append(
                    f"run {job_id} {tick} {label} by term {term} at {at}, before it was acquired at {t.acquired_at}"
                )
    doubled = [k for k, n in Counter((r[0], r[1]) for r in audit).items() if n > 1]
    if doubled:
        bad.append(f"ticks claimed twice: {doubled[:5]}")
    print("\nper fault:")
    for f in faults:
        line = f"  {f.kind:19} {f.target}"
        if f.term is not None and f.kind != "slow_link":
            newer = [
                _utc(r[3]).timestamp() for r in audit if r[2] > f.term and _utc(r[3]).timestamp() >= f.cut_at
            ]
            first = min(newer, default=None)
            lag = None if first is None else first - f.cut_at
            late = [r for r in audit if r[2] == f.term and _utc(r[3]).timestamp() > f.cut_at + 0.5]
            lost = _events(procs.logs[f.target], "lost_lease", f.cut_at, f.healed_at + lease + renew + 2)
            line += f" term {f.term}: new leader dispatched after {'never' if lag is None else f'{lag:.2f}s'}"
            line += f", writes by term {f.term} after the cut {len(late)}, lost_lease logged {lost}"
            if lag is None or lag > lease + renew + 3:
                bad.append(f"{f.kind}: no new leader dispatched within {lease + renew + 3:g} s (got {lag})")
            if late:
                bad.append(f"{f.kind}: term {f.term} wrote {len(late)} runs after it was cut off")
            if lost != 1:
                bad.append(f"{f.kind}: {f.target} logged lost_lease {lost} times, not once")
        elif f.kind == "worker_mid_run":
            lost = _events(procs.logs[f.target], "run_lost", f.cut_at, f.healed_at + STALE + 5)
            others = [log for name, log in procs.logs.items() if name.startswith("w") and name != f.target]
            taken = sum(_events(log, "run_taken_over", f.cut_at, f.healed_at + 5) for log in others)
            line += f": its runs taken over {taken}, run_lost logged by it {lost}"
        else:
            changes = len([t for t in terms if f.cut_at <= _utc(t.acquired_at).timestamp() <= f.healed_at])
            lost = _events(procs.logs[f.target], "lost_lease", f.cut_at, f.healed_at)
            line += f": new terms during it {changes}, lost_lease logged by {f.target} {lost}"
        print(line)
    for name, path in procs.logs.items():
        text = path.read_text(errors="replace") if path.exists() else ""
        if "Traceback (most recent call last)" in text:
            bad.append(f"{name} logged a traceback:\n" + text[text.index("Traceback") :][:1500])
    bad_exit = {n: c for n, c in codes.items() if c != 0}
    if bad_exit:
        bad.append(f"processes that did not exit 0 on SIGTERM: {bad_exit}")
    print(
        f"terms {len(terms)}, run rows by the leaders {len(audit)}, written after their term expired "
        f"{after_expiry['written']}, committed after it expired "
        f"{after_expiry['committed'] if commits else 'n/a (no commit timestamps)'}, double claims {len(doubled)}"
    )
    return bad


def _events(log: Path, event: str, since: float, until: float) -> int:
    count = 0
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == event and since - 0.5 <= chaos.ts(str(rec["ts"])) <= until:
            count += 1
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="an EMPTY database to run on (default: a private PostgreSQL)")
    parser.add_argument("--private-mariadb", action="store_true", help="start a throwaway MariaDB instead")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--partition", type=float, default=25.0, help="seconds each fault lasts")
    parser.add_argument("--lease", type=float, default=6.0)
    parser.add_argument("--renew", type=float, default=2.0)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, from: " + ", ".join(KINDS))
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--netns",
        action="store_true",
        help="each process in its own network namespace; adds " + ", ".join(NETNS_KINDS),
    )
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if args.netns and args.kinds == parser.get_default("kinds"):
        kinds += NETNS_KINDS
    unknown = set(kinds) - set(KINDS) - (set(NETNS_KINDS) if args.netns else set())
    if unknown:
        parser.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    rng = random.Random(args.seed)
    rng.shuffle(kinds)
    began = time.monotonic()
    signal.signal(signal.SIGTERM, chaos._interrupt)
    root = Path(tempfile.mkdtemp(prefix="schedctl-partition-"))
    root.chmod(0o755)
    pg = None
    maria: PrivateMariaDB | None = None
    procs: Processes | None = None
    bad: list[str] = []
    try:
        if args.db:
            db_url = args.db
        elif args.private_mariadb:
            maria = PrivateMariaDB(root / "mariadb")
            maria.root.mkdir()
            maria.start()
            db_url = maria.url
        else:
            pg = chaos.PrivatePostgres(root / "pg")
            pg.root.mkdir()
            pg.start()
            subprocess.run(
                [
                    "psql",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(pg.port),
                    "-U",
                    "postgres",
                    "-qc",
                    "ALTER SYSTEM SET track_commit_timestamp = on",
                ],
                check=True,
                capture_output=True,
            )
            pg.pg_ctl("restart")
            db_url = pg.url
        from schedctl.store import open_store, safe_url
        from schedctl.store.migrate import upgrade

        store = open_store(db_url)
        upgrade(store)
        chaos.require_empty(store)
        install_audit(store.engine)
        jobs = root / "jobs.toml"
        write_jobs(jobs)
        print(
            f"partition: seed {args.seed}, kinds {', '.join(kinds)}, {args.partition:g}s each, lease {args.lease:g}s / renew {args.renew:g}s, database {safe_url(db_url)}, folder {root}",
            flush=True,
        )
        procs = Processes(root, db_url, jobs, args.lease, args.renew, args.netns)
        for name in ("s1", "s2", "s3", "w1", "w2"):
            procs.start(name)
        if not wait_for(lambda: leader(store.engine), 30):
            raise RuntimeError("no scheduler became leader")
        time.sleep(2)
        faults = []
        for kind in kinds:
            fault = inject(kind, procs, store.engine, args.partition, rng)
            if fault is None:
                bad.append(f"{kind}: no target found (no run of `long` running)")
            else:
                faults.append(fault)
                print(f"  {kind} on {fault.target} done", flush=True)
        chaos.drain(store.engine, datetime.now(UTC), timeout=20)
        codes = procs.stop_all(timeout=20)
        bad += check(store.engine, faults, procs, codes, args.lease, args.renew)
        store.dispose()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        bad.append(f"harness: {exc}")
    except KeyboardInterrupt:
        bad.append("harness: interrupted")
    finally:
        if procs is not None:
            procs.kill_all()
        if maria is not None:
            maria.stop()
        if pg is not None and pg.data.exists():
            try:
                pg.pg_ctl("stop")
            except Exception as exc:
                print(f"partition: stopping the private PostgreSQL failed: {exc}", file=sys.stderr)
        if args.keep or bad:
            print(f"partition: logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nelapsed: {time.monotonic() - began:.0f}s")
    print(f"violations: {len(bad)}")
    for v in bad:
        print(f"  VIOLATION {v}")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
