"""The dialect helpers behave the same on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from schedctl.store.dialect import db_now, insert_ignore, now_plus
from schedctl.store.schema import job_runs


def test_db_now_is_aware_utc_and_close_to_this_host(store):
    with store.begin() as conn:
        now, later, earlier = conn.execute(select(db_now(), now_plus(15), now_plus(-1.5))).one()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert abs((now - datetime.now(UTC)).total_seconds()) < 5
    assert abs((later - now).total_seconds() - 15) < 0.01
    assert abs((now - earlier).total_seconds() - 1.5) < 0.01


def test_insert_ignore_counts_only_new_rows_and_keeps_the_first(store):
    t = datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=UTC)
    rows = [dict(job_id=j, scheduled_for=t, state="queued", queued_at=t) for j in ("a", "b")]
    with store.begin() as conn:
        assert insert_ignore(conn, job_runs, rows) == 2
        again = rows + [dict(job_id="c", scheduled_for=t, state="skipped", queued_at=t)]
        again[0] = dict(again[0], state="skipped")
        assert insert_ignore(conn, job_runs, again) == 1
        got = conn.execute(select(job_runs.c.job_id, job_runs.c.state, job_runs.c.scheduled_for)).all()
    assert sorted(got) == [("a", "queued", t), ("b", "queued", t), ("c", "skipped", t)]
