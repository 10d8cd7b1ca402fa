"""Missed ticks, bounded replay, status and pause on every backend, with an injected clock.

The afternoon outage from the seed: a leader until 13:02:11 (term 7, host-b:4711, lapsed), none until
16:40:03 (term 8, host-a:99). The job fires every 10 minutes (UTC), catch_up = "all", max_catch_up = 10, and
has rows up to 13:00. The ticks 13:10 .. 16:30 (21 of them) are the ones nobody dispatched.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import factories
import pytest
from factories import add_runs, add_state, add_term
from launch import child_env
from sqlalchemy import func, insert, select

from schedctl.errors import ReplayRefused
from schedctl.inspect.jobcontrol import pause, resume
from schedctl.inspect.missed import missed, missed_counts
from schedctl.inspect.replay import plan_replay, replay
from schedctl.inspect.status import Verdict, all_status, job_status
from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import workers
from schedctl.store.schema import job_events, job_runs, job_state


def T(hour: int, minute: int, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 3, 1, hour, minute, second, micro, tzinfo=UTC)


BILLING = Job(
    id="billing",
    schedule="*/10 * * * *",
    timezone="UTC",
    catch_up=CatchUp.ALL,
    max_catch_up=10,
    command="bin/bill",
)
OUTAGE_TICKS = [T(13, 10) + timedelta(minutes=10 * i) for i in range(21)]  # 13:10 .. 16:30
GAP = "no scheduler held the lease from 13:02:11 (term 7, host-b:4711, ended: expired) until 16:40:03 (term 8, host-a:99)"


def every_10_minutes(start: datetime, end: datetime) -> list[datetime]:
    """Ticks start, start+10m, ... <= end."""
    out, t = [], start
    while t <= end:
        out.append(t)
        t += timedelta(minutes=10)
    return out


def seed_outage(store, recovered: bool = True) -> None:
    """Rows 09:10 .. 13:00 succeeded; with ``recovered``, term 8 leads from 16:40:03 and ran 16:40."""
    with store.begin() as conn:
        add_state(conn, BILLING, T(9, 0), T(13, 0))
        add_runs(conn, BILLING, every_10_minutes(T(9, 10), T(13, 0)), term=6)
        add_term(conn, 6, "host-a:99", T(8, 55), T(11, 30), T(11, 30), "released")
        if recovered:
            add_term(conn, 7, "host-b:4711", T(11, 30), T(13, 2, 11), T(16, 40, 3), "expired")
            add_term(conn, 8, "host-a:99", T(16, 40, 3), T(16, 45, 10), current=True)
            add_runs(conn, BILLING, [T(16, 40)], term=8)
        else:
            add_term(conn, 7, "host-b:4711", T(11, 30), T(13, 2, 11), current=True)


def all_rows(store, job_id: str = "billing") -> list[tuple]:
    with store.begin() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                select(job_runs.c.scheduled_for, job_runs.c.state, job_runs.c.term, job_runs.c.reason)
                .where(job_runs.c.job_id == job_id)
                .order_by(job_runs.c.scheduled_for)
            )
        ]


def events(store, job_id: str = "billing") -> list[tuple]:
    with store.begin() as conn:
        q = select(job_events.c.kind, job_events.c.detail).where(job_events.c.job_id == job_id)
        return [tuple(r) for r in conn.execute(q.order_by(job_events.c.id))]


# -- the afternoon outage -----------------------------------------------------------------------------------


def test_missed_names_the_outage_ticks_with_no_leader(store):
    seed_outage(store)
    ticks = missed(store, BILLING, None, None, now=T(16, 45))
    assert [t.scheduled_for for t in ticks] == OUTAGE_TICKS
    assert {t.reason_code for t in ticks} == {"no_leader"}
    assert {t.row_state for t in ticks} == {None}
    assert ticks[0].reason_text == GAP
    [count] = missed_counts(store, [BILLING], now=T(16, 45))
    assert (count.job_id, count.count, dict(count.reasons)) == ("billing", 21, {"no_leader": 21})
    assert (count.first, count.last) == (T(13, 10), T(16, 30))


def test_a_tick_younger_than_the_grace_is_not_missed_yet(store):
    seed_outage(store, recovered=False)
    ticks = missed(store, BILLING, None, None, now=T(16, 30, 59))
    assert ticks[-1].scheduled_for == T(16, 20)
    assert missed(store, BILLING, None, None, now=T(16, 31, 0, 1))[-1].scheduled_for == T(16, 30)
    assert ticks[0].reason_text == (
        "no scheduler held the lease from 13:02:11 (term 7, host-b:4711, ended: expired) and none has since"
    )


def test_replay_refuses_above_the_bound_and_changes_nothing(store):
    seed_outage(store)
    before_rows, before_events = all_rows(store), events(store)
    with pytest.raises(ReplayRefused) as err:
        replay(store, [BILLING], 5, None, None, now=T(16, 45))
    assert "21 missed ticks" in str(err.value) and "--max 21" in str(err.value)
    assert "nothing was changed" in str(err.value)
    assert all_rows(store) == before_rows and events(store) == before_events


def test_replay_dispatches_exactly_the_missed_ticks_then_does_nothing(store):
    seed_outage(store)
    before = all_rows(store)
    progress: list[tuple[int, int]] = []
    result = replay(store, [BILLING], 30, None, None, now=T(16, 45), progress=lambda *p: progress.append(p))
    assert (result.dispatched, result.already, len(result.plan.ticks)) == (21, 0, 21)
    assert progress == [(21, 21)]
    rows = all_rows(store)
    new = [r for r in rows if r not in before]
    assert new == [(t, "queued", None, None) for t in OUTAGE_TICKS]
    assert len(rows) == len(before) + 21
    with store.begin() as conn:
        concurrency, labels = conn.execute(
            select(job_runs.c.concurrency, job_runs.c.labels_key).where(job_runs.c.scheduled_for == T(13, 10))
        ).one()
        snap = factories.snapshot_of(conn, BILLING.id, T(13, 10))
        last_dispatched = conn.execute(select(job_state.c.last_dispatched)).scalar_one()
    assert (snap, concurrency, labels) == (BILLING.snapshot(), "forbid", "")
    assert last_dispatched == T(16, 30)
    assert events(store)[-1][0] == "replayed"
    assert missed(store, BILLING, None, None, now=T(16, 45)) == []

    again = replay(store, [BILLING], 30, None, None, now=T(16, 46))
    assert (again.dispatched, again.plan.ticks) == (0, [])
    assert all_rows(store) == rows
    assert [e for e in events(store) if e[0] == "replayed"].__len__() == 1


def test_a_window_inside_the_outage_still_names_both_ends(store):
    seed_outage(store)
    ticks = missed(store, BILLING, T(14, 0), T(14, 30), now=T(16, 45))
    assert [t.scheduled_for for t in ticks] == [T(14, 0), T(14, 10), T(14, 20)]
    assert {t.reason_text for t in ticks} == {GAP}


def test_dry_run_lists_the_plan_and_writes_nothing(store):
    seed_outage(store)
    before = all_rows(store)
    result = replay(store, [BILLING], 30, None, None, now=T(16, 45), dry_run=True)
    assert [t.scheduled_for for t in result.plan.ticks] == OUTAGE_TICKS
    assert {t.action for t in result.plan.ticks} == {"insert"}
    assert result.dispatched == 0 and all_rows(store) == before


def test_replay_window_is_bounded_by_since_and_until(store):
    seed_outage(store)
    result = replay(store, [BILLING], 3, T(14, 0), T(14, 30), now=T(16, 45))
    assert [t for t, s, *_ in all_rows(store) if s == "queued"] == [T(14, 0), T(14, 10), T(14, 20)]
    assert result.dispatched == 3


def test_two_racing_replays_dispatch_each_tick_once(store):
    seed_outage(store)
    before = len(all_rows(store))
    plan = plan_replay(store, [BILLING], None, None, now=T(16, 45))
    start = threading.Barrier(2)
    results, errors = [], []

    def go() -> None:
        try:
            start.wait()
            results.append(replay(store, [BILLING], 30, None, None, now=T(16, 45), plan=plan))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(r.dispatched for r in results)[1] > 0
    assert sum(r.dispatched for r in results) == 21
    assert [r for r in all_rows(store) if r[1] == "queued"] == [
        (t, "queued", None, None) for t in OUTAGE_TICKS
    ]
    with store.begin() as conn:
        total = conn.execute(select(func.count()).select_from(job_runs)).scalar_one()
    assert total == before + 21


def test_status_says_not_running_while_no_leader(store):
    seed_outage(store, recovered=False)
    st = job_status(store, BILLING, now=T(16, 35))
    assert st.verdict_code == Verdict.NOT_RUNNING
    assert st.verdict == (
        "not running since 13:02 because no scheduler has held the lease since then; last leader was host-b:4711"
    )
    assert st.lease is not None and not st.lease_held
    assert st.next_fire == T(16, 40)
    assert [e.state for e in st.timeline][-3:] == ["missed", "missed", "missed"]


def test_status_after_recovery_points_at_replay_then_is_healthy(store):
    seed_outage(store)
    st = job_status(store, BILLING, now=T(16, 45), last_n=5)
    assert st.verdict_code == Verdict.MISSED
    assert st.verdict.startswith("missed 21 ticks (13:10..16:30): " + GAP)
    assert st.verdict.endswith("`schedctl replay billing --max 21` runs them")
    assert [(e.scheduled_for, e.state) for e in st.timeline] == [
        (T(16, 0), "missed"),
        (T(16, 10), "missed"),
        (T(16, 20), "missed"),
        (T(16, 30), "missed"),
        (T(16, 40), "succeeded"),
    ]
    assert st.timeline[-1].duration_seconds == 3.0 and st.timeline[-1].exit_status == 0
    assert st.lease is not None and st.lease_held and st.lease.holder == "host-a:99"

    replay(store, [BILLING], 30, None, None, now=T(16, 45))
    with store.begin() as conn:
        for t in OUTAGE_TICKS:
            conn.execute(
                job_runs.update()
                .where(job_runs.c.scheduled_for == t)
                .values(state="succeeded", started_at=T(16, 45), finished_at=T(16, 45, 2), exit_status=0)
            )
    st = job_status(store, BILLING, now=T(16, 45, 5))
    assert st.verdict_code == Verdict.HEALTHY
    assert st.verdict == "healthy: last run succeeded at 16:40, next at 16:50"


def test_refused_catch_up_is_explained_and_replay_clears_it(store):
    """Term 8 found 21 missed ticks > max_catch_up=10: skipped rows catch_up_refused, job_state.refused_at."""
    seed_outage(store)
    detail = "21 missed ticks exceed max_catch_up = 10; nothing was queued. Run `schedctl replay billing` to dispatch them"
    said = "21 missed ticks exceed max_catch_up = 10"
    with store.begin() as conn:
        conn.execute(job_runs.delete().where(job_runs.c.scheduled_for == T(16, 40)))
        add_runs(
            conn,
            BILLING,
            OUTAGE_TICKS,
            state="skipped",
            term=8,
            reason="catch_up_refused",
            reason_detail=detail,
        )
        conn.execute(job_state.update().values(refused_at=T(16, 40, 4), refused_detail=detail))
        conn.execute(
            insert(job_events).values(job_id="billing", at=T(16, 40, 4), kind="refused", detail=detail)
        )
    ticks = missed(store, BILLING, None, None, now=T(16, 45))
    assert [t.scheduled_for for t in ticks] == [*OUTAGE_TICKS, T(16, 40)]
    assert {(t.reason_code, t.row_state) for t in ticks[:-1]} == {("catch_up_refused", "skipped")}
    assert (
        ticks[0].reason_text
        == f'{GAP}; then refused by catch_up = "all": {said}; waiting for `schedctl replay`'
    )
    assert (ticks[-1].reason_code, ticks[-1].row_state) == ("catch_up_refused", None)
    assert "catch-up was refused at 16:40:04" in ticks[-1].reason_text

    st = job_status(store, BILLING, now=T(16, 45))
    assert st.verdict_code == Verdict.REFUSED
    assert st.verdict == f"refused: {said}; run `schedctl replay billing --max 22`"

    result = replay(store, [BILLING], 22, None, None, now=T(16, 45))
    assert result.dispatched == 22
    assert {t.action for t in result.plan.ticks} == {"requeue", "insert"}
    rows = all_rows(store)
    assert [r for r in rows if r[0] >= T(13, 10)] == [
        (t, "queued", None, None) for t in [*OUTAGE_TICKS, T(16, 40)]
    ]
    with store.begin() as conn:
        refused_at, refused_detail, last = conn.execute(
            select(job_state.c.refused_at, job_state.c.refused_detail, job_state.c.last_dispatched)
        ).one()
    assert (refused_at, refused_detail, last) == (None, None, T(16, 40))
    kind, text = events(store)[-1]
    assert kind == "replayed" and "22 of 22" in text and "refusal cleared" in text
    assert replay(store, [BILLING], 22, None, None, now=T(16, 46)).dispatched == 0


# -- every other reason -------------------------------------------------------------------------------------


def job(job_id: str, **kw) -> Job:
    return Job(
        id=job_id,
        schedule="*/10 * * * *",
        timezone="UTC",
        catch_up=kw.pop("catch_up", CatchUp.SKIP),
        command="true",
        **kw,
    )


def seed_leader_all_day(conn) -> None:
    add_term(conn, 1, "host-a:99", T(0, 0), T(12, 0, 10), current=True)


# What the scheduler (schedctl/leader/planner.py, schedctl/store/dispatch.py) writes as reason_detail.
BUSY = 'a run of the job was still queued or running (concurrency = "forbid")'
LATE = "dispatch would have been 412.0s after the tick, past the starting deadline of 300s"


def test_each_reason_from_what_the_store_recorded(store):
    now = T(11, 0, 30)  # ticks up to 10:50 are old enough to be missed
    deadline = job("deadline", starting_deadline=300)
    forbid = job("forbid", concurrency=Concurrency.FORBID)
    latest = job("latest", catch_up=CatchUp.LATEST)
    skip = job("skip")
    paused = job("paused")
    quiet = job("quiet")
    with store.begin() as conn:
        seed_leader_all_day(conn)
        for j in (deadline, forbid, latest, skip, paused, quiet):
            add_state(conn, j, T(10, 0), T(10, 50) if j is not quiet else T(10, 20))
        add_runs(conn, deadline, [T(10, 10)], state="skipped", reason="starting_deadline", reason_detail=None)
        add_runs(conn, forbid, [T(10, 20)], state="skipped", reason="concurrency", reason_detail=None)
        add_runs(conn, deadline, [T(10, 30)], state="skipped", reason="starting_deadline", reason_detail=LATE)
        add_runs(conn, forbid, [T(10, 50)], state="skipped", reason="concurrency", reason_detail=BUSY)
        add_runs(conn, latest, [T(10, 30)], state="skipped", reason="catch_up_latest", reason_detail=None)
        add_runs(conn, skip, [T(10, 40)], state="skipped", reason="catch_up_skip", reason_detail=None)
        for j in (deadline, forbid, latest, skip):
            done = [t for t in every_10_minutes(T(10, 10), T(10, 50)) if t not in all_ticks_skipped(conn, j)]
            add_runs(conn, j, done)
        add_runs(conn, quiet, every_10_minutes(T(10, 10), T(10, 20)))
        conn.execute(
            insert(job_events).values(job_id="paused", at=T(10, 5), kind="paused", detail="schedctl pause")
        )
        conn.execute(
            insert(job_events).values(job_id="paused", at=T(10, 35), kind="resumed", detail="schedctl pause")
        )
        add_runs(
            conn,
            paused,
            [T(10, 10), T(10, 20), T(10, 30)],
            state="skipped",
            reason="catch_up_skip",
            reason_detail=None,
        )
        add_runs(conn, paused, [T(10, 40), T(10, 50)])

    def reasons(j: Job, **kw) -> list[tuple[str, str, str | None]]:
        return [
            (t.scheduled_for.strftime("%H:%M"), t.reason_code, t.row_state)
            for t in missed(store, j, kw.get("since"), None, now=now)
        ]

    assert reasons(deadline) == [
        ("10:10", "starting_deadline", "skipped"),
        ("10:30", "starting_deadline", "skipped"),
    ]
    assert [t.reason_text for t in missed(store, deadline, None, None, now=now)] == [
        "past starting_deadline (5m)",
        LATE,
    ]
    assert reasons(forbid) == [("10:20", "concurrency", "skipped"), ("10:50", "concurrency", "skipped")]
    assert [t.reason_text for t in missed(store, forbid, None, None, now=now)] == [
        'skipped by concurrency = "forbid": a run of the job was still active',
        BUSY,  # the scheduler's own sentence, not wrapped in ours
    ]
    assert reasons(latest) == [("10:30", "catch_up_latest", "skipped")]
    assert reasons(skip) == [("10:40", "catch_up_skip", "skipped")]
    assert reasons(paused) == [(f"10:{m}0", "catch_up_skip", "skipped") for m in (1, 2, 3)]
    assert missed(store, paused, None, None, now=now)[0].reason_text == (
        'the job was paused (schedctl pause) from 10:05:00 until 10:35:00; then dropped by catch_up = "skip"'
    )
    # A leader held the lease and nothing was recorded: said plainly, with where dispatch stands.
    assert reasons(quiet) == [
        ("10:30", "unexplained", None),
        ("10:40", "unexplained", None),
        ("10:50", "unexplained", None),
    ]
    assert missed(store, quiet, None, None, now=now)[0].reason_text == (
        "a scheduler held the lease then (term 1, host-a:99) but recorded nothing for this tick; "
        "dispatch has not gone past 10:20:00"
    )
    # Before the job was defined: only in a window the user asked for.
    assert reasons(quiet, since=T(9, 40)) == [
        ("09:40", "not_defined", None),
        ("09:50", "not_defined", None),
        ("10:00", "not_defined", None),
        *reasons(quiet),
    ]
    assert missed(store, quiet, T(9, 40), None, now=now)[0].reason_text == (
        "before the job was defined: a scheduler first saw it at 10:00:00"
    )


def all_ticks_skipped(conn, j: Job) -> set[datetime]:
    q = select(job_runs.c.scheduled_for).where(job_runs.c.job_id == j.id, job_runs.c.state == "skipped")
    return set(conn.execute(q).scalars())


def test_ticks_before_the_history_mark_are_never_reported(store):
    quiet = job("quiet")
    with store.begin() as conn:
        seed_leader_all_day(conn)
        add_state(conn, quiet, T(9, 0), T(10, 50), history_start=T(10, 30))
    got = [t.scheduled_for for t in missed(store, quiet, T(9, 0), None, now=T(11, 0, 30))]
    assert got == [T(10, 30), T(10, 40), T(10, 50)]


def test_pause_and_resume_are_recorded_and_explain_the_gap(store):
    j = job("report")
    with store.begin() as conn:
        seed_leader_all_day(conn)
    first = pause(store, j, now=T(10, 2), by="ops@bastion")
    assert first.changed and first.paused_at == T(10, 2)
    assert not pause(store, j, now=T(10, 3), by="someone@else").changed  # the first pause keeps its author
    st = job_status(store, j, now=T(10, 40))
    assert st.verdict_code == Verdict.PAUSED
    assert (
        st.verdict
        == "paused since 10:02 by ops@bastion (schedctl pause); `schedctl resume report` resumes it"
    )
    # Nothing fires while paused: no "next" fire is promised; since when and by whom instead.
    assert (st.next_fire, st.paused_at, st.paused_by) == (None, T(10, 2), "ops@bastion")
    assert {t.reason_code for t in missed(store, j, None, None, now=T(10, 40))} == {"paused"}
    resume(store, j, now=T(10, 45))
    assert not resume(store, j, now=T(10, 46)).changed
    resumed = job_status(store, j, now=T(10, 47))
    assert resumed.next_fire == T(10, 50) and resumed.paused_by is None
    with store.begin() as conn:
        state = conn.execute(
            select(job_state.c.paused_at, job_state.c.schedule_key, job_state.c.defined_at)
        ).one()
    assert tuple(state) == (None, j.schedule_key, T(10, 2))
    assert events(store, "report") == [
        ("defined", "first recorded by schedctl pause"),
        ("paused", "schedctl pause"),
        ("resumed", "schedctl pause"),
    ]
    texts = [t.reason_text for t in missed(store, j, None, None, now=T(11, 0, 30))]
    assert texts[0] == "the job was paused (schedctl pause) from 10:02:00 until 10:45:00"


def test_a_job_file_pause_says_so_and_since_when_instead_of_a_next_fire(store):
    j = job("filed", paused=True)
    with store.begin() as conn:
        seed_leader_all_day(conn)
        add_state(conn, j, T(9, 0), T(9, 0), paused_by_file=True)
        # What the scheduler journals when it first sees `paused = true` in the file.
        conn.execute(insert(job_events).values(job_id=j.id, at=T(9, 31), kind="paused", detail="job file"))
    for st in (job_status(store, j, now=T(10, 40)), all_status(store, [j], now=T(10, 40))[0]):
        assert st.verdict_code == Verdict.PAUSED
        assert st.verdict == "paused in its job file (paused = true) since 09:31"
        assert (st.next_fire, st.paused_at, st.paused_by) == (None, T(9, 31), "job file")


def test_pause_records_who_ran_it_by_default(store):
    from schedctl.inspect.jobcontrol import actor

    j = job("report")
    pause(store, j, now=T(10, 2))
    assert job_status(store, j, now=T(10, 3)).paused_by == actor() and "@" in actor()


def test_status_keeps_every_note_of_a_healthy_job(store):
    """Several active runs and a tick its policy skipped: the verdict says both (the second note used to
    overwrite the first)."""
    j = job("busy", concurrency=Concurrency.ALLOW)
    with store.begin() as conn:
        seed_leader_all_day(conn)
        add_state(conn, j, T(9, 0), T(10, 40))
        add_runs(conn, j, [T(9, 10), T(9, 20)])
        add_runs(conn, j, [T(9, 30)], state="skipped", reason="catch_up_skip", reason_detail="dropped")
        add_runs(conn, j, [T(9, 40), T(9, 50), T(10, 0), T(10, 10), T(10, 20)])
        add_runs(conn, j, [T(10, 30), T(10, 40)], state="queued")
        # An alive worker (seen at the database's now, after T): the queued runs wait for it, not stranded.
        workers.register(conn, workers.Registration("w1", "worker", "h", 1, "0.1.0", "x", {}, 4, 1.0, 60.0))
    st = job_status(store, j, now=T(10, 45))
    assert st.verdict_code == Verdict.HEALTHY
    assert st.verdict == (
        "healthy: last run succeeded at 10:20, next at 10:50; 2 runs queued or running, the oldest for 10:30; "
        "1 ticks not run by the job's policy (catch_up_skip; `schedctl missed busy`)"
    )


def test_pause_set_in_the_database_holds_whatever_the_file_says(store):
    j = job("report")
    pause(store, j, now=T(10, 2))
    st = job_status(store, j, now=T(10, 30))
    assert st.verdict_code == Verdict.PAUSED and not j.paused
    file_paused = job("other", paused=True)
    with store.begin() as conn:
        seed_leader_all_day(conn)
        add_state(conn, file_paused, T(9, 0), T(9, 0))
    assert job_status(store, file_paused, now=T(10, 30)).verdict == "paused in its job file (paused = true)"
    assert {t.reason_code for t in missed(store, file_paused, None, None, now=T(10, 30))} == {"paused"}
    # paused_at alone (no event journalled) explains the gap too
    quiet = job("quiet")
    with store.begin() as conn:
        add_state(conn, quiet, T(9, 0), T(9, 0), paused_at=T(9, 45))
    got = missed(store, quiet, None, None, now=T(10, 1, 1))
    assert [(t.scheduled_for, t.reason_code) for t in got][-2:] == [
        (T(9, 50), "paused"),
        (T(10, 0), "paused"),
    ]
    assert got[-1].reason_text == "the job was paused (schedctl pause) since 09:45:00"
    assert got[0].reason_code == "unexplained"


def test_a_job_no_leader_has_seen_says_so(store):
    fresh = job("fresh")
    with store.begin() as conn:
        seed_leader_all_day(conn)
    st = job_status(store, fresh, now=T(10, 0))
    assert (st.verdict_code, st.verdict) == (
        Verdict.PENDING,
        "not picked up yet: the leader (host-a:99) has not seen this job; is it in the job files the scheduler "
        "reads? (SIGHUP reloads them)",
    )
    assert st.missed == []  # nobody knew of it: nothing is "missed" by default
    asked = missed(store, fresh, T(9, 50), None, now=T(10, 0))
    assert [(t.scheduled_for, t.reason_code) for t in asked] == [(T(9, 50), "not_defined")]
    assert asked[0].reason_text.startswith("no scheduler has seen this job yet, though term 1 (host-a:99)")


def test_failing_verdict_and_the_all_jobs_summary(store):
    bad = job("bad")
    good = job("good")
    with store.begin() as conn:
        seed_leader_all_day(conn)
        add_state(conn, bad, T(9, 0), T(10, 50))
        add_state(conn, good, T(9, 0), T(10, 50))
        add_runs(conn, bad, every_10_minutes(T(9, 10), T(10, 20)))
        add_runs(conn, bad, every_10_minutes(T(10, 30), T(10, 50)), state="failed")
        add_runs(conn, good, every_10_minutes(T(9, 10), T(10, 50)))
    st = job_status(store, bad, now=T(10, 55))
    assert st.verdict == "failing: last 3 runs failed (exit 2)"
    summary = {s.job.id: s for s in all_status(store, {"good": good, "bad": bad}, now=T(10, 55))}
    assert summary["bad"].verdict_code == Verdict.FAILING and summary["bad"].verdict_code.bad
    assert summary["good"].verdict_code == Verdict.HEALTHY and not summary["good"].verdict_code.bad
    assert summary["good"].next_fire == T(11, 0)


def test_ticks_dropped_by_the_jobs_own_policy_do_not_make_status_bad(store):
    seed_outage(store)
    cache = job("cache")  # catch_up = "skip"
    latest = job("latest", catch_up=CatchUp.LATEST)
    with store.begin() as conn:
        add_state(conn, cache, T(9, 0), T(16, 40))
        add_state(conn, latest, T(9, 0), T(16, 40))
        add_runs(conn, cache, every_10_minutes(T(9, 10), T(13, 0)))
        add_runs(conn, cache, OUTAGE_TICKS, state="skipped", term=8, reason="catch_up_skip")
        add_runs(conn, cache, [T(16, 40)], term=8)
        # no rows at all for the outage (older than the 1000 rows a leader writes): explained by the lease
        add_runs(conn, latest, [*every_10_minutes(T(9, 10), T(13, 0)), T(16, 40)])
    st = job_status(store, cache, now=T(16, 45))
    assert st.verdict_code == Verdict.HEALTHY and len(st.missed) == 21
    assert st.verdict == (
        "healthy: last run succeeded at 16:40, next at 16:50; 21 ticks not run by the job's policy "
        "(catch_up_skip; `schedctl missed cache`)"
    )
    assert job_status(store, latest, now=T(16, 45)).verdict_code == Verdict.HEALTHY
    # the same outage for catch_up = "all" is a problem until replayed
    assert job_status(store, BILLING, now=T(16, 45)).verdict_code == Verdict.MISSED


@pytest.mark.processes
def test_two_replay_processes_racing_dispatch_each_tick_once(store, db_url, tmp_path):
    """Real `schedctl replay` processes on the real clock: a minutely job, no leader for the last 2 hours."""
    import re
    import subprocess
    import sys

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[jobs.minutely]\nschedule = "* * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'
    )
    now = datetime.now(UTC)
    minutely = Job(id="minutely", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true")
    with store.begin() as conn:
        add_state(conn, minutely, now - timedelta(hours=2), now - timedelta(hours=2))
        add_term(conn, 1, "host-b:4711", now - timedelta(hours=3), now - timedelta(hours=2), current=True)
    env = child_env()
    cmd = [
        sys.executable,
        "-m",
        "schedctl",
        "replay",
        "--max",
        "1000",
        "--yes",
        "--jobs",
        str(jobs),
        "--db",
        db_url,
    ]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    replayed = [int(m.group(1)) for _, err in outs for m in [re.search(r"replayed (\d+) ticks", err)] if m]
    with store.begin() as conn:
        ticks = (
            conn.execute(select(job_runs.c.scheduled_for).where(job_runs.c.job_id == "minutely"))
            .scalars()
            .all()
        )
    assert len(ticks) == len(set(ticks)) >= 118  # ~120 minutes of ticks, each exactly once
    assert sum(replayed) == len(ticks)  # what the two processes say they queued adds up to the rows


def test_a_long_replay_goes_in_batches_with_progress(store):
    minutely = Job(
        id="minutely",
        schedule="* * * * *",
        timezone="UTC",
        catch_up=CatchUp.ALL,
        max_catch_up=5,
        command="true",
    )
    with store.begin() as conn:
        add_state(conn, minutely, T(0, 0), T(0, 0))
        add_term(conn, 1, "host-a:99", T(0, 0) - timedelta(hours=1), T(0, 0, 30), current=True)
    progress: list[tuple[int, int]] = []
    now = T(12, 1)  # 00:01 .. 11:59 were missed (12:00 is inside the grace)
    with pytest.raises(ReplayRefused, match="719 missed ticks"):
        replay(store, [minutely], 718, None, None, now=now)
    result = replay(store, [minutely], 719, None, None, now=now, progress=lambda *p: progress.append(p))
    assert result.dispatched == 719 and progress == [(500, 719), (719, 719)]
    with store.begin() as conn:
        got = conn.execute(
            select(func.count(), func.min(job_runs.c.scheduled_for), func.max(job_runs.c.scheduled_for))
        ).one()
    assert tuple(got) == (719, T(0, 1), T(11, 59))
