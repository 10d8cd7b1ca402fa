"""Issue 26: a rolling upgrade. A cluster of the last release runs; main's `db upgrade` runs against it; then
the schedulers and the workers are replaced one at a time by main's, as a deploy does, with no pause.

The earlier commit is a843bcd, the 0.1.0 release (CHANGELOG "[0.1.0] - 2026-12-06"): the version an operator
has deployed, at schema revision 0005; main's revisions since then only expand (0006), so the old and the new code share the database
for the whole deploy, which docs/migrations.md says every release must allow. Its code is exported with
`git archive` and run from its own folder (``PYTHONPATH``), with this checkout's interpreter and libraries.

Audited: every tick of the per-second ``catch_up = "all"`` jobs, from the first process's start to the last
scheduler's stop, ran exactly once; and at every step `schedctl workers` (main's) lists exactly the processes
that are running as alive, and `schedctl status --check` finds nothing wrong with the jobs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path

import pytest
from launch import SCHEDCTL, child_env, serve, until

pytestmark = [pytest.mark.processes, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RELEASE = "a843bcd"  # 0.1.0, see above
JOBS = ("u1", "u2", "u3")


def _export_release(into: Path) -> Path:
    """The release's package, from this checkout's history; skips when the checkout has none (a tarball)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout with history to export the release from")
    found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{RELEASE}^{{commit}}"], check=False)
    if found.returncode != 0:
        pytest.skip(f"commit {RELEASE} is not in this checkout's history (a shallow clone?)")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", RELEASE, "schedctl"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def _cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    # ``cwd``: not this checkout for the release's code, since `python -m` puts the working folder on sys.path
    # ahead of PYTHONPATH, and main's schedctl would run instead.
    return subprocess.run(
        [*SCHEDCTL, *args], capture_output=True, text=True, timeout=60, env=env or child_env(), cwd=cwd
    )


def test_a_rolling_upgrade_from_the_release_loses_and_doubles_no_tick(db_url: str, tmp_path: Path) -> None:
    old = _export_release(tmp_path / "release")
    old_env = child_env(PYTHONPATH=str(old))
    which = _cli("--version", env=old_env, cwd=tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", "import schedctl, sys; sys.stdout.write(schedctl.__file__)"],
        capture_output=True, text=True, env=old_env, timeout=30, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert probe.stdout.startswith(str(old)), probe.stdout  # the old processes really run the release's code
    assert which.returncode == 0, which.stderr
    ledger, jobs = tmp_path / "ledger", tmp_path / "jobs.toml"
    jobs.write_text(
        "".join(
            f'[jobs.{j}]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "all"\nmax_catch_up = 1000\n'
            f'command = "echo {j} $SCHEDCTL_SCHEDULED_FOR >> {ledger}"\n\n'
            for j in JOBS
        )
    )
    up = _cli("db", "upgrade", "--db", db_url, env=old_env, cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: list[Path] = []

    def start(name: str, env: dict[str, str], version: str) -> None:
        role = "scheduler" if name.startswith("s") else "worker"
        log = tmp_path / f"{name}.{version}.log"
        logs.append(log)
        extra = (
            ["--lease-duration", "4s", "--renew-interval", "1s"]
            if role == "scheduler"
            else ["--poll-interval", "300ms"]
        )
        procs[name] = serve(
            "--role", role, "--db", db_url, "--jobs", str(jobs), "--identity", f"{name}.{version}",
            "--log-format", "json", *extra,
            log=log, stdout=subprocess.DEVNULL, cwd=tmp_path, env=env,
        )  # fmt: skip

    def alive_in_registry() -> set[str]:
        listed = _cli("workers", "--db", db_url, "--json")
        assert listed.returncode == 0, listed.stderr
        return {w["identity"] for w in json.loads(listed.stdout) if w["state"] == "alive"}

    def running() -> set[str]:
        return {f"{n}.{v}" for n, v in versions.items() if procs[n].poll() is None}

    def truthful(step: str) -> None:
        until(
            lambda: alive_in_registry() == running(), f"`workers` to list {sorted(running())} ({step})", *logs
        )
        check = _cli("status", "--db", db_url, "--jobs", str(jobs), "--check")
        assert check.returncode == 0, f"{step}: {check.stdout}{check.stderr}"

    versions: dict[str, str] = {}
    started = datetime.now(UTC)
    try:
        for name in ("s1", "s2", "w1", "w2"):
            start(name, old_env, "old")
            versions[name] = "old"
        until(
            lambda: ledger.exists() and len(ledger.read_text().split("\n")) > 3 * len(JOBS), "old runs", *logs
        )
        # main's `db upgrade` against the running release: only expand-only revisions (see the check below).
        # Then main's `workers` and `status`, which refuse a schema older than theirs, look at the old cluster.
        up = _cli("db", "upgrade", "--db", db_url)
        assert up.returncode == 0, up.stderr
        truthful("the release's cluster, upgraded under it")
        for name in ("s1", "s2", "w1", "w2"):
            procs[name].send_signal(signal.SIGTERM)
            assert procs[name].wait(timeout=60) == 0, (tmp_path / f"{name}.old.log").read_text()[-3000:]
            start(name, child_env(), "new")
            versions[name] = "new"
            time.sleep(2.0)
            truthful(f"{name} replaced")
        time.sleep(3.0)
        for name in ("s1", "s2"):
            procs[name].send_signal(signal.SIGTERM)
        for name in ("s1", "s2"):
            assert procs[name].wait(timeout=60) == 0
        stopped = datetime.now(UTC)
        # Every tick dispatched before the stop runs: the workers drain the queue, then stop.
        last = stopped.replace(microsecond=0) - timedelta(seconds=2)
        until(
            lambda: all((j, last) in _ticks(ledger) for j in JOBS), "the workers to run the last ticks", *logs
        )
        for name in ("w1", "w2"):
            procs[name].send_signal(signal.SIGTERM)
            assert procs[name].wait(timeout=60) == 0
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    seen = Counter(_ticks_list(ledger))
    twice = sorted(k for k, n in seen.items() if n > 1)
    assert twice == [], f"ticks run twice: {twice}"
    # Ticks are owed from when a leader first saw the jobs (as cron owes nothing from before it started),
    # which on a loaded machine is seconds after the processes were started: from the first tick every job
    # ran. Any hole after it counts.
    first = max(min(t for j, t in seen if j == job) for job in JOBS)
    assert first - started < timedelta(seconds=30), f"the release's cluster first ran its jobs at {first}"
    missing = [
        (j, first + timedelta(seconds=i))
        for j in JOBS
        for i in range(int((last - first).total_seconds()) + 1)
        if (j, first + timedelta(seconds=i)) not in seen
    ]
    assert missing == [], f"ticks that never ran: {missing[:20]} ({len(missing)})"
    for log in logs:
        assert "Traceback" not in log.read_text(), log.name


def _ticks_list(ledger: Path) -> list[tuple[str, datetime]]:
    out = []
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        job, tick = line.split()
        out.append((job, datetime.fromisoformat(tick.replace("Z", "+00:00"))))
    return out


def _ticks(ledger: Path) -> set[tuple[str, datetime]]:
    return set(_ticks_list(ledger))


def test_the_release_commit_named_above_is_the_one_the_changelog_dates() -> None:
    """Keeps RELEASE honest: the commit must hold the 0.1.0 entry and the same schema head as main."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout with history")
    shown = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{RELEASE}:CHANGELOG.md"],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        pytest.skip(f"commit {RELEASE} is not in this checkout's history")
    assert "## [0.1.0] - 2026-12-06" in shown.stdout
    listed = subprocess.run(
        [
            "git",
            "-C",
            str(REPO),
            "ls-tree",
            "--name-only",
            f"{RELEASE}",
            "schedctl/store/migrations/versions/",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = sorted(Path(p).name for p in listed.stdout.split())
    ours = sorted(p.name for p in (REPO / "schedctl/store/migrations/versions").glob("0*.py"))
    # Revisions main added since the release, each reviewed as expand-only (docs/migrations.md) and so run
    # by this test's `db upgrade` under the release's processes: 0006 adds the nullable job_runs.output_size.
    expand_only = ["0006_output_size.py"]
    assert theirs + expand_only == ours, (
        "main added a revision: review it here (expand only?) or start below it"
    )
    assert os.path.exists(REPO / "docs" / "migrations.md")
