"""The record of missed ticks outlives history pruning (issue 13, part 3), on every backend.

A per-second job with catch_up = "skip" loses its leader for a day. The next leader's catch-up pass decides the
backlog through the real planner (the newest 1000 missed ticks become skipped rows, the older ones get no row;
the ticks inside the grace are dispatched late), then every later tick (199) succeeds while the worker prunes the history
down to its limits every few runs. `missed` and `replay` must still name every tick of the outage, with its
reason, from a bounded number of rows.

Instants are relative to the database's clock: retention (`keep_missed`) is judged by it, as in production.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta

import pytest
from factories import add_runs, add_state, add_term, run_row
from sqlalchemy import func, select, update

from schedctl.inspect.missed import missed
from schedctl.inspect.replay import plan_replay, replay
from schedctl.inspect.status import all_status, job_status
from schedctl.jobs.job import CatchUp, Job
from schedctl.leader import planner
from schedctl.store import pruning
from schedctl.store.dialect import insert_ignore, select_db_now
from schedctl.store.schema import job_runs, job_state, missed_ranges
from schedctl.timing.cron import schedule_for

PULSE = Job(id="pulse", schedule="* * * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true")
GRACE = 60.0
DAY = 86400


def _ran(store, ticks: list[datetime], prune_every: int = 10, keep_missed: float = 7 * DAY) -> None:
    """The ticks run and succeed, one by one; the worker prunes every ``prune_every`` of them."""
    for start in range(0, len(ticks), prune_every):
        chunk = ticks[start : start + prune_every]
        with store.begin() as conn:
            add_runs(conn, PULSE, chunk)
            conn.execute(
                update(job_state).where(job_state.c.job_id == PULSE.id).values(last_dispatched=max(chunk))
            )
            pruning.prune(conn, [PULSE.id], keep_succeeded=3, keep_failed=5, keep_missed=keep_missed)


def day_old_outage(store, keep_missed: float = 7 * DAY) -> tuple[datetime, list[datetime], list[datetime]]:
    """Returns now, the outage's missed ticks, and the ticks after it; the history is pruned to its limits."""
    with store.connect() as conn:
        db_now = select_db_now(conn)
    schedule = schedule_for(PULSE.schedule, PULSE.timezone)
    recovered = db_now.replace(microsecond=0) - timedelta(seconds=200)  # the new leader's arrival
    down = recovered - timedelta(seconds=DAY)  # the old leader's lease lapsed here
    defined = down - timedelta(seconds=100)
    before = [defined + timedelta(seconds=i) for i in range(1, 101)]  # ran: .. down
    with store.begin() as conn:
        add_state(conn, PULSE, defined, defined)
        add_term(conn, 1, "host-1:1:aa", defined - timedelta(seconds=5), down, down, "expired", grace=GRACE)
        add_term(conn, 2, "host-2:1:aa", recovered, db_now + timedelta(seconds=15), grace=GRACE)
    _ran(store, before, keep_missed=keep_missed)
    # The new leader's catch-up pass, decided by the real planner.
    win = planner.window(schedule, down, recovered + timedelta(microseconds=1), recovered, GRACE)
    plan = planner.plan_catch_up(PULSE, win, recovered, schedule)
    skipped = [t for t in plan.ticks if not t.queued]
    late = [t.scheduled_for for t in plan.ticks if t.queued]
    assert len(skipped) == planner.MAX_SKIPPED_ROWS and win.missed_more
    with store.begin() as conn:
        skips = [
            run_row(PULSE, t.scheduled_for, "skipped", reason=str(t.reason), reason_detail=t.detail)
            for t in skipped
        ]
        insert_ignore(conn, job_runs, skips)
    after = [recovered + timedelta(seconds=i) for i in range(1, 200)]  # every tick since: 199 runs
    _ran(store, late + after, keep_missed=keep_missed)
    outage = [down + timedelta(seconds=i) for i in range(1, DAY - int(GRACE))]  # older than the grace
    return db_now, outage, after


def test_missed_names_every_tick_of_a_day_old_outage_after_many_later_runs(store):
    now, outage, _ = day_old_outage(store)
    with store.connect() as conn:
        kept_runs = conn.execute(select(func.count()).select_from(job_runs)).scalar_one()
        ranges = conn.execute(select(func.count()).select_from(missed_ranges)).scalar_one()
        history_start = conn.execute(select(job_state.c.history_start)).scalar_one()
    assert history_start > outage[-1]  # pruning went far past the outage
    assert kept_runs == 3  # the successful-history limit
    assert ranges <= 3  # a day of a per-second job: the unrecorded stretch, the skipped stretch

    ticks = missed(store, PULSE, None, None, now)
    assert [t.scheduled_for for t in ticks] == outage
    recorded = outage[-planner.MAX_SKIPPED_ROWS :]
    assert all(t.reason_code == "catch_up_skip" and t.row_state == "skipped" for t in ticks[-1000:])
    # One reason for the whole recorded stretch. Its text names the lease's instants relative to each tick
    # (a date only where the day differs), so it is compared without them: the stretch crosses midnight
    # when the suite runs in the first minutes of a UTC day.
    texts = {re.sub(r"(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}", "T", t.reason_text) for t in ticks[-1000:]}
    assert texts == {
        "no scheduler held the lease from T (term 1, host-1:1:aa, ended: expired) until T (term 2, "
        'host-2:1:aa); then dropped by catch_up = "skip"'
    }
    assert ticks[-1000].scheduled_for == recorded[0]
    assert 'dropped by catch_up = "skip"' in ticks[-1].reason_text
    unrecorded = ticks[: -planner.MAX_SKIPPED_ROWS]
    assert {t.reason_code for t in unrecorded} == {"no_leader"}
    assert "no scheduler held the lease from" in unrecorded[0].reason_text


def test_replay_names_every_tick_and_a_replayed_tick_that_ran_is_not_missed_again(store):
    now, outage, _ = day_old_outage(store)
    plan = plan_replay(store, [PULSE], None, None, now)
    assert [t.scheduled_for for t in plan.ticks] == outage
    # Replay ten of them (five never recorded, five skipped); they run, succeed, and are pruned.
    chosen = outage[:5] + outage[-5:]
    for group in (outage[:5], outage[-5:]):
        replay(store, [PULSE], 5, group[0], group[-1] + timedelta(microseconds=1), now)
    with store.begin() as conn:
        conn.execute(
            update(job_runs)
            .where(job_runs.c.scheduled_for.in_(chosen))
            .values(state="succeeded", finished_at=now, exit_status=0)
        )
    _ran(store, [now.replace(microsecond=0) + timedelta(seconds=i) for i in range(1, 11)])
    with store.connect() as conn:
        assert (
            conn.execute(select(func.count()).where(job_runs.c.scheduled_for.in_(chosen))).scalar_one() == 0
        )
    later = now + timedelta(seconds=20)
    again = [t.scheduled_for for t in missed(store, PULSE, None, None, later)]
    assert again == outage[5:-5]


@pytest.mark.parametrize("keep", [600.0, 7 * 86400.0])
def test_keep_missed_bounds_how_long_the_record_lasts(store, keep):
    now, outage, _ = day_old_outage(store)
    with store.begin() as conn:
        pruning.prune(conn, [PULSE.id], keep_succeeded=3, keep_failed=5, keep_missed=keep)
    found = [t.scheduled_for for t in missed(store, PULSE, None, None, now)]
    # keep_missed counts from a range's last tick: the skipped stretch ended ~261 s before now (kept for
    # 600 s), the unrecorded one ~1261 s before (gone). The margin is minutes, not clock resolution.
    assert found == (outage[-planner.MAX_SKIPPED_ROWS :] if keep == 600.0 else outage)


def test_the_missed_command_names_every_tick_too(store, db_url, tmp_path):
    """Through the CLI, by the database's clock: the scenario is laid out relative to it, and the command runs
    within seconds of it (the margin: the 199 later runs reach 1 s before the setup's now, the window ends
    60 s before the command's now)."""
    import json

    from click.testing import CliRunner

    from schedctl.cli import cli

    _, outage, _ = day_old_outage(store)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[jobs.pulse]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'
    )
    result = CliRunner().invoke(cli, ["missed", "pulse", "--json", "--jobs", str(jobs), "--db", db_url])
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)
    assert [i["scheduled_for"] for i in items] == [t.isoformat() for t in outage]
    assert {i["reason"] for i in items[: -planner.MAX_SKIPPED_ROWS]} == {"no_leader"}
    assert {i["reason"] for i in items[-planner.MAX_SKIPPED_ROWS :]} == {"catch_up_skip"}


def test_ticks_older_than_keep_missed_are_not_recorded_at_all(store):
    """Folding a long stretch counts its ticks: only the last `keep_missed` of it is kept, so a year-long
    outage of a per-second job costs what a day's does. The margin: the prunes run within 120 s of `now`."""
    now, outage, _ = day_old_outage(store, keep_missed=3600)
    found = [t.scheduled_for for t in missed(store, PULSE, None, None, now)]
    assert found == outage[-len(found) :]
    assert found[0] >= now - timedelta(seconds=3600)
    assert len(found) >= len([t for t in outage if t >= now - timedelta(seconds=3600 - 120)])


def test_explaining_a_long_outage_holds_no_transaction_open(store, monkeypatch):
    """Explaining a day of a per-second job is seconds of CPU on a loaded host; done inside the read
    transaction, the server's idle-in-transaction bound (one-shot commands: 3 s) ended the session and
    `missed`/`replay` failed. Here a store whose bound is 1 s, and an explanation made 2.5 s slow: `missed`
    and `plan_replay` still answer, because they explain after their transaction ends. (SQLite has no such
    bound; there the test only shows that the answers stay the same.) `status` reads and explains the same way."""
    import time

    from schedctl.inspect import missed as missed_mod
    from schedctl.store import open_store
    from schedctl.store.bounds import Bounds

    now, outage, _ = day_old_outage(store)
    explain = missed_mod._explain

    def slow_explain(*args, **kwargs):
        time.sleep(2.5)  # margin: 2.5 s of "CPU" against a 1 s bound; the server acts within ~1 s of it
        return explain(*args, **kwargs)

    monkeypatch.setattr(missed_mod, "_explain", slow_explain)
    tight = open_store(store.url, bounds=dataclasses.replace(Bounds.for_lease(6), idle_in_transaction=1.0))
    try:
        assert [t.scheduled_for for t in missed(tight, PULSE, None, None, now)] == outage
        assert len(plan_replay(tight, [PULSE], None, None, now).ticks) == len(outage)
        assert [t.scheduled_for for t in job_status(tight, PULSE, now).missed] == outage
        assert [t.scheduled_for for t in all_status(tight, [PULSE], now)[0].missed] == outage
    finally:
        tight.dispose()
