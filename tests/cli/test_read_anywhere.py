"""`status`, `missed`, `jobs`, `runs` and `logs` on a pod that reaches the database but has no job files (a
worker's), on each backend (issue 30): the jobs are the definitions the leader stored, and where a job file is
there too and differs, one line on stderr says which one is shown.

The database holds what a leader wrote for two jobs loaded from ``JOBS``: their state, their versions, a
manual run of `report` with its output, and a tick of `sync` it skipped a few seconds ago (inside the grace).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import add_runs, add_state, add_term
from sqlalchemy import select

from schedctl.cli import cli
from schedctl.jobs.config import load_jobs
from schedctl.store.schema import job_versions

JOBS = """\
[jobs.report]
schedule = "0 6 1 1 *"
timezone = "Europe/London"
catch_up = "latest"
command = "bin/report --daily"

[jobs.sync]
schedule = "* * * * *"
timezone = "UTC"
catch_up = "skip"
command = ["bin/sync", "-q"]
"""

SKIP_DETAIL = 'concurrency = "forbid": the run of the tick before is still running'


class Pod:
    """The database a leader wrote, and a pod's view of it: ``run`` invokes schedctl with ``--db``."""

    def __init__(self, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skipped: datetime) -> None:
        self.url, self.tmp_path, self.skipped = url, tmp_path, skipped
        self.empty = tmp_path / "jobs.d"  # mounted, but empty: a worker's
        self.empty.mkdir()
        monkeypatch.setenv("SCHEDCTL_JOBS", str(self.empty))

    def run(self, *args: str):
        return CliRunner().invoke(cli, [*args, "--db", self.url])

    def job_file(self, text: str) -> str:
        path = self.tmp_path / "scheduler.toml"
        path.write_text(text)
        return str(path)


@pytest.fixture
def pod(store, db_url, tmp_path, monkeypatch) -> Pod:
    source = tmp_path / "leader.toml"
    source.write_text(JOBS)
    jobs = load_jobs(source)
    now = datetime.now(UTC).replace(microsecond=0)
    skipped = (now - timedelta(seconds=30)).replace(second=0)  # 30 to 90 s ago: inside the 300 s grace
    with store.begin() as conn:
        add_term(
            conn, 1, "sched-0", now - timedelta(hours=1), now + timedelta(hours=1), current=True, grace=300.0
        )
        add_state(conn, jobs["report"], now - timedelta(hours=3), None)
        add_runs(conn, jobs["report"], [now - timedelta(hours=2)], manual=True, output_tail="report done\n")
        add_state(conn, jobs["sync"], now - timedelta(minutes=2), skipped)
        add_runs(conn, jobs["sync"], [skipped], "skipped", reason="concurrency", reason_detail=SKIP_DETAIL)
    return Pod(db_url, tmp_path, monkeypatch, skipped)


def stored_at(store, job_id: str) -> str:
    with store.read() as conn:
        at = conn.execute(
            select(job_versions.c.written_at).where(job_versions.c.job_id == job_id)
        ).scalar_one()
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def test_status_names_the_jobs_the_leader_stored_without_job_files(pod):
    one = pod.run("status", "report")
    assert one.exit_code == 0, one.output
    assert "schedule:  0 6 1 1 * (Europe/London)" in one.stdout
    assert 'policy:    catch_up = "latest"' in one.stdout
    assert (
        f"no job file ({pod.empty} defines no jobs; --jobs or SCHEDCTL_JOBS): 1 job as the leader stored them"
        in (one.stderr)
    )
    every = pod.run("status", "--json")
    assert every.exit_code == 0, every.output
    assert [s["job_id"] for s in json.loads(every.stdout)] == ["report", "sync"]
    missing = pod.run("status", "sync", "--jobs", str(pod.tmp_path / "nowhere.toml"))
    assert missing.exit_code == 0, missing.output
    assert f"no job file ({pod.tmp_path / 'nowhere.toml'} does not exist;" in missing.stderr
    assert missing.stdout.startswith("sync: ")


def test_missed_names_the_job_and_its_recorded_skip_without_job_files(pod):
    ticks = pod.run("missed", "sync", "--json")
    assert ticks.exit_code == 0, ticks.output
    assert json.loads(ticks.stdout) == [
        {
            "job_id": "sync",
            "scheduled_for": pod.skipped.isoformat(),
            "reason": "concurrency",
            "reason_text": SKIP_DETAIL,
            "row_state": "skipped",
            "state": "missed",
        }
    ]
    counts = pod.run("missed", "--json")
    assert counts.exit_code == 0, counts.output
    assert {c["job_id"]: c["missed"] for c in json.loads(counts.stdout)} == {"report": 0, "sync": 1}
    assert pod.run("missed", "sync", "--check").exit_code == 1  # a recorded skip is missed at once


def test_jobs_lists_the_definitions_the_leader_stored_without_job_files(pod):
    listed = pod.run("jobs", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert sorted(rows) == ["report", "sync"]
    assert (rows["report"]["schedule"], rows["report"]["timezone"]) == ("0 6 1 1 *", "Europe/London")
    assert rows["sync"]["last_run_state"] is None  # its only tick was skipped, never taken up
    assert "2 jobs as the leader stored them" in listed.stderr


def test_runs_need_no_job_files(pod):
    listed = pod.run("runs", "report", "--json")
    assert listed.exit_code == 0, listed.output
    assert [(r["job_id"], r["state"], r["manual"]) for r in json.loads(listed.stdout)] == [
        ("report", "succeeded", True)
    ]


def test_logs_need_no_job_files(pod):
    shown = pod.run("logs", "report")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == "report done\n"


def test_a_job_file_that_differs_from_the_stored_definition_is_shown_and_said_once(pod, store):
    edited = pod.job_file(JOBS.replace('catch_up = "latest"', 'catch_up = "all"\nmax_catch_up = 3'))
    one = pod.run("status", "report", "--jobs", edited)
    assert one.exit_code == 0, one.output
    assert 'catch_up = "all"' in one.stdout
    note = (
        f"job report: the job file differs from the definition the leader stored at {stored_at(store, 'report')} "
        "UTC; showing the job file"
    )
    assert one.stderr.splitlines()[0] == note
    listed = pod.run("jobs", "--jobs", edited)
    assert listed.exit_code == 0, listed.output
    assert listed.stderr.splitlines() == [note]
    # The same definition in both: nothing to say.
    same = pod.run("status", "sync", "--jobs", edited)
    assert same.exit_code == 0, same.output
    assert not [line for line in same.stderr.splitlines() if not line.startswith("database: ")]


def test_a_job_the_job_files_lack_is_shown_as_the_leader_stored_it(pod, store):
    only_report = pod.job_file(JOBS.split("[jobs.sync]")[0])
    one = pod.run("missed", "sync", "--jobs", only_report)
    assert one.exit_code == 0, one.output
    assert (
        f"job sync: not in {only_report}; showing the definition the leader stored at {stored_at(store, 'sync')} UTC"
        in one.stderr
    )
    assert "concurrency" in one.stdout
    unknown = pod.run("status", "nope", "--jobs", only_report)
    assert unknown.exit_code == 1
    assert f"no job 'nope' in {only_report}, nor in the database" in str(unknown.exception)
