"""Soak: two schedulers, two workers and 200 jobs of mixed schedules under random faults for half an hour.

    python bench/soak.py --db URL [--duration 1800] [--seed N] [--keep]

Against an empty PostgreSQL or MariaDB database (``--db``; the harness refuses one that holds runs). Every
15-40 s it injects one of ``bench/chaos.py``'s faults: SIGKILL, SIGTERM or SIGSTOP of the leader or of a
worker, a graceful restart, a replica whose clock runs five minutes fast. ``s1`` and ``w1`` are only ever
frozen (SIGSTOP past the lease or the stale window, then SIGCONT), never killed, so they live the whole run:
their resident memory, sampled every 10 s from ``/proc``, is what the soak reports as growth. ``s2`` and ``w2``
are killed and restarted, so leadership moves both ways.

At the end it drains, stops everything with SIGTERM and runs chaos.py's audit on the database, the jobs'
ledger and the JSON logs: every tick claimed once, no hole for any policy, every re-execution explained by a
fault, every takeover too, a new leader within lease + renew + 3 s, no traceback. Any violation exits 1.

Figures and the commands that produced them: bench/README.md, "Issue 26: the soak".
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos  # noqa: E402

LONG_LIVED = ("s1", "w1")
SAMPLE_EVERY = 10.0
WARM_UP = 120.0  # imports, caches and the first pruning pass settle in the first minutes: growth is after


def soak_jobs(ledger: Path) -> dict[str, dict[str, object]]:
    """200 jobs whose ticks spread over the minute, each policy represented, about 6 starts a second."""

    def job(schedule: str, catch_up: str, concurrency: str, steps: int, step: float) -> dict[str, object]:
        spec: dict[str, object] = {"schedule": schedule, "catch_up": catch_up, "concurrency": concurrency}
        if catch_up == "all":
            spec["max_catch_up"] = 1000
        spec["command"] = [sys.executable, str(chaos.JOB_SCRIPT), str(ledger), str(steps), str(step)]
        return spec

    jobs = {f"backfill-{i}": job(f"{i * 7} * * * * *", "all", "forbid", 40, 1.0) for i in range(4)}
    jobs |= {f"replace-{i}": job(f"{i}-59/20 * * * * *", "latest", "replace", 14, 1.0) for i in range(4)}
    jobs |= {f"every5-{i}": job(f"{i % 5}-59/5 * * * * *", "all", "allow", 1, 0.2) for i in range(12)}
    jobs |= {
        f"half-{i}": job(f"{i * 2 % 30},{i * 2 % 30 + 30} * * * * *", "skip", "allow", 1, 0.3)
        for i in range(30)
    }
    jobs |= {
        f"minute-{i}": job(f"{i * 2 % 60} * * * * *", "latest", "forbid" if i % 3 == 0 else "allow", 2, 0.5)
        for i in range(150)
    }
    return jobs


def write_jobs(path: Path, jobs: dict[str, dict[str, object]]) -> None:
    import tomli_w

    grace = f"{chaos.GRACE}s"
    path.write_text(
        tomli_w.dumps({"jobs": {j: {**s, "timezone": "UTC", "grace_period": grace} for j, s in jobs.items()}})
    )


@dataclass
class Memory:
    """Resident set size of each process incarnation over time, read from /proc without signalling it."""

    samples: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def watch(self, cluster: chaos.Cluster) -> None:
        while not self.stop.wait(SAMPLE_EVERY):
            for name, proc in list(cluster.procs.items()):
                rss = _rss_kib(proc.pid)
                if rss is not None and proc.poll() is None:
                    self.samples.setdefault(cluster.identity(name), []).append((time.monotonic(), rss))

    def report(self, began: float, report: chaos.Report) -> None:
        report.say(f"\nresident memory (MiB), after the first {WARM_UP:.0f} s")
        for identity, points in sorted(self.samples.items()):
            settled = [(t, r) for t, r in points if t - began >= WARM_UP]
            if len(settled) < 2:
                continue
            (t0, r0), (t1, r1) = settled[0], settled[-1]
            hours = (t1 - t0) / 3600
            peak = max(r for _, r in settled)
            report.say(
                f"  {identity:10} {r0 / 1024:7.1f} -> {r1 / 1024:7.1f}  peak {peak / 1024:7.1f}  "
                f"growth {(r1 - r0) / 1024:+6.1f} over {(t1 - t0) / 60:5.1f} min"
                + (f"  ({(r1 - r0) / 1024 / hours:+.1f} MiB/h)" if hours > 0.1 else "")
            )


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an empty PostgreSQL or MariaDB database")
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of faults (default 1800)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the folder (logs, ledger) even when clean")
    args = parser.parse_args()
    began = time.monotonic()
    signal.signal(signal.SIGTERM, chaos._interrupt)
    root = Path(tempfile.mkdtemp(prefix="schedctl-soak-"))
    report = chaos.Report()
    cluster: chaos.Cluster | None = None
    memory = Memory()
    try:
        from schedctl.store import open_store, safe_url
        from schedctl.store.migrate import upgrade

        store = open_store(args.db)
        upgrade(store)
        chaos.require_empty(store)
        ledger = root / "ledger.jsonl"
        jobs_path = root / "jobs.toml"
        jobs = soak_jobs(ledger)
        write_jobs(jobs_path, jobs)
        print(f"soak: seed {args.seed}, {args.duration:.0f}s, {len(jobs)} jobs, {safe_url(args.db)}, {root}")
        cluster = chaos.Cluster(root, args.db, jobs_path)
        cluster.slots = 24
        for name in ("s1", "s2", "w1", "w2"):
            cluster.start(name)
        chaos.wait_for_leader(store.engine)
        threading.Thread(target=memory.watch, args=(cluster,), daemon=True).start()
        window_start = datetime.now(UTC) + timedelta(seconds=2)
        faults = chaos.inject(
            cluster,
            None,
            store.engine,
            began + args.duration,
            seed=args.seed,
            pause=(15.0, 40.0),
            spare=frozenset(LONG_LIVED),
        )
        window_end = datetime.now(UTC)
        chaos.drain(store.engine, window_end, timeout=60)
        memory.stop.set()
        codes = cluster.stop_all(timeout=chaos.GRACE + 20)
        kinds = sorted({f.kind for f in faults})
        report.say(
            "\nfaults injected: "
            + ", ".join(f"{k}={sum(1 for f in faults if f.kind == k)}" for k in kinds)
            + f" (total {len(faults)})"
        )
        bad_exit = {n: c for n, c in codes.items() if c not in (0, -signal.SIGKILL)}
        if bad_exit:
            report.fail(f"processes that did not exit 0 on SIGTERM: {bad_exit}")
        # The audit reads every row at once: on an engine of its own, without the bounds serve's sessions
        # carry (an idle-in-transaction limit of a few seconds cut it off on a loaded machine).
        from sqlalchemy import create_engine

        from schedctl.store import parse_url

        audit = create_engine(parse_url(args.db))
        chaos.check(
            audit,
            jobs,
            chaos.read_ledger(ledger),
            faults,
            (window_start, window_end),
            cluster.logs,
            report,
        )
        memory.report(began, report)
        audit.dispose()
        store.dispose()
    except RuntimeError as exc:
        report.fail(f"harness: {exc}")
    except KeyboardInterrupt:
        report.fail("harness: interrupted")
    finally:
        memory.stop.set()
        if cluster is not None:
            cluster.kill_all()
        if args.keep or report.violations:
            print(f"soak: logs, ledger and jobs kept in {root}", flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nelapsed: {time.monotonic() - began:.0f}s")
    print(f"violations: {len(report.violations)}")
    for v in report.violations:
        print(f"  VIOLATION {v}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
