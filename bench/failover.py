"""Failover: from SIGKILL / SIGTERM of the leader to the first tick claimed by the next term.

    python bench/failover.py [--db URL] [--reps 10] [--lease 3s --renew 1s] [--default-reps 3] [--schedulers 3]

Default database: PostgreSQL at $SCHEDCTL_TEST_POSTGRES_URL (or postgresql://postgres@127.0.0.1:5432/test),
in a private database that is dropped at the end; ``--db sqlite`` uses a temporary SQLite file.

``--schedulers`` real ``schedctl serve --role scheduler`` processes run one job, ``* * * * * *`` with
``catch_up = "all"`` (every second is a tick to claim, and the ticks missed during failover are claimed by
the next leader). For each repetition: find the leader (scheduler_lease), wait a random fraction of a renew
interval (so the kill lands anywhere in the renewal cycle), send the signal, and take the first ``job_runs``
row whose ``term`` is newer: its ``queued_at`` (the new leader's database-anchored clock) minus the instant
of the signal is the failover time. The killed process is replaced by a fresh one (a new identity) before the
next repetition. Goals: SIGKILL <= lease + renew interval; SIGTERM <= 1.5 renew intervals.

It runs ``--reps`` repetitions of each signal with ``--lease/--renew`` (short, to keep the run to minutes),
then ``--default-reps`` of each with the defaults (15 s / 5 s).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from steady_lag import DEFAULT_PG, SCHEDCTL, Private, migrate, reachable  # noqa: E402

from tests import launch  # noqa: E402

JOBS = (
    '[jobs.every-second]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "all"\n'
    'max_catch_up = 1000\nconcurrency = "allow"\ncommand = "true"\n'
)


class Cluster:
    """N scheduler processes; each one's identity is known, so the lease row names its process."""

    def __init__(self, url: str, jobs: Path, tmp: Path, lease: str, renew: str, count: int) -> None:
        self.url, self.jobs, self.tmp, self.lease, self.renew = url, jobs, tmp, lease, renew
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.serial = 0
        for _ in range(count):
            self.spawn()

    def spawn(self) -> str:
        self.serial += 1
        identity = f"failover-{self.serial}"
        self.procs[identity] = launch.serve(
            "--role", "scheduler", "--db", self.url, "--jobs", str(self.jobs),
            "--identity", identity, "--lease-duration", self.lease, "--renew-interval", self.renew,
            "--log-level", "warning",
            log=self.tmp / "failover.log", append=True, program=SCHEDCTL,
        )  # fmt: skip
        return identity

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Probe:
    def __init__(self, url: str) -> None:
        from schedctl.store import open_store

        self.store = open_store(url)

    def leader(self) -> tuple[str, int] | None:
        from sqlalchemy import select

        from schedctl.store.schema import scheduler_lease as sl

        query = select(sl.c.holder, sl.c.term).where(sl.c.name == "cron")
        with self.store.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row.holder, row.term)

    def first_claim_after(self, term: int) -> tuple[datetime, int] | None:
        from sqlalchemy import select

        from schedctl.store.schema import job_runs as jr

        query = select(jr.c.queued_at, jr.c.term).where(jr.c.term > term).order_by(jr.c.queued_at).limit(1)
        with self.store.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row.queued_at, row.term)


def wait_for(what: Any, timeout: float, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(step)
    return None


def one_rep(
    cluster: Cluster, probe: Probe, sig: signal.Signals, lease: float, renew: float
) -> dict[str, Any]:
    found = wait_for(
        lambda: (lead := probe.leader()) and lead[0] in cluster.procs and lead, lease + 3 * renew + 10
    )
    if not found:
        tail = (cluster.tmp / "failover.log").read_text().splitlines()[-5:]
        raise RuntimeError("no leader among the benchmark's processes; log:\n" + "\n".join(tail))
    holder, term = found
    # Random phase: the kill must land anywhere between two renewals, not always just after one.
    time.sleep(random.uniform(0, renew))
    holder_now = probe.leader()
    if holder_now != (holder, term):
        raise RuntimeError(f"leader changed by itself: {holder_now} after {holder, term}")
    proc = cluster.procs.pop(holder)
    sent = time.time()
    proc.send_signal(sig)
    claim = wait_for(lambda: probe.first_claim_after(term), lease + 3 * renew + 10)
    seen = time.time()
    try:
        status = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
    cluster.spawn()
    if claim is None:
        return {"seconds": float("nan"), "status": status, "seen": seen - sent}
    queued_at, new_term = claim
    # Give the replacement time to import and stand by, so every repetition starts with N schedulers.
    time.sleep(2.0)
    return {"seconds": queued_at.timestamp() - sent, "status": status, "seen": seen - sent, "term": new_term}


def series(
    cluster: Cluster, probe: Probe, sig: signal.Signals, reps: int, lease: float, renew: float
) -> list[dict[str, Any]]:
    out = []
    for i in range(reps):
        rep = one_rep(cluster, probe, sig, lease, renew)
        out.append(rep)
        print(f"    {sig.name} rep {i + 1}: {rep['seconds']:.3f} s (exit status {rep['status']})", flush=True)
    return out


def describe(sig: signal.Signals, reps: list[dict[str, Any]], lease: float, renew: float) -> bool:
    secs = [r["seconds"] for r in reps]
    goal = lease + renew if sig is signal.SIGKILL else 1.5 * renew
    worst = max(secs) if secs else float("nan")
    ok = bool(secs) and worst <= goal
    print(
        f"  {sig.name:<7} lease {lease:g}s renew {renew:g}s, {len(secs)} reps: min {min(secs):.3f} s  "
        f"median {statistics.median(secs):.3f} s  max {worst:.3f} s   goal <= {goal:g} s: {'OK' if ok else 'MISSED'}"
    )
    return ok


def run_settings(url: str, tmp: Path, lease: str, renew: str, reps: int, count: int) -> bool:
    from schedctl.timing.timetext import parse_duration

    lease_s, renew_s = parse_duration(lease), parse_duration(renew)
    private = Private(url, tmp)
    try:
        migrate(private.url)
        jobs = tmp / "failover.toml"
        jobs.write_text(JOBS)
        probe = Probe(private.url)
        cluster = Cluster(private.url, jobs, tmp, lease, renew, count)
        print(
            f"\n{private.backend}: {count} schedulers, lease {lease}, renew {renew}, {reps} reps per signal",
            flush=True,
        )
        try:
            kills = series(cluster, probe, signal.SIGKILL, reps, lease_s, renew_s)
            terms = series(cluster, probe, signal.SIGTERM, reps, lease_s, renew_s)
        finally:
            cluster.stop()
            probe.store.dispose()
        ok = describe(signal.SIGKILL, kills, lease_s, renew_s)
        ok = describe(signal.SIGTERM, terms, lease_s, renew_s) and ok
        bad = [r["status"] for r in terms if r["status"] != 0]
        if bad:
            print(f"  SIGTERM exit statuses not 0: {bad}")
        return ok and not bad
    finally:
        private.drop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", default=DEFAULT_PG, help="database URL, or 'sqlite'")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--lease", default="3s", help="lease duration for the --reps repetitions")
    parser.add_argument("--renew", default="1s", help="renew interval for the --reps repetitions")
    parser.add_argument("--default-reps", type=int, default=3, help="repetitions with the defaults 15s / 5s")
    parser.add_argument("--schedulers", type=int, default=3)
    args = parser.parse_args()
    why = reachable(args.db)
    if why is not None:
        print(f"{args.db}: not reachable: {why}")
        return 1
    print(
        f"failover, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    ok = True
    with tempfile.TemporaryDirectory(prefix="schedctl-failover-") as tmp:
        if args.reps:
            ok = run_settings(args.db, Path(tmp), args.lease, args.renew, args.reps, args.schedulers) and ok
        if args.default_reps:
            ok = run_settings(args.db, Path(tmp), "15s", "5s", args.default_reps, args.schedulers) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
