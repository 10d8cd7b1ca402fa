"""Loading benchmark: a million jobs from one file and from a folder of files, time and memory; the idle pass.

    python bench/loading.py [--jobs 1000000] [--files 1000] [--rounds 1] [--idle 10000,100000,1000000]

The jobs are the tenant case of issue 19: job *i* runs ``"<i mod 60> * * * * *"`` (six fields, seconds
first) in one of 5 zones, with its own command (``report --tenant i``): schedules spread over the 60 seconds
of each minute, ~16,700 ticks due every second at a million. They are written once as one file and as a
folder of ``--files`` files of equal size, then each is loaded by ``schedctl.jobs.config.load_jobs`` in a fresh
Python process (so RSS is its own): wall time, CPU time, RSS added (VmRSS after - before) and the peak
(VmHWM - the RSS before). Rounds alternate the two, so a change of load on the machine hits both alike.

Then the idle pass: a leader's plan for N of those jobs built (no database writes: the groups and heap that
the take-over builds), and the time of a pass with nothing due (``Scheduler._dispatch_due`` between two
seconds), which must not grow with N.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ZONES = ("UTC", "Europe/London", "America/New_York", "Asia/Tokyo", "Asia/Kolkata")
LOAD_GOAL_S = 20.0
RSS_GOAL_MB = 400.0
FOLDER_GOAL = 1.1  # the folder within 10% of the single file, measured side by side


COMMAND = "report --tenant {i}"  # --shared-command: "report" for every job


def job_text(i: int) -> str:
    return (
        f'[jobs.tenant-{i:07d}]\nschedule = "{i % 60} * * * * *"\ntimezone = "{ZONES[i // 60 % len(ZONES)]}"\n'
        f'catch_up = "skip"\nconcurrency = "allow"\ncommand = "{COMMAND.format(i=i)}"\n'
    )


def write_file(path: Path, first: int, count: int) -> None:
    with path.open("w") as fh:
        for i in range(first, first + count):
            fh.write(job_text(i) + "\n")


def write_cases(tmp: Path, count: int, files: int) -> tuple[Path, Path]:
    single = tmp / "jobs.toml"
    write_file(single, 0, count)
    folder = tmp / "jobs.d"
    folder.mkdir()
    per = count // files
    for f in range(files):
        write_file(folder / f"tenants-{f:04d}.toml", f * per, per if f < files - 1 else count - f * per)
    return single, folder


_CHILD = """
import json, sys, time
def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
from schedctl.jobs.config import load_jobs
before = status("VmRSS:")
wall, cpu = time.perf_counter(), time.process_time()
jobs = load_jobs(sys.argv[1])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"jobs": len(jobs), "wall_s": wall, "cpu_s": cpu,
                  "rss_mb": status("VmRSS:") - before, "peak_mb": status("VmHWM:") - before}))
"""


def load_in_child(path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return json.loads(out.stdout)


def idle_pass_us(count: int) -> tuple[float, int]:
    """Microseconds per pass with nothing due, with a plan of ``count`` tenant jobs; and its groups."""
    from datetime import UTC, datetime, timedelta

    from schedctl.jobs.job import CatchUp, Concurrency, Job
    from schedctl.leader.planner import Plan, group_for
    from schedctl.leader.scheduler import Scheduler
    from schedctl.leader.settings import SchedulerSettings
    from schedctl.timing.clock import FakeClock

    now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=10, microseconds=500_000)
    jobs = {}
    plan = Plan()
    for i in range(count):
        job_id = f"tenant-{i:07d}"
        jobs[job_id] = job = Job(
            job_id,
            f"{i % 60} * * * * *",
            ZONES[i // 60 % len(ZONES)],
            CatchUp.SKIP,
            f"report --tenant {i}",
            concurrency=Concurrency.ALLOW,
        )
        group_for(plan, job, now).job_ids.append(job_id)
    for group in plan.groups.values():
        plan.push(group)
    # No database is touched: nothing is due, so the pass only looks at the heap and flushes nothing.
    sched = Scheduler(None, SchedulerSettings(identity="bench"), lambda: jobs, FakeClock(now), jobs=jobs)  # type: ignore[arg-type]
    sched._plan = plan  # noqa: SLF001 - a benchmark peeks
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        sched._dispatch_due()  # noqa: SLF001
    return (time.perf_counter() - t0) / n * 1e6, len(plan.groups)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=1000, help="files in the folder case")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of file, folder")
    parser.add_argument(
        "--idle", default="10000,100000,1000000", help="job counts for the idle pass ('' for none)"
    )
    parser.add_argument(
        "--shared-command", action="store_true", help='every job runs "report" (default: its own)'
    )
    args = parser.parse_args()
    global COMMAND
    if args.shared_command:
        COMMAND = "report"
    print(f"schedctl loading benchmark; {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        single, folder = write_cases(Path(tmp), args.jobs, args.files)
        size = single.stat().st_size / 1e6
        scale = 1_000_000 / args.jobs
        ratios = []
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            one, many = load_in_child(single), load_in_child(folder)
            for name, res in (("one file", one), (f"{args.files} files", many)):
                assert res["jobs"] == args.jobs, res
                print(
                    f"round {r + 1} {args.jobs} jobs, {name} ({size:.0f} MB): load {res['wall_s']:.2f}s "
                    f"(CPU {res['cpu_s']:.2f}s), +{res['rss_mb']:.0f} MB RSS (peak +{res['peak_mb']:.0f} MB); "
                    f"per 1M: {res['wall_s'] * scale:.1f}s, +{res['rss_mb'] * scale:.0f} MB "
                    f"(goal <= {LOAD_GOAL_S:g}s, <= {RSS_GOAL_MB:g} MB); load average {load:.2f}",
                    flush=True,
                )
            ratios.append(many["cpu_s"] / one["cpu_s"])
            print(
                f"round {r + 1} folder / one file (CPU): {ratios[-1]:.2f}x (goal <= {FOLDER_GOAL:g}x)",
                flush=True,
            )
    for count in [int(x) for x in args.idle.split(",") if x]:
        us, groups = idle_pass_us(count)
        print(
            f"idle pass, {count} jobs in {groups} schedules: {us:.2f} us (goal: O(1) in the jobs)", flush=True
        )


if __name__ == "__main__":
    main()
