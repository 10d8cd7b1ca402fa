"""The defaults a newcomer meets in the tour: which database was read, a missing default file, no job file,
a missing driver, Heroku-style URLs."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import factories
import pytest
from click.testing import CliRunner

from schedctl.cli import cli
from schedctl.jobs.job import CatchUp, Job
from schedctl.store import claims, open_store, parse_url
from schedctl.store.migrate import upgrade


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_missing_default_database_is_named_with_how_to_point_elsewhere_and_never_created(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for command in (["leases"], ["runs"], ["workers"], ["top", "--once"], ["status"], ["missed"]):
        result = invoke(*command)
        assert result.exit_code == 1, (command, result.output)
        message = str(result.exception) if result.exception else result.output
        assert "no database given, and the default sqlite file schedctl.db does not exist in" in message
        assert "SCHEDCTL_DATABASE_URL" in message and "--db" in message
    assert not (tmp_path / "schedctl.db").exists()


@pytest.fixture
def known(tmp_path, monkeypatch):
    """A database that knows two jobs (a leader saw them, runs were queued); no job file in the folder."""
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'other.db'}"
    store = open_store(url)
    upgrade(store)
    jobs = [
        Job(
            id="report", schedule="0 6 * * *", timezone="Europe/London", catch_up=CatchUp.LATEST, command="r"
        ),
        Job(id="sync", schedule="*/30 * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command=("s", "-q")),
    ]
    now = datetime.now(UTC).replace(microsecond=0)
    with store.begin() as conn:
        for j in jobs:
            factories.add_state(conn, j, now - timedelta(days=1), None)
        claims.queue_runs(conn, jobs[0], [now - timedelta(hours=2)])
    store.dispose()
    return url


def test_status_and_missed_without_a_job_file_work_from_the_database(known):
    every = invoke("status", "--db", known, "--json")
    assert every.exit_code == 0, every.output
    assert [s["job_id"] for s in json.loads(every.stdout)] == ["report", "sync"]
    assert "no job file (schedctl.toml does not exist here" in every.stderr
    one = invoke("status", "report", "--db", known)
    assert one.exit_code == 0, one.output
    assert "schedule:  0 6 * * * (Europe/London)" in one.stdout
    assert 'catch_up = "latest"' in one.stdout
    assert one.stderr.splitlines()[-1] == f"database: sqlite file {parse_url(known).database}"
    missed = invoke("missed", "sync", "--db", known)
    assert missed.exit_code == 0, missed.output
    unknown = invoke("status", "nope", "--db", known)
    assert unknown.exit_code == 1
    assert "no job 'nope' in the database, and no job file" in str(unknown.exception)


def test_a_missing_driver_says_which_extra_to_install_and_postgres_urls_are_postgresql(monkeypatch):
    assert parse_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "pymysql", None)
    for url, extra in (("postgres://u:secret@h/db", "postgres"), ("mysql://u:secret@h/db", "mysql")):
        result = invoke("leases", "--db", url)
        assert result.exit_code == 1
        message = str(result.exception)
        assert f"install the driver: pip install 'schedctl[{extra}]'" in message, message
        assert "secret" not in message


def test_human_listings_name_the_database_and_json_stays_clean(known):
    for command in (["leases"], ["runs"], ["workers"], ["status"], ["missed"]):
        human = invoke(*command, "--db", known)
        assert human.exit_code == 0, (command, human.output)
        assert f"database: sqlite file {Path(parse_url(known).database)}" in human.stderr, command
    as_json = invoke("runs", "--db", known, "--json")
    assert "database:" not in as_json.stderr
    json.loads(as_json.stdout)
