"""Issue 16 items 12, 13, 15: what schedctl prints stays inert and short; options are checked before start."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from launch import child_env

from schedctl.store import open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

ESC_JOB = (
    '[jobs.esc]\nschedule = "0 1 * * *"\ntimezone = "UTC"\ncatch_up = "skip"\n'
    'command = "echo \\u001b]0;pwned\\u0007 done"\n'
)
TITLE = "\x1b]0;pwned\x07"


def schedctl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run(
        [sys.executable, "-m", "schedctl", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
        env=env,
    )


@pytest.fixture
def esc_jobs(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(ESC_JOB)
    return path


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'schedctl.db'}"
    store = open_store(url)
    upgrade(store)
    tick = datetime(2026, 3, 1, 2, 30, tzinfo=UTC)
    with store.begin() as conn:  # what any writer to the database could leave in a run row
        conn.execute(
            job_runs.insert(),
            {
                "job_id": f"j{TITLE}",
                "scheduled_for": tick,
                "state": "failed",
                "reason": "exit",
                "reason_detail": f"broke {TITLE}",
                "manual": False,
                "attempt": 1,
                "failures": 1,
                "queued_at": tick,
                "started_at": tick,
                "finished_at": tick,
                "worker": f"w{TITLE}",
                "exit_status": 1,
                "output_tail": "out\n",
                "labels_key": "",
                "concurrency": "forbid",
                "cancel_requested": False,
            },
        )
    store.dispose()
    return url


# ------------------------------------------------------------------------------ item 12: terminal escapes


def test_jobs_wide_shows_the_commands_escape_escaped(esc_jobs: Path, db: str, tmp_path: Path) -> None:
    result = schedctl("jobs", "-o", "wide", "--jobs", str(esc_jobs), "--db", db, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "echo \\x1b]0;pwned\\x07 done" in result.stdout


def test_runs_and_logs_headers_show_escapes_escaped(db: str, tmp_path: Path) -> None:
    result = schedctl("runs", "-o", "wide", "--db", db, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert "j\\x1b]0;pwned\\x07" in result.stdout and "w\\x1b]0;pwned\\x07" in result.stdout
    result = schedctl("logs", f"j{TITLE}", "--db", db, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stderr and result.stderr.startswith("# j\\x1b]0;pwned\\x07 ")
    assert result.stdout == "out\n"
    # JSON keeps the value, in JSON's own escaping.
    result = schedctl("runs", "--json", "--db", db, cwd=tmp_path)
    assert "\x1b" not in result.stdout and "\\u001b" in result.stdout


def test_export_writes_such_a_command_only_as_an_escaped_comment(esc_jobs: Path, tmp_path: Path) -> None:
    result = schedctl("export", str(esc_jobs), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "# schedctl: not exported (control characters" in result.stdout
    assert "echo \\x1b]0;pwned\\x07 done" in result.stdout
    assert "job 'esc' written as a comment" in result.stderr


def test_a_one_line_error_shows_escapes_escaped(esc_jobs: Path, db: str, tmp_path: Path) -> None:
    result = schedctl("next", f"a{TITLE}", "--jobs", str(esc_jobs), cwd=tmp_path)
    assert result.returncode == 1
    assert "\x1b" not in result.stderr and "a\\x1b]0;pwned\\x07" in result.stderr


# ------------------------------------------------------------------------------ item 13: huge values echoed


def test_a_huge_id_is_cut_in_the_error_line_with_its_length(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f'[jobs.{"a" * 10_000}]\nschedule = "bad"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'
    )
    result = schedctl("validate", "--jobs", str(jobs), cwd=tmp_path)
    assert result.returncode == 78
    lines = result.stderr.strip().splitlines()
    assert lines and all(len(line) < 300 for line in lines), [len(line) for line in lines]
    assert "...(10000 characters)" in lines[0]


@pytest.mark.parametrize(
    ("key", "cut"), [("catch_up", '..." (10000 characters)'), ("timezone", "...' (10000 characters)")]
)
def test_a_huge_string_value_is_cut_with_its_length(key: str, cut: str, tmp_path: Path) -> None:
    values = {
        "schedule": "0 1 * * *",
        "timezone": "UTC",
        "catch_up": "skip",
        "command": "true",
        key: "Z" * 10_000,
    }
    jobs = tmp_path / "jobs.toml"
    jobs.write_text("[jobs.x]\n" + "".join(f'{k} = "{v}"\n' for k, v in values.items()))
    result = schedctl("validate", "--jobs", str(jobs), cwd=tmp_path)
    assert result.returncode == 78
    (line,) = result.stderr.strip().splitlines()
    assert len(line) < 300 and cut in line


# ------------------------------------------------------------------------------- item 15: --identity


@pytest.mark.parametrize(
    ("identity", "message"),
    [
        ("x" * 300, "...(300 characters): at most 255 characters"),
        ("a\x1b[2Jb", "control characters are not allowed"),
    ],
)
def test_a_bad_identity_is_refused_before_starting(identity: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "jobs.toml").write_text(ESC_JOB)
    result = schedctl(
        "serve",
        "--identity",
        identity,
        "--jobs",
        "jobs.toml",
        "--migrate",
        "--db",
        "sqlite:///x.db",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("schedctl: --identity ") and message in line and "\x1b" not in line
    assert not (tmp_path / "x.db").exists()  # refused before anything started
