"""CLI start-up: wall time of commands that need no database, as a ratio of a bare `python -c pass`.

    python bench/startup.py [--runs 21]

Every round runs each command once, in turn, so a busy machine slows them all alike; the figure is the
median over the rounds. Goals (issue 19, goal 6; issue 9 had 6x and 10x): `schedctl --help` within 3x of
`python -c pass`, `schedctl next --schedule ...` within 4x. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import launch  # noqa: E402  (the suite's child environment)

BIN = Path(sys.executable).parent / "schedctl"
SCHEDCTL = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "schedctl"]

JOBS = (
    '[jobs.backup]\nschedule = "30 2 * * *"\ntimezone = "Europe/London"\ncatch_up = "skip"\ncommand = "b"\n'
)


def cases(workdir: Path) -> list[tuple[str, list[str], dict[str, str], float | None]]:
    """(label, argv, extra env, goal as a multiple of python -c pass)."""
    tab = {"_SCHEDCTL_COMPLETE": "bash_complete", "COMP_WORDS": "schedctl next b", "COMP_CWORD": "2"}
    return [
        ("python -c pass", [sys.executable, "-c", "pass"], {}, None),
        ("python -c 'import click'", [sys.executable, "-c", "import click"], {}, None),
        ("schedctl --help", [*SCHEDCTL, "--help"], {}, 3.0),
        ("schedctl --version", [*SCHEDCTL, "--version"], {}, 3.0),
        (
            "schedctl next --schedule '*/5 * * * *' --timezone UTC",
            [*SCHEDCTL, "next", "--schedule", "*/5 * * * *", "--timezone", "UTC"],
            {},
            4.0,
        ),
        (
            "schedctl validate schedctl.toml",
            [*SCHEDCTL, "validate", str(workdir / "schedctl.toml")],
            {},
            None,
        ),
        ("schedctl completion bash", [*SCHEDCTL, "completion", "bash"], {}, None),
        ("<TAB> schedctl next b", [*SCHEDCTL], tab, None),
    ]


def time_once(argv: list[str], env: dict[str, str], cwd: Path) -> float | None:
    """Seconds, or None when the command failed (its figure would mean nothing)."""
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    return elapsed if proc.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "schedctl.toml").write_text(JOBS)
        env = launch.child_env()
        table = cases(workdir)
        samples: dict[str, list[float | None]] = {label: [] for label, *_ in table}
        for _label, argv, extra, _ in table:  # warm the page cache and .pyc files
            time_once(argv, {**env, **extra}, workdir)
        for _ in range(args.runs):
            for label, argv, extra, _ in table:
                samples[label].append(time_once(argv, {**env, **extra}, workdir))
    base = statistics.median(t for t in samples["python -c pass"] if t is not None)
    print(
        f"# {platform.node()}: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; median of {args.runs} interleaved runs"
    )
    print(f"{'command':<58} {'median ms':>10} {'x pass':>7}  goal")
    missed = 0
    for label, _, _, goal in table:
        if any(t is None for t in samples[label]):
            missed += goal is not None
            print(f"{label:<58} {'failed':>10} {'-':>7}  (the command exited non-zero)")
            continue
        median = statistics.median(t for t in samples[label] if t is not None)
        ratio = median / base
        verdict = ""
        if goal is not None:
            ok = ratio <= goal
            missed += not ok
            verdict = f"<= {goal:g}x {'ok' if ok else 'MISSED'}"
        print(f"{label:<58} {median * 1000:>10.1f} {ratio:>7.2f}  {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
