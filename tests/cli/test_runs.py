"""`runs`, `run`, `logs`, `cancel` through click on a temporary SQLite file."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import factories
import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from schedctl.cli import cli
from schedctl.errors import RunNotFound, SchedctlError
from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import claims, open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

JOBS = """\
[jobs.report]
schedule = "0 6 * * *"
timezone = "Europe/London"
catch_up = "latest"
command = "bin/report --daily"
"""
T = datetime(2026, 3, 1, 6, 0, tzinfo=UTC)


@pytest.fixture
def env(tmp_path: Path):
    (tmp_path / "schedctl.toml").write_text(JOBS)
    url = f"sqlite:///{tmp_path / 'schedctl.db'}"
    store = open_store(url)
    upgrade(store)
    job = Job(
        id="report",
        schedule="0 6 * * *",
        timezone="Europe/London",
        catch_up=CatchUp.LATEST,
        command="bin/report --daily",
        concurrency=Concurrency.FORBID,
    )
    with store.begin() as conn:
        claims.queue_runs(conn, job, [T, T + timedelta(days=1), T + timedelta(days=2)])
        conn.execute(
            update(job_runs)
            .where(job_runs.c.scheduled_for == T)
            .values(
                state="succeeded",
                attempt=1,
                worker="w1",
                started_at=T,
                finished_at=T + timedelta(seconds=90),
                exit_status=0,
                output_tail="rows: 42\n",
            )
        )
        conn.execute(
            update(job_runs)
            .where(job_runs.c.scheduled_for == T + timedelta(days=1))
            .values(state="running", attempt=2, worker="w2", started_at=T + timedelta(days=1))
        )
    yield {"db": url, "jobs": str(tmp_path / "schedctl.toml"), "store": store}
    store.dispose()


def invoke(env, *args):
    return CliRunner().invoke(cli, [*args, "--db", env["db"]])


def test_runs_json_lists_newest_first_with_the_documented_fields(env):
    result = invoke(env, "runs", "report", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert [(r["scheduled_for"], r["state"], r["attempt"]) for r in got] == [
        ("2026-03-03T06:00:00+00:00", "queued", 0),
        ("2026-03-02T06:00:00+00:00", "running", 2),
        ("2026-03-01T06:00:00+00:00", "succeeded", 1),
    ]
    assert got[2]["duration_seconds"] == 90.0 and got[2]["exit_status"] == 0 and got[2]["worker"] == "w1"
    assert set(got[0]) >= {
        "job_id",
        "scheduled_for",
        "state",
        "attempt",
        "worker",
        "started_at",
        "finished_at",
        "duration_seconds",
        "exit_status",
        "manual",
        "reason",
    }


def test_runs_table_filters_by_state(env):
    result = invoke(env, "runs", "--state", "succeeded")
    assert result.exit_code == 0
    header, line = result.stdout.splitlines()
    assert result.stderr.startswith("database: sqlite file ")  # which database it read, on stderr
    assert header.split()[:3] == ["JOB", "SCHEDULED", "FOR"]
    assert line.split()[:3] == ["report", "2026-03-01T06:00:00Z", "succeeded"]  # the JSON keeps +00:00
    assert line.split()[-2:] == ["90.0s", "0"]


def test_logs_prints_the_latest_started_runs_output_or_a_named_one(env):
    result = CliRunner().invoke(cli, ["logs", "report", "2026-03-01T06:00:00Z", "--db", env["db"]])
    assert result.exit_code == 0
    assert result.stdout == "rows: 42\n"
    latest = invoke(env, "logs", "report")
    assert latest.exit_code == 0 and latest.stdout == ""  # the running one, nothing stored yet
    missing = invoke(env, "logs", "report", "2026-03-01T08:00:00+01:00")
    assert isinstance(missing.exception, RunNotFound)


def test_cancel_a_queued_run_at_once_and_a_running_one_through_its_worker(env):
    queued = invoke(env, "cancel", "report", "2026-03-03T06:00:00Z")
    assert queued.exit_code == 0 and queued.output.startswith("cancelled report")
    running = invoke(env, "cancel", "report", "2026-03-02T07:00:00+01:00")
    assert running.exit_code == 0 and "cancel requested" in running.output
    with env["store"].begin() as conn:
        got = conn.execute(
            select(job_runs.c.scheduled_for, job_runs.c.state, job_runs.c.cancel_requested).order_by(
                job_runs.c.scheduled_for
            )
        ).all()
    assert [(s, bool(c)) for _, s, c in got] == [
        ("succeeded", False),
        ("running", True),
        ("cancelled", False),
    ]
    done = invoke(env, "cancel", "report", "2026-03-01T06:00:00Z")
    assert isinstance(done.exception, SchedctlError) and "already ended" in str(done.exception)
    bad = invoke(env, "cancel", "report", "yesterday")
    assert bad.exit_code == 2 and "RFC 3339" in bad.output


def test_run_queues_a_manual_run_keyed_to_the_microsecond(env):
    before = datetime.now(UTC)
    result = CliRunner().invoke(cli, ["run", "report", "--jobs", env["jobs"], "--db", env["db"]])
    assert result.exit_code == 0, result.output
    with env["store"].begin() as conn:
        row = conn.execute(select(job_runs).where(job_runs.c.manual.is_(True))).mappings().one()
        snapshot = factories.snapshot_of(conn, "report", row["scheduled_for"])
    assert row["state"] == "queued" and row["term"] is None and row["attempt"] == 0
    assert before <= row["scheduled_for"] <= datetime.now(UTC)
    assert snapshot is not None and snapshot["command"] == "bin/report --daily"
    assert result.output == f"queued report {row['scheduled_for'].isoformat().replace('+00:00', 'Z')}\n"
    unknown = CliRunner().invoke(cli, ["run", "nope", "--jobs", env["jobs"], "--db", env["db"]])
    assert unknown.exit_code != 0


def test_cancel_takes_a_manual_runs_tick_to_the_second_and_lists_the_candidates_when_several(env):
    job = Job(id="report", schedule="0 6 * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true")
    one = T + timedelta(days=5, microseconds=123456)
    two = [T + timedelta(days=6, microseconds=m) for m in (111111, 999999)]
    with env["store"].begin() as conn:
        claims.queue_runs(conn, job, [one, *two], manual=True)
    single = invoke(env, "cancel", "report", "2026-03-06T06:00:00Z")
    assert single.exit_code == 0, single.output
    assert single.output == "cancelled report 2026-03-06T06:00:00.123456Z\n"
    several = invoke(env, "cancel", "report", "2026-03-07T06:00:00Z")
    assert several.exit_code == 1
    assert str(several.exception) == (
        "2 runs of 'report' fall in 2026-03-07T06:00:00Z: 2026-03-07T06:00:00.111111Z, "
        "2026-03-07T06:00:00.999999Z; give one"
    )
    exact = invoke(env, "cancel", "report", "2026-03-07T06:00:00.999999Z")
    assert exact.exit_code == 0 and exact.output.startswith("cancelled report 2026-03-07T06:00:00.999999")
