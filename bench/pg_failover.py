"""PostgreSQL primary failover: a private primary, a streaming standby, a schedctl cluster on the multi-host URL.

    python bench/pg_failover.py [--tries 5] [--jobs 20] [--before 15] [--after 25] [--sync] [--lag SECONDS]

Each try builds a fresh pair: ``initdb`` a primary, ``pg_basebackup -R`` a standby from it (asynchronous
streaming replication, or synchronous with ``--sync``), both on ports of their own. Two schedulers and two
workers run on ``postgresql://…@primary,standby/postgres?target_session_attrs=read-write`` with per-second
``catch_up = "all"`` jobs that append one line per execution to a ledger. After ``--before`` seconds the
primary is stopped hard (``pg_ctl stop -m immediate``: no checkpoint, every session cut) and the standby is
promoted at once, as a failover manager would. ``--after`` seconds later the schedulers stop, the workers
drain, and every tick from the first one that every job ran (a job is owed ticks from when a leader first saw it)
to the schedulers' stop is audited:

- ran once: one line in the ledger;
- named: no line, and `schedctl missed` names it (on the promoted server);
- ran twice: more than one line (a run row or an outcome the standby never received);
- lost: no line and not named by `missed` (a violation: exit 1).

``--lag S`` puts the standby's WAL stream behind a link the harness controls (``bench/netlink.py``) and
freezes it S seconds before the stop: the standby is S seconds behind when it is promoted, as an
asynchronous standby is when the network to it stalls or it cannot keep up. Whatever the primary committed
in those seconds is lost with it. With ``--sync`` the primary's commits wait for the frozen standby instead.

It prints each try's failover time (primary stopped → first run started on the promoted server) and the
counts, then the totals. Root runs the servers as the `postgres` user, like bench/chaos.py, which it reuses.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from chaos import Cluster, PrivatePostgres, drain  # noqa: E402
from netlink import Link  # noqa: E402

LEASE, RENEW = "6s", "2s"


class Standby(PrivatePostgres):
    """A streaming standby of ``primary``, made by ``pg_basebackup -R`` (it writes the primary_conninfo)."""

    def __init__(self, root: Path, primary: PrivatePostgres, via: Link | None = None) -> None:
        super().__init__(root)
        self.primary = primary
        self.via = via  # the link its WAL stream goes through, when the harness is to make it lag

    def start(self) -> None:
        self._own_folders()
        # -R writes the primary_conninfo it connected with: through the link, the stream stays behind it.
        port = self.via.port if self.via is not None else self.primary.port
        self._run(
            str(self.bindir / "pg_basebackup"), "-D", str(self.data), "-R", "-X", "stream", "-c", "fast",
            "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
        )  # fmt: skip
        self.pg_ctl("start")

    def promote(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "promote")


def _sql(url: str, statement: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as c:
        cur = c.execute(statement)
        return list(cur.fetchall()) if cur.description else []


@dataclass
class Try:
    failover_seconds: float | None = None
    counts: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    named: Counter[str] = field(default_factory=Counter)  # why `missed` says a tick did not run
    named_ticks: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)


def _jobs(path: Path, ledger: Path, count: int) -> list[str]:
    ids = [f"f{i:02d}" for i in range(count)]
    path.write_text(
        "".join(
            f'[jobs.{j}]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "all"\nmax_catch_up = 1000\n'
            f'command = "echo {j} $SCHEDCTL_SCHEDULED_FOR $(date +%s.%N) >> {ledger}"\n\n'
            for j in ids
        )
    )
    return ids


def _ledger(path: Path) -> list[tuple[str, datetime, float]]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        job, tick, started = line.split()
        out.append((job, datetime.fromisoformat(tick.replace("Z", "+00:00")), float(started)))
    return out


def _named(url: str, jobs: Path, job: str, since: datetime, until: datetime) -> dict[datetime, str]:
    done = subprocess.run(
        [sys.executable, "-m", "schedctl", "missed", job, "--db", url, "--jobs", str(jobs), "--json",
         "--since", since.isoformat(), "--until", until.isoformat()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise RuntimeError(f"schedctl missed failed: {done.stderr.strip()}")
    entries = json.loads(done.stdout or "[]")
    return {datetime.fromisoformat(e["scheduled_for"]): f"{e['state']}: {e['reason_text']}" for e in entries}


def one_try(
    root: Path, jobs_count: int, before: float, after: float, sync: bool, lag: float = 0.0, say=print
) -> Try:
    root.chmod(0o755)  # the servers run as `postgres` and must reach their folders below it
    primary = PrivatePostgres(root / "primary")
    link = Link("127.0.0.1", primary.port) if lag > 0 else None
    standby = Standby(root / "standby", primary, via=link)
    cluster = None
    result = Try()
    try:
        primary.start()
        if sync:
            _sql(primary.url, "ALTER SYSTEM SET synchronous_standby_names = '*'")
            _sql(primary.url, "SELECT pg_reload_conf()")
        standby.start()
        url = (
            f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
            "?target_session_attrs=read-write"
        )
        subprocess.run([sys.executable, "-m", "schedctl", "db", "upgrade", "--db", primary.url], check=True,
                       capture_output=True, timeout=120)  # fmt: skip
        ledger, jobs = root / "ledger", root / "jobs.toml"
        ids = _jobs(jobs, ledger, jobs_count)
        cluster = Cluster(root, url, jobs)
        for name in ("s1", "s2", "w1", "w2"):
            cluster.start(name)
        started = datetime.now(UTC)
        time.sleep(max(0.0, before - lag))
        if link is not None:
            behind = _sql(primary.url, "SELECT pg_current_wal_lsn()::text")[0][0]
            link.freeze()
            time.sleep(lag)
            say(f"  WAL stream frozen at {behind} for {lag:.1f} s before the stop")
        killed_at = time.time()
        primary._run(str(primary.bindir / "pg_ctl"), "-D", str(primary.data), "-m", "immediate", "-w", "stop")
        standby.promote()
        if sync:
            # As a failover manager does: the promoted server has no standby of its own yet, and with the
            # setting it inherited from the primary (pg_basebackup copies postgresql.auto.conf) every commit
            # would wait for one forever.
            _sql(standby.url, "ALTER SYSTEM RESET synchronous_standby_names")
            _sql(standby.url, "SELECT pg_reload_conf()")
        say(
            f"  primary stopped hard at {datetime.fromtimestamp(killed_at, UTC):%H:%M:%S.%f}, standby promoted in "
            f"{time.time() - killed_at:.2f} s"
        )
        time.sleep(after)
        for name in ("s1", "s2"):
            cluster.signal(name, signal.SIGTERM)
        stopped = datetime.now(UTC)
        from schedctl.store import open_store

        store = open_store(standby.url)
        left = drain(store.engine, stopped, timeout=60)
        store.dispose()
        if left:
            say(f"  {left} runs still unfinished 60 s after the schedulers stopped")
        cluster.stop_all()
        runs = _ledger(ledger)
        # A tick due after the stop can only have been queued on the promoted server; a run that merely
        # started after the stop may have been claimed from the old primary before it.
        resumed = [s for _, tick, s in runs if tick.timestamp() > killed_at]
        result.failover_seconds = (min(resumed) - killed_at) if resumed else None
        # From the first tick every job has run (a job's ticks are owed from when a leader first saw it,
        # as cron owes nothing from before it started) to just before the schedulers stopped.
        firsts = {job: min(tick for j, tick, _ in runs if j == job) for job in {j for j, _, _ in runs}}
        lo = max(firsts.values()) if len(firsts) == len(ids) else started
        hi = stopped.replace(microsecond=0) - timedelta(seconds=2)
        seen = Counter((job, tick) for job, tick, _ in runs)
        say(
            f"  schedulers stopped at {stopped:%H:%M:%S.%f}; ticks audited from {lo:%H:%M:%S} to {hi:%H:%M:%S}"
        )
        for job in ids:
            named = _named(standby.url, jobs, job, lo, hi)
            tick = lo
            while tick < hi:
                n = seen[(job, tick)]
                if n == 1:
                    result.counts["ran once"] += 1
                elif n > 1:
                    result.counts["ran twice"] += 1
                    result.twice.append(f"{job} {tick:%H:%M:%S}")
                elif tick in named:
                    result.counts["named by missed"] += 1
                    result.named[named[tick]] += 1
                    result.named_ticks.append(f"{job} {tick:%H:%M:%S}")
                else:
                    result.counts["lost"] += 1
                    result.lost.append(f"{job} {tick:%H:%M:%S}")
                tick += timedelta(seconds=1)
        return result
    finally:
        if cluster is not None:
            cluster.kill_all()
        if link is not None:
            link.close()
        for server in (standby, primary):
            try:
                server.pg_ctl("stop")
            except Exception:  # already stopped (the primary), or never started
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20, help="per-second catch_up=all jobs")
    parser.add_argument(
        "--before", type=float, default=15.0, help="seconds of normal running before the stop"
    )
    parser.add_argument("--after", type=float, default=25.0, help="seconds after the promotion")
    parser.add_argument(
        "--sync", action="store_true", help="synchronous replication (synchronous_standby_names)"
    )
    parser.add_argument(
        "--lag",
        type=float,
        default=0.0,
        help="freeze the standby's WAL stream this many seconds before the stop",
    )
    parser.add_argument("--keep", action="store_true", help="keep the folders (logs, ledger) of every try")
    args = parser.parse_args()
    if shutil.which("pg_basebackup") is None and not list(
        Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup")
    ):
        print(
            "pg_failover: needs PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup)", file=sys.stderr
        )
        return 2
    tries: list[Try] = []
    for n in range(1, args.tries + 1):
        root = Path(tempfile.mkdtemp(prefix="schedctl-failover-"))
        print(
            f"try {n}: {'synchronous' if args.sync else 'asynchronous'} replication, {args.jobs} jobs, "
            f"standby {args.lag:.1f} s behind, {root}"
        )
        try:
            t = one_try(root, args.jobs, args.before, args.after, args.sync, args.lag)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        tries.append(t)
        fo = "never" if t.failover_seconds is None else f"{t.failover_seconds:.2f} s"
        print(f"  failover (stop -> first run of a tick due after it): {fo}; {dict(t.counts)}")
        for why, n in t.named.most_common():
            print(f"  named {n}x: {why}")
        for what, ticks in (("named", t.named_ticks), ("twice", t.twice), ("LOST", t.lost)):
            if ticks:
                print(f"  {what}: {', '.join(ticks[:20])}{' ...' if len(ticks) > 20 else ''}")
    times = [t.failover_seconds for t in tries if t.failover_seconds is not None]
    total: Counter[str] = sum((t.counts for t in tries), Counter())
    if times:
        print(f"failover over {len(times)} tries: min {min(times):.2f} s, median {statistics.median(times):.2f} s, "
              f"max {max(times):.2f} s")  # fmt: skip
    print(f"ticks: {dict(total)}")
    return 1 if total["lost"] or len(times) < len(tries) else 0


if __name__ == "__main__":
    sys.exit(main())
