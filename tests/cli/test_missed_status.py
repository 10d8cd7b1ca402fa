"""`missed`, `replay`, `status`, `pause`, `resume` through click on a temporary SQLite file: output shapes,
--check exit codes, the --yes requirement. Rows are laid out relative to the real clock, on a 10-minute grid."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import add_runs, add_state, add_term
from sqlalchemy import func, select

from schedctl.cli import cli, main
from schedctl.errors import JobNotFound
from schedctl.inspect.jobcontrol import actor
from schedctl.jobs.job import CatchUp, Job
from schedctl.store import open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_events, job_runs, job_state, lease_terms

JOBS = """\
[jobs.billing]
schedule = "*/10 * * * *"
timezone = "UTC"
catch_up = "all"
max_catch_up = 10
command = "bin/bill"

[jobs.cache]
schedule = "*/10 * * * *"
timezone = "UTC"
catch_up = "skip"
command = "bin/warm"
"""

NOW = datetime.now(UTC)
BASE = NOW.replace(minute=NOW.minute // 10 * 10, second=0, microsecond=0) - timedelta(hours=1)
# The leader lapsed at BASE - 3h + 2m11s; no scheduler since. Pin --until at BASE for exact counts.
OUTAGE = [
    BASE - timedelta(minutes=170) + timedelta(minutes=10 * i) for i in range(17)
]  # BASE-2h50 .. BASE-10m


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    jobs = tmp_path / "schedctl.toml"
    jobs.write_text(JOBS)
    url = f"sqlite:///{tmp_path / 'schedctl.db'}"
    store = open_store(url)
    upgrade(store)
    lapsed = BASE - timedelta(hours=3) + timedelta(seconds=131)
    with store.begin() as conn:
        ticks = [BASE - timedelta(hours=6) + timedelta(minutes=10 * i) for i in range(1, 19)]  # .. BASE-3h
        for job_id in ("billing", "cache"):
            job = Job(job_id, "*/10 * * * *", "UTC", CatchUp.SKIP, "true")
            add_state(conn, job, BASE - timedelta(hours=6), BASE - timedelta(hours=3))
            add_runs(conn, job, ticks)
        add_term(conn, 1, "host-b:4711", BASE - timedelta(hours=7), lapsed, current=True)
    store.dispose()
    return {"jobs": str(jobs), "db": url}


def run(env: dict[str, str], *args: str, input: str | None = None):
    return CliRunner().invoke(cli, [*args, "--jobs", env["jobs"], "--db", env["db"]], input=input)


def count_rows(env: dict[str, str], **where: str) -> int:
    store = open_store(env["db"])
    try:
        with store.begin() as conn:
            q = select(func.count()).select_from(job_runs)
            for k, v in where.items():
                q = q.where(job_runs.c[k] == v)
            return conn.execute(q).scalar_one()
    finally:
        store.dispose()


def test_missed_json_fields(env):
    result = run(env, "missed", "billing", "--json", "--until", BASE.isoformat())
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)
    assert [i["scheduled_for"] for i in items] == [t.isoformat() for t in OUTAGE]
    assert set(items[0]) == {"job_id", "scheduled_for", "reason", "reason_text", "row_state", "state"}
    assert {i["state"] for i in items} == {"missed"}
    assert items[0]["job_id"] == "billing" and items[0]["reason"] == "no_leader"
    assert items[0]["row_state"] is None
    assert items[0]["reason_text"].startswith("no scheduler held the lease from ")
    assert items[0]["reason_text"].endswith("(term 1, host-b:4711, ended: expired) and none has since")
    assert items[0]["scheduled_for"].endswith("+00:00")


def test_missed_table_and_counts_and_check(env):
    table = run(env, "missed", "billing", "--until", BASE.isoformat())
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["SCHEDULED", "(UTC)", "REASON", "ROW", "WHY"]
    assert (
        len(lines) == 1 + len(OUTAGE)
        and "no_leader" in lines[1]
        and "no scheduler held the lease" in lines[1]
    )

    counts = run(env, "missed", "--json", "--since", OUTAGE[0].isoformat(), "--until", BASE.isoformat())
    assert json.loads(counts.stdout) == [
        {
            "job_id": j,
            "missed": 17,
            "reasons": {"no_leader": 17},
            "first": OUTAGE[0].isoformat(),
            "last": OUTAGE[-1].isoformat(),
        }
        for j in ("billing", "cache")
    ]
    assert run(env, "missed", "--check").exit_code == 1
    early = (BASE - timedelta(hours=4)).isoformat()
    quiet = run(env, "missed", "billing", "--check", "--until", early)
    assert quiet.exit_code == 0 and "no missed ticks" in quiet.stderr


def test_check_exit_codes_through_the_real_entry_point(env, capsys):
    def code(*args: str) -> int:
        with pytest.raises(SystemExit) as exited:
            main([*args, "--jobs", env["jobs"], "--db", env["db"]])
        return int(exited.value.code or 0)

    assert code("missed", "--check") == 1
    assert code("status", "--check") == 1
    assert code("missed", "billing", "--check", "--until", (BASE - timedelta(hours=4)).isoformat()) == 0
    assert code("status") == 0
    capsys.readouterr()


def test_an_unmigrated_database_is_one_line_and_exit_1(env, tmp_path, capsys):
    empty = tmp_path / "empty.db"
    empty.touch()
    for command in (["missed"], ["status"], ["replay", "--max", "1", "--yes"], ["pause", "billing"]):
        with pytest.raises(SystemExit) as exited:
            main([*command, "--jobs", env["jobs"], "--db", f"sqlite:///{empty}"])
        assert exited.value.code == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "schedctl db upgrade" in err[0], err


def test_missed_takes_now_and_a_minus_duration(env):
    for since, until in (("-2h", "now"), ("2h", "NOW")):
        result = run(env, "missed", "billing", "--since", since, "--until", until, "--json")
        assert result.exit_code == 0, result.output
        assert isinstance(json.loads(result.stdout), (list, dict))


def test_missed_rejects_a_bad_time_and_an_unknown_job(env):
    bad = run(env, "missed", "billing", "--since", "yesterday-ish")
    assert bad.exit_code == 2 and "--since" in bad.output and "invalid time" in bad.output
    unknown = run(env, "missed", "biling")
    assert isinstance(unknown.exception, JobNotFound) and "did you mean 'billing'" in str(unknown.exception)


def test_replay_requires_yes_off_a_terminal(env):
    before = count_rows(env)
    result = run(env, "replay", "billing", "--max", "100")
    assert result.exit_code == 2 and "--yes" in result.output
    assert count_rows(env) == before


def test_replay_refuses_above_max_with_exit_1_and_changes_nothing(env, capsys):
    before = count_rows(env)
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "replay",
                "billing",
                "--max",
                "5",
                "--yes",
                "--until",
                BASE.isoformat(),
                "--jobs",
                env["jobs"],
                "--db",
                env["db"],
            ]
        )
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "17 missed ticks would be replayed (billing 17), more than --max 5; nothing was changed" in err
    assert "--max 17" in err
    assert count_rows(env) == before


def test_replay_dry_run_then_replay_then_nothing(env):
    until = BASE.isoformat()
    before = count_rows(env)
    dry = run(env, "replay", "billing", "--max", "17", "--until", until, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert len(dry.stdout.splitlines()) == 1 + 17 and "would replay 17 ticks" in dry.stderr
    assert count_rows(env) == before

    done = run(env, "replay", "billing", "--max", "17", "--until", until, "--yes")
    assert done.exit_code == 0, done.output
    assert "billing: 17 ticks queued" in done.stdout
    assert count_rows(env, state="queued") == 17 and count_rows(env) == before + 17

    again = run(env, "replay", "billing", "--max", "17", "--until", until, "--yes")
    assert again.exit_code == 0 and "nothing to replay" in again.stderr
    assert count_rows(env) == before + 17


def test_replay_says_it_leaves_the_ticks_inside_the_grace_to_the_leader(env):
    dry = run(env, "replay", "billing", "--max", "100", "--until", "0s", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "younger than the leader's catch-up grace (60s): late, not missed" in dry.stderr
    inside = run(env, "replay", "billing", "--max", "100", "--until", BASE.isoformat(), "--dry-run")
    assert "catch-up grace" not in inside.stderr


def test_replay_asks_on_a_terminal(env, monkeypatch):
    monkeypatch.setattr("schedctl.cli.missed.stdin_is_terminal", lambda: True)
    result = run(env, "replay", "billing", "--max", "17", "--until", BASE.isoformat(), input="n\n")
    assert result.exit_code == 1 and "Replay 17 ticks?" in result.output  # click's Abort
    assert count_rows(env, state="queued") == 0


def test_status_one_job_and_all_jobs(env):
    one = run(env, "status", "billing")
    assert one.exit_code == 0, one.output
    first = one.stdout.splitlines()[0]
    lapsed = (BASE - timedelta(hours=3) + timedelta(seconds=131)).strftime("%H:%M")
    since = lapsed if (BASE - timedelta(hours=3)).date() == NOW.date() else None
    assert first.startswith("billing: not running since ")
    assert first.endswith("because no scheduler has held the lease since then; last leader was host-b:4711")
    if since:
        assert f"since {since} because" in first
    assert "lease:     none held; last leader host-b:4711 (term 1)" in one.stdout

    data = json.loads(run(env, "status", "billing", "--json", "--last", "3").stdout)
    [item] = data
    assert item["verdict_code"] == "not_running" and item["warning"] is True
    assert [e["state"] for e in item["timeline"]] == ["missed"] * 3
    assert set(item["timeline"][0]) >= {"scheduled_for", "state", "exit_status", "duration_seconds", "reason"}
    assert item["lease"]["held"] is False and item["lease"]["holder"] == "host-b:4711"

    every = json.loads(run(env, "status", "--json").stdout)
    assert [s["job_id"] for s in every] == ["billing", "cache"]
    assert all("timeline" not in s and s["last_state"] == "succeeded" for s in every)
    plain = run(env, "status")
    assert plain.stdout.splitlines()[1].startswith("!")
    assert run(env, "status", "--check").exit_code == 1
    assert run(env, "status", "billing", "--check").exit_code == 1


def test_an_until_past_the_leaders_grace_lists_the_younger_ticks_as_late(env):
    """The leader recorded a 15-minute grace: the default window ends 15 minutes ago, and an explicit --until
    now lists the ticks of the last 15 minutes (at least one on a 10-minute grid) as late, not as nothing."""
    store = open_store(env["db"])
    with store.begin() as conn:
        conn.execute(lease_terms.update().values(catch_up_grace=900.0))
    store.dispose()
    default = json.loads(run(env, "missed", "billing", "--json").stdout)
    assert default and all(i["state"] == "missed" for i in default)
    cutoff = datetime.now(UTC) - timedelta(seconds=900)
    assert all(datetime.fromisoformat(i["scheduled_for"]) < cutoff for i in default)
    now = datetime.now(UTC)
    items = json.loads(run(env, "missed", "billing", "--json", "--until", now.isoformat()).stdout)
    late = [i for i in items if i["state"] == "late"]
    assert late and [i for i in items if i["state"] == "missed"] == default
    assert all(i["reason"] == "late" and i["row_state"] is None for i in late)
    assert (
        late[0]["reason_text"].startswith("no leader since ")
        and "(term 1, host-b:4711)" in late[0]["reason_text"]
    )
    assert all(datetime.fromisoformat(i["scheduled_for"]) >= cutoff - timedelta(seconds=5) for i in late)
    counts = run(env, "missed", "--until", now.isoformat())
    assert "late, not missed; not counted here (name a JOB to list them)" in counts.stderr


def test_missed_help_is_truthful_about_until():
    text = " ".join(CliRunner().invoke(cli, ["missed", "--help"]).output.split())
    assert "now minus the leader's catch-up grace" in text and "are listed as late, not missed" in text
    assert "60 s" not in text


def test_pause_and_resume(env):
    paused = run(env, "pause", "cache")
    assert paused.exit_code == 0 and "cache: paused" in paused.stdout
    assert "already paused" in run(env, "pause", "cache").stdout
    item = json.loads(run(env, "status", "cache", "--json").stdout)[0]
    assert item["verdict_code"] == "paused" and item["paused"] is True and item["warning"] is False
    assert item["next_fire"] is None and item["paused_by"] == actor()
    text = run(env, "status", "cache").stdout
    assert f" by {actor()} (schedctl pause)" in text.splitlines()[0]
    nxt = next(line for line in text.splitlines() if line.startswith("  next:"))
    assert nxt.startswith("  next:      none: paused since ") and f"UTC by {actor()}" in nxt
    row = next(line.split() for line in run(env, "status").stdout.splitlines() if "cache" in line.split())
    assert row[row.index("cache") + 5] == "paused"  # JOB, LAST (state, date, time), EXIT, then NEXT
    resumed = run(env, "resume", "cache")
    assert resumed.exit_code == 0 and "cache: resumed" in resumed.stdout
    assert "was not paused" in run(env, "resume", "cache").stdout
    store = open_store(env["db"])
    with store.begin() as conn:
        kinds = conn.execute(select(job_events.c.kind).where(job_events.c.job_id == "cache")).scalars().all()
        paused_at = conn.execute(
            select(job_state.c.paused_at).where(job_state.c.job_id == "cache")
        ).scalar_one()
    store.dispose()
    assert kinds == ["defined", "paused", "resumed"] and paused_at is None  # after the seeded first sight
