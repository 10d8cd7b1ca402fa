"""The README's tour, as written, top to bottom, on SQLite and PostgreSQL.

The commands are read from the README's ```sh block under "## A tour", so the tour cannot drift from what
is tested. Only the value of `SCHEDCTL_DATABASE_URL` is replaced (the test's private database). Each line
runs in one bash session, as a person would type them: with job control, and a few seconds' pause after a
command put in the background (the next one is typed then; 3 s also covers a loaded machine's start-up).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from launch import child_env

from schedctl.cli import cli

pytestmark = [pytest.mark.processes, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MARK = "### schedctl-tour"


def tour_lines() -> list[str]:
    """The tour's commands, one per line, except that a here-document is one command with its lines."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("\n## A tour") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the tour's ```sh block is gone"
    lines: list[str] = []
    ending = None
    for line in block.group(1).splitlines():
        if ending is not None:
            lines[-1] += "\n" + line
            ending = None if line == ending else ending
        elif line.strip():
            lines.append(line)
            here = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line.split("#")[0])
            ending = here.group(1) if here else None
    assert ending is None, f"the here-document is not closed with {ending}"
    return lines


def test_the_tour_starts_with_the_exports_and_names_only_jobs_its_import_creates():
    lines = tour_lines()
    assert lines[0].startswith("export SCHEDCTL_DATABASE_URL=") and lines[1].startswith(
        "export SCHEDCTL_JOBS="
    )
    assert not any("--db" in line or "--jobs" in line for line in lines)


def test_the_tour_needs_nothing_of_the_host_but_its_checkout():
    """It imports a crontab it writes itself, of scripts in the checkout: no /etc/crontab, no /etc/cron.*
    folders (a container or a minimal host has none), no job that only works on a Debian box."""
    text = "\n".join(tour_lines())
    assert "/etc/" not in text and "run-parts" not in text
    (crontab,) = [line for line in tour_lines() if "<<" in line]
    for path in re.findall(r"\$PWD/(\S+)", crontab):
        assert (REPO / path).is_file() and os.access(REPO / path, os.X_OK), path


def test_the_readme_tour_runs_as_written(db_url: str, tmp_path: Path):
    if db_url.startswith("mysql"):
        pytest.skip("the tour is written for SQLite and PostgreSQL")
    tour_url = db_url
    work = tmp_path / "tour"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")
    script = ["set -m"]
    for n, line in enumerate(tour_lines()):
        if line.startswith("export SCHEDCTL_DATABASE_URL="):
            line = f"export SCHEDCTL_DATABASE_URL={shlex.quote(tour_url)}"
        script += [f"echo '{MARK} {n}' >&2; echo '{MARK} {n}'", line, f'echo "{MARK} rc=$?"']
        if line.split("#")[0].rstrip().endswith("&"):
            # Typed a few seconds apart; on a loaded machine, wait (bounded) for what the next lines look at.
            log = re.search(r"2>(\S+)", line)
            said = "became leader" if "--role scheduler" in line else "serve starting"
            if log:
                script.append(f"for i in $(seq 60); do grep -q '{said}' {log[1]} && break; sleep 0.5; done")
            script.append("sleep 1")
        if line.startswith("kill "):
            # Typed a while after `schedctl run`; on a loaded machine, wait (bounded) for the run to end first.
            script[-2:-2] = [
                "for i in $(seq 60); do grep -q 'run_finished' worker.log && break; sleep 0.5; done",
            ]
    script += ['wait %1; echo "scheduler exit $?"', 'wait %2; echo "worker exit $?"']
    env = child_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True, text=True, timeout=180
    )
    out = done.stdout
    codes = re.findall(rf"{MARK} rc=(\d+)", out)
    assert codes and set(codes) == {"0"}, out + done.stderr
    assert len(codes) == len(tour_lines())
    assert "held by " in out  # leases: the scheduler leads
    assert re.search(r"\balive\s+scheduler\b", out) and re.search(r"\balive\s+worker\b", out)  # workers
    assert "queued check-disk " in out  # run
    assert "workers: 1 alive, 0 stale, 0 stopped" in out  # top
    assert "scheduler exit 0" in out and "worker exit 0" in out  # `kill` is SIGTERM: a clean stop
    assert "database: " in done.stderr and "schedctl.toml" not in done.stderr
    # After the tour: both processes said why they stopped.
    env["SCHEDCTL_DATABASE_URL"] = tour_url
    listed = subprocess.run(
        [sys.executable, "-m", "schedctl", "workers", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert {(w["role"], w["state"]) for w in json.loads(listed.stdout)} == {
        ("scheduler", "stopped"),
        ("worker", "stopped"),
    }
    # The job the tour ran by hand succeeded, and printed what its script prints, on any host.
    # In this process: each child costs seconds of start-up on a loaded machine.
    runner = CliRunner()
    runs = runner.invoke(cli, ["runs", "check-disk", "--json", "--db", tour_url])
    # (A quarter hour may also fall inside the tour: its scheduled run is not the one asked for.)
    manual = [(r["state"], r["exit_status"]) for r in json.loads(runs.stdout) if r["manual"]]
    assert manual == [("succeeded", 0)], runs.output
    logs = runner.invoke(cli, ["logs", "check-disk", "--db", tour_url])
    assert logs.exit_code == 0 and re.search(r"\d+%\s+/\n", logs.stdout), logs.output
