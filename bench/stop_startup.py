"""SIGTERM at any point of a big scheduler's start-up or take-over (issue 27, goal 1): how long until it exits.

    python bench/stop_startup.py [--db URL] [--jobs 1000000] [--at 2,6,12,20,30,45,60] [--cases new,defined]

Writes ``bench/loading.py``'s tenant jobs to one file, then starts a real ``schedctl serve --role scheduler``
on them once per offset in ``--at`` (seconds after the start) and sends it SIGTERM there, in two cases:

- *new jobs*: each start on a fresh private database (a PostgreSQL schema, dropped), so its take-over is a
  first sight of every job;
- *defined jobs*: one scheduler first runs its take-over to the end and stops; then each start finds every
  job already defined, as a real failover does.

For each signal it prints the phase the process was in (the last of its log lines: loading, before leading,
take-over, leading) and the seconds from SIGTERM to its exit, beside the goal (2 s) and the exit status (0).
Exit status 1 when a stop took longer or failed.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loading import write_file  # noqa: E402
from scheduler import Private  # noqa: E402

from tests import launch  # noqa: E402

GOAL_S = 2.0
BIN = Path(sys.executable).parent / "schedctl"
PROGRAM = [str(BIN)] if BIN.exists() else list(launch.SCHEDCTL)


def phase(log: str) -> str:
    """Where the process was, from the lines it had written when the signal came."""
    if "took over" in log:
        return "leading"
    if "acquired lease" in log:
        return "take-over"
    if "serve starting" in log:
        return "before leading (hashing definitions)"
    return "loading the job files"


def start(url: str, jobs: Path, log: Path) -> subprocess.Popen[bytes]:
    return launch.serve(
        "--role", "scheduler", "--db", url, "--migrate", "--jobs", str(jobs), "--identity", "bench",
        log=log, program=PROGRAM,
    )  # fmt: skip


def stop_at(url: str, jobs: Path, log: Path, at: float) -> tuple[str, float, int | None]:
    proc = start(url, jobs, log)
    try:
        deadline = time.monotonic() + at
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        where = phase(log.read_text(errors="replace"))
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            code = None
        return where, time.monotonic() - sent, code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--at", default="2,6,12,20,30,45,60", help="seconds after each start to send SIGTERM")
    ap.add_argument("--cases", default="new,defined", help="new, defined or both (comma-separated)")
    args = ap.parse_args()
    offsets = [float(x) for x in args.at.split(",")]
    failed = False
    with tempfile.TemporaryDirectory(prefix="schedctl-stop-") as tmp_name:
        tmp = Path(tmp_name)
        jobs = tmp / "jobs.toml"
        write_file(jobs, 0, args.jobs)
        print(
            f"{args.jobs:,} jobs, SIGTERM at {args.at} s after the start; goal: exit 0 within {GOAL_S:.0f} s"
        )

        def report(case: str, at: float, result: tuple[str, float, int | None]) -> None:
            nonlocal failed
            where, took, code = result
            bad = code != 0 or took > GOAL_S
            failed |= bad
            status = "timeout" if code is None else str(code)
            print(
                f"  {case:13} at {at:5.1f} s  {where:38} exit {status:>4} after {took:6.2f} s{'  MISSED' if bad else ''}"
            )

        cases = set(args.cases.split(","))
        for at in offsets if "new" in cases else []:
            db = Private(args.db, tmp)
            try:
                report("new jobs", at, stop_at(db.url, jobs, tmp / f"new-{at}.log", at))
            finally:
                db.drop()
        db = Private(args.db, tmp)
        try:
            if "defined" not in cases:
                return 1 if failed else 0
            log = tmp / "define.log"
            proc = start(db.url, jobs, log)
            try:
                began = time.monotonic()
                launch.until(
                    lambda: "took over" in log.read_text(errors="replace"), "the take-over", log, timeout=900
                )
                print(f"  (defining take-over: {time.monotonic() - began:.1f} s from the start)")
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
            for at in offsets:
                report("defined jobs", at, stop_at(db.url, jobs, tmp / f"defined-{at}.log", at))
        finally:
            db.drop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
