"""``schedctl jobs`` and ``schedctl validate`` through the real entry point (exit codes included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import factories
import pytest
from click.testing import CliRunner

from schedctl.cli import main
from schedctl.jobs.job import CatchUp, Job

JOBS = """\
[jobs.nightly]
schedule = "30 2 * * *"
timezone = "Europe/London"
catch_up = "latest"
command = ["echo", "[bold]not markup"]
description = "report"

[jobs.minutely]
schedule = "* * * * *"
timezone = "Asia/Kolkata"
catch_up = "all"
max_catch_up = 5
command = "date"

[jobs.held]
schedule = "@hourly"
timezone = "UTC"
catch_up = "skip"
command = "true"
paused = true
"""

JSON_FIELDS = [
    "id",
    "schedule",
    "when",
    "description",
    "timezone",
    "catch_up",
    "max_catch_up",
    "concurrency",
    "paused",
    "paused_at",
    "next_fire",
    "next_fire_utc",
    "last_run_scheduled_for",
    "last_run_state",
]


def run(args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``schedctl ARGS`` through main(), which maps errors to exit codes; returns (code, stdout, stderr)."""
    runner = CliRunner()
    old = os.getcwd()
    code: Any = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        with runner.isolation(env=env) as (out, err, _):
            try:
                main(args)
            except SystemExit as exc:
                code = exc.code
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    finally:
        os.chdir(old)
    return int(code or 0), stdout, stderr


@pytest.fixture
def jobs_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS)
    return path


def test_jobs_before_any_database_shows_dashes_and_creates_no_file(jobs_file: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run(
        ["jobs", "--jobs", str(jobs_file)], cwd=tmp_path
    )  # default db: sqlite:///schedctl.db
    assert (code, err) == (0, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    header, *rows = out.splitlines()
    assert header.split() == [
        "ID",
        "SCHEDULE",
        "DESCRIPTION",
        "TIMEZONE",
        "CATCH-UP",
        "NEXT",
        "LEFT",
        "LAST",
        "STATE",
    ]
    # Sorted by next fire: every minute, then 02:30 London; the paused job, which will not fire, last.
    assert [r.split()[0] for r in rows] == ["minutely", "nightly", "held"]
    assert rows[0].split()[-2:] == ["-", "-"]
    assert "[bold]not markup" not in out  # the command is only in -o wide
    assert "paused" in rows[2]


def columns(out: str) -> list[dict[str, str]]:
    """The plain table's rows as {column: cell}, cut at the header's column starts (cells hold spaces)."""
    header, *rows = out.splitlines()
    names = header.split()
    starts = [header.index(f"{name} " if name != names[-1] else name) for name in names]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{n: row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for row in rows]


def test_jobs_shows_the_description_and_the_schedule_each_in_its_column(
    jobs_file: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'none.db'}"
    code, out, _ = run(["jobs", "--jobs", str(jobs_file), "--db", db])
    assert code == 0
    rows = {r["ID"]: r for r in columns(out)}
    assert (rows["nightly"]["SCHEDULE"], rows["nightly"]["DESCRIPTION"]) == ("at 02:30 every day", "report")
    assert (rows["minutely"]["SCHEDULE"], rows["minutely"]["DESCRIPTION"]) == ("every minute", "-")
    code, out, _ = run(["jobs", "--jobs", str(jobs_file), "--db", db, "-o", "wide"])
    assert {r["ID"]: r["CRON"] for r in columns(out)} == {
        "minutely": "* * * * *",
        "nightly": "30 2 * * *",
        "held": "@hourly",
    }
    code, out, _ = run(["jobs", "--jobs", str(jobs_file), "--db", db, "--json"])
    nightly = next(r for r in json.loads(out) if r["id"] == "nightly")
    assert (nightly["schedule"], nightly["when"], nightly["description"]) == (
        "30 2 * * *",
        "at 02:30 every day",
        "report",
    )


def test_jobs_json_shape(jobs_file: Path, tmp_path: Path) -> None:
    code, out, _ = run(
        ["jobs", "--jobs", str(jobs_file), "--db", f"sqlite:///{tmp_path / 'none.db'}", "--json"]
    )
    assert code == 0
    rows = json.loads(out)
    assert [list(r) for r in rows] == [JSON_FIELDS] * 3
    minutely = rows[0]
    assert minutely["id"] == "minutely"
    assert (minutely["catch_up"], minutely["max_catch_up"], minutely["concurrency"]) == ("all", 5, "forbid")
    next_local = datetime.fromisoformat(minutely["next_fire"])
    assert next_local.utcoffset() == timedelta(hours=5, minutes=30)
    assert datetime.fromisoformat(minutely["next_fire_utc"]) == next_local
    assert minutely["next_fire_utc"].endswith("+00:00")
    assert timedelta(0) < next_local - datetime.now(UTC) <= timedelta(minutes=1)
    assert (minutely["last_run_scheduled_for"], minutely["last_run_state"]) == (None, None)
    held = rows[2]
    assert (held["paused"], held["next_fire"], held["next_fire_utc"]) == (True, None, None)
    assert not (tmp_path / "none.db").exists()


def test_jobs_jsonl_and_wide(jobs_file: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'none.db'}"
    code, out, _ = run(["jobs", "--jobs", str(jobs_file), "--db", db, "-o", "jsonl"])
    assert code == 0
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["minutely", "nightly", "held"]
    code, out, _ = run(["jobs", "--jobs", str(jobs_file), "--db", db, "-o", "wide"])
    assert code == 0
    assert out.splitlines()[0].split()[-6:] == [
        "CRON",
        "CONCURRENCY",
        "MAX-CATCH-UP",
        "PAUSED",
        "NEXT-UTC",
        "COMMAND",
    ]
    assert '["echo", "[bold]not markup"]' in out


def _insert_runs(store: Any, rows: list[tuple[str, datetime, str]]) -> None:
    with store.begin() as conn:
        for job_id, at, state in rows:
            factories.add_runs(conn, Job(job_id, "* * * * *", "UTC", CatchUp.SKIP, "true"), [at], state)


def test_jobs_shows_the_last_run_from_the_database(jobs_file: Path, db_url: str, store: Any) -> None:
    t = datetime(2026, 11, 30, 2, 30, tzinfo=UTC)
    _insert_runs(
        store,
        [
            ("nightly", t - timedelta(days=1), "succeeded"),
            ("nightly", t, "failed"),
            ("nightly", t + timedelta(hours=1), "queued"),  # not run yet: not the last run
            ("nightly", t + timedelta(hours=2), "skipped"),
            ("held", t, "running"),
            ("other", t + timedelta(days=1), "succeeded"),  # a job no longer in the file
        ],
    )
    minutely = Job("minutely", "* * * * *", "Asia/Kolkata", CatchUp.ALL, "date")
    with store.begin() as conn:  # `schedctl pause minutely`, as the database records it
        factories.add_state(conn, minutely, t, None, paused_at=t)
    code, out, err = run(["jobs", "--jobs", str(jobs_file), "--db", db_url, "--json"])
    assert code == 0
    # The rows above name versions of other definitions than the file's: said, once (issue 30).
    assert [line.split(":")[0] for line in err.splitlines()] == ["2 jobs (held, nightly)"]
    assert "the job files differ from the definitions the leader stored" in err
    rows = {r["id"]: r for r in json.loads(out)}
    assert (rows["minutely"]["paused"], rows["minutely"]["paused_at"]) == (True, "2026-11-30T02:30:00+00:00")
    assert rows["minutely"]["next_fire"] is None
    assert (rows["nightly"]["paused"], rows["nightly"]["paused_at"]) == (False, None)
    last = {r["id"]: (r["last_run_scheduled_for"], r["last_run_state"]) for r in rows.values()}
    assert last == {
        "nightly": ("2026-11-30T02:30:00+00:00", "failed"),
        "held": ("2026-11-30T02:30:00+00:00", "running"),
        "minutely": (None, None),
    }
    code, out, _ = run(["jobs", "--jobs", str(jobs_file), "--db", db_url])
    nightly = next(line for line in out.splitlines() if line.startswith("nightly"))
    assert nightly.split()[-2:] == ["ago", "failed"]  # LAST "<span> ago", STATE "failed"


def test_a_database_without_the_schema_is_a_warning_and_dashes(jobs_file: Path, tmp_path: Path) -> None:
    import sqlite3

    sqlite3.connect(tmp_path / "old.db").close()
    code, out, err = run(
        ["jobs", "--jobs", str(jobs_file), "--db", f"sqlite:///{tmp_path / 'old.db'}", "--json"]
    )
    assert code == 0
    assert err.startswith("schedctl: warning: last runs not shown: ") and err.count("\n") == 1
    assert "schedctl db upgrade" in err
    assert {r["last_run_state"] for r in json.loads(out)} == {None}


def test_an_unreachable_server_is_a_warning_and_dashes(jobs_file: Path) -> None:
    code, out, err = run(
        ["jobs", "--jobs", str(jobs_file), "--db", "postgresql://nobody@127.0.0.1:1/none", "--json"]
    )
    assert code == 0
    assert err.startswith(
        "schedctl: warning: last runs not shown: cannot reach postgresql at 127.0.0.1:1/none"
    )
    assert len(json.loads(out)) == 3


def test_jobs_with_an_empty_file_is_an_empty_listing(tmp_path: Path) -> None:
    (tmp_path / "empty.toml").write_text("")
    assert run(["jobs", "--jobs", str(tmp_path / "empty.toml"), "--json"], cwd=tmp_path) == (0, "[]\n", "")
    code, out, err = run(["jobs", "--jobs", str(tmp_path / "empty.toml")], cwd=tmp_path)
    assert (code, out) == (0, "")
    assert "no jobs" in err


def test_jobs_with_a_bad_file_exits_78_with_the_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(JOBS.replace('"Asia/Kolkata"', '"Asia/Calcuta"'))
    code, out, err = run(["jobs", "--jobs", str(tmp_path / "bad.toml")])
    assert (code, out) == (78, "")
    assert err.startswith(f"{tmp_path / 'bad.toml'}:10: jobs.minutely.timezone: unknown zone 'Asia/Calcuta'")


def test_validate_ok(jobs_file: Path) -> None:
    assert run(["validate", str(jobs_file)]) == (0, f"{jobs_file}: 3 jobs OK\n", "")


def test_validate_reports_every_error_of_every_path_and_exits_78(jobs_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(JOBS.replace('"latest"', '"Latest"').replace("max_catch_up = 5", "max_catch_up = 0"))
    code, out, err = run(["validate", str(jobs_file), str(bad), str(tmp_path / "missing.toml")])
    assert code == 78
    assert out == f"{jobs_file}: 3 jobs OK\n"
    assert err.splitlines() == [
        f'{bad}:4: jobs.nightly.catch_up: expected one of "skip", "latest", "all", got "Latest" (did you mean \'latest\'?)',
        f"{bad}:12: jobs.minutely.max_catch_up: must be from 1 to 1000000, got 0",
        f"{tmp_path / 'missing.toml'}: cannot read job definitions: no such file or directory",
    ]


def test_validate_defaults_to_schedctl_jobs_then_the_current_folder(jobs_file: Path, tmp_path: Path) -> None:
    assert run(["validate"], env={"SCHEDCTL_JOBS": str(jobs_file)})[:2] == (0, f"{jobs_file}: 3 jobs OK\n")
    code, _, err = run(["validate"], cwd=tmp_path)
    assert (code, err) == (78, "schedctl.toml: cannot read job definitions: no such file or directory\n")
    (tmp_path / "schedctl.toml").write_text("# nothing yet\n")
    assert run(["validate"], cwd=tmp_path) == (0, "schedctl.toml: no jobs\n", "")


def test_validate_and_jobs_without_a_database_do_not_import_sqlalchemy(
    jobs_file: Path, tmp_path: Path
) -> None:
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('sqlalchemy' in sys.modules, file=sys.stderr))\n"
        "from schedctl.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    for args in (["validate", str(jobs_file)], ["jobs", "--jobs", str(jobs_file)]):
        proc = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == "False", (args, proc.stderr)


def test_a_terminal_gets_a_rich_table_without_colour_under_no_color(jobs_file: Path, tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedctl", "jobs", "--jobs", str(jobs_file)],
        stdout=follower,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, err = proc.communicate(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, err
    text = b"".join(chunks).decode()
    assert "minutely" in text and "[bold]not markup" not in text
    assert "\x1b[3" not in text  # no colour codes
