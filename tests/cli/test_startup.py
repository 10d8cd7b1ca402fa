"""Commands that need no database must not import SQLAlchemy or a driver (issue 9: the CLI starts instantly).

Each case runs the real CLI in a fresh interpreter through a wrapper that records, at exit (the CLI always
leaves through sys.exit), which heavy modules ended up in sys.modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIVERS = ("sqlalchemy", "psycopg", "pymysql", "alembic")
# Only what a command needs: --help and completion must not load these either.
LAZY = ("rich", "croniter", "prometheus_client")

WRAPPER = r"""
import atexit, json, os, runpy, sys
report, args = sys.argv[1], json.loads(sys.argv[2])
def _report():
    with open(report, "w") as f:
        json.dump(sorted(m for m in sys.modules if "." not in m), f)
atexit.register(_report)
for name in filter(None, os.environ.get("STARTUP_TEST_PREIMPORT", "").split(",")):
    __import__(name)
sys.argv = ["schedctl", *args]
runpy.run_module("schedctl", run_name="__main__", alter_sys=True)
"""

JOBS_TOML = """\
[jobs.backup]
schedule = "30 2 * * *"
timezone = "Europe/London"
catch_up = "skip"
command = "backup.sh"
"""

CRONTAB = """\
MAILTO=ops@example.com
30 2 * * * /usr/local/bin/backup.sh
*/5 * * * * /usr/bin/true
"""


def run_cli(tmp_path: Path, args: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    report = tmp_path / "modules.json"
    report.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report), json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    modules = set(json.loads(report.read_text())) if report.exists() else set()
    return proc.returncode, modules, proc.stdout + proc.stderr


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "schedctl.toml").write_text(JOBS_TOML)
    (tmp_path / "crontab").write_text(CRONTAB)
    return tmp_path


CASES = {
    "help": (["--help"], {}),
    "version": (["--version"], {}),
    "next": (["next", "--schedule", "*/5 * * * *", "--timezone", "UTC"], {}),
    "next-count-json": (
        ["next", "--schedule", "0 3 * * *", "--timezone", "Europe/London", "--count", "3", "--json"],
        {},
    ),
    "validate": (["validate", "schedctl.toml"], {}),
    "import": (["import", "crontab", "--timezone", "UTC", "--catch-up", "skip"], {}),
    "completion": (["completion", "bash"], {}),
    "serve-help": (["serve", "--help"], {}),
    "tab-commands": (
        [],
        {"_SCHEDCTL_COMPLETE": "bash_complete", "COMP_WORDS": "schedctl ", "COMP_CWORD": "1"},
    ),
    "tab-options": (
        [],
        {"_SCHEDCTL_COMPLETE": "bash_complete", "COMP_WORDS": "schedctl next --", "COMP_CWORD": "2"},
    ),
    "tab-job-ids": (
        [],
        {"_SCHEDCTL_COMPLETE": "zsh_complete", "COMP_WORDS": "schedctl next b", "COMP_CWORD": "2"},
    ),
    "tab-status-job-ids": (
        [],
        {"_SCHEDCTL_COMPLETE": "zsh_complete", "COMP_WORDS": "schedctl status b", "COMP_CWORD": "2"},
    ),
}
# The listing shows no table and needs no cron arithmetic.
NEEDS_NOTHING = {
    "help",
    "version",
    "completion",
    "serve-help",
    "tab-commands",
    "tab-options",
    "tab-job-ids",
    "tab-status-job-ids",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_command_leaves_database_modules_unimported(workdir: Path, case: str) -> None:
    args, env = CASES[case]
    code, modules, output = run_cli(workdir, args, env)
    assert code == 0, output
    assert modules, "the wrapper did not report (the CLI died before atexit?)"
    loaded = sorted(set(DRIVERS) & modules)
    assert loaded == [], f"`schedctl {' '.join(args)}` imported {loaded}"
    if case in NEEDS_NOTHING:
        lazy = sorted(set(LAZY) & modules)
        assert lazy == [], f"`schedctl {' '.join(args)}` imported {lazy} before needing it"


@pytest.mark.parametrize("case", ["tab-job-ids", "tab-status-job-ids"])
def test_tab_completion_of_job_ids_answers(workdir: Path, case: str) -> None:
    _, env = CASES[case]
    code, _, output = run_cli(workdir, [], env)
    assert code == 0, output
    assert "backup" in output.split("\n")


def test_the_wrapper_sees_sqlalchemy_when_it_is_imported(workdir: Path) -> None:
    """Guards the guard: a wrapper that never saw sqlalchemy would make every case above pass."""
    code, modules, output = run_cli(workdir, ["--help"], {"STARTUP_TEST_PREIMPORT": "sqlalchemy"})
    assert code == 0, output
    assert "sqlalchemy" in modules
