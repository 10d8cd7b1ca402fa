"""The worker's SQL on every backend: claims, fencing by attempt, forbid ordering, labels, pruning."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import factories
from sqlalchemy import select, update

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import claims, pruning
from schedctl.store.dialect import now_plus
from schedctl.store.schema import job_events, job_runs, job_state

T0 = datetime(2026, 3, 1, 2, 0, 0, 250000, tzinfo=UTC)
ANY = [""]


def job(job_id: str = "j", **kw: object) -> Job:
    kw.setdefault("concurrency", Concurrency.ALLOW)
    return Job(id=job_id, schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true", **kw)


def ticks(n: int, start: datetime = T0) -> list[datetime]:
    return [start + timedelta(minutes=i) for i in range(n)]


def rows(store, job_id=None):
    with store.begin() as conn:
        q = select(job_runs).order_by(job_runs.c.job_id, job_runs.c.scheduled_for)
        if job_id:
            q = q.where(job_runs.c.job_id == job_id)
        return conn.execute(q).mappings().all()


def claim(store, identity="w1", limit=10, labels=ANY, stale_after=60.0):
    with store.begin() as conn:
        return claims.claim(conn, identity, limit, labels, stale_after)


def test_claim_takes_a_batch_in_scheduled_order_and_marks_it_running(store):
    with store.begin() as conn:
        assert claims.queue_runs(conn, job(), ticks(5)) == 5
    first = claim(store, limit=3)
    assert [c.scheduled_for for c in first] == ticks(3)
    assert all(c.attempt == 1 and c.took_over_from is None and c.snapshot["command"] == "true" for c in first)
    assert [c.scheduled_for for c in claim(store, limit=3)] == ticks(5)[3:]
    assert claim(store) == []
    got = rows(store)
    assert {r["state"] for r in got} == {"running"}
    assert {r["worker"] for r in got} == {"w1"}
    assert all(r["heartbeat_at"] is not None and r["started_at"] is not None for r in got)


def test_concurrent_claimers_never_take_the_same_run(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job(), ticks(40))
    taken: list[tuple[str, datetime]] = []
    lock = threading.Lock()

    def claimer(name: str) -> None:
        while True:
            got = claim(store, identity=name, limit=3)
            if not got:
                return
            with lock:
                taken.extend(c.key for c in got)

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == [("j", t) for t in ticks(40)]
    assert all(r["attempt"] == 1 for r in rows(store))


def test_a_run_waits_for_its_not_before(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job(), ticks(2))
        conn.execute(update(job_runs).where(job_runs.c.scheduled_for == T0).values(not_before=now_plus(30)))
    assert [c.scheduled_for for c in claim(store)] == [ticks(2)[1]]


def test_forbid_runs_one_at_a_time_in_scheduled_order(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job("f", concurrency=Concurrency.FORBID), ticks(3))
        claims.queue_runs(conn, job("a"), ticks(1))
    first = claim(store)
    assert sorted((c.job_id, c.scheduled_for) for c in first) == [("a", T0), ("f", T0)]
    assert claim(store) == []  # f is running: its later runs wait
    done = next(c for c in first if c.job_id == "f")
    with store.begin() as conn:
        assert claims.record(conn, claims.Outcome("f", T0, done.attempt, "succeeded", exit_status=0))
    assert [c.scheduled_for for c in claim(store)] == [ticks(3)[1]]
    assert [r["exclusive"] for r in rows(store, "f")] == [None, 1, None]


def test_forbid_skips_a_run_the_exclusive_index_refuses(store):
    """The backstop for a lost race: the database refuses a second executing run, and the claimer moves on."""
    with store.begin() as conn:
        claims.queue_runs(conn, job("f", concurrency=Concurrency.FORBID), ticks(1))
        claims.queue_runs(conn, job("a"), ticks(1, T0 + timedelta(hours=1)))
        # A finished row that still holds the exclusive slot, as a concurrent claimer would.
        factories.add_runs(
            conn, job("f", concurrency=Concurrency.FORBID), [T0 - timedelta(days=1)], exclusive=1
        )
    assert [c.job_id for c in claim(store)] == ["a"]
    assert [r["state"] for r in rows(store, "f")] == ["succeeded", "queued"]
    assert [r["state"] for r in rows(store, "a")] == ["running"]


def test_a_refused_forbid_claim_leaves_the_rest_of_the_claim_standing(store):
    """Without a savepoint (SQLite, MySQL), the refused UPDATE is undone alone: the forbid run after it in the
    same claim, and the claim's plain runs, are still claimed and committed."""
    forbid = Concurrency.FORBID
    with store.begin() as conn:
        claims.queue_runs(conn, job("a"), ticks(1))
        claims.queue_runs(conn, job("f", concurrency=forbid), ticks(1))
        claims.queue_runs(conn, job("g", concurrency=forbid), ticks(1))
        factories.add_runs(conn, job("f", concurrency=forbid), [T0 - timedelta(days=1)], exclusive=1)
    assert sorted(c.job_id for c in claim(store)) == ["a", "g"]
    assert [r["state"] for r in rows(store, "f")] == ["succeeded", "queued"]
    assert [(r["state"], r["exclusive"]) for r in rows(store, "g")] == [("running", 1)]
    assert [(r["state"], r["exclusive"]) for r in rows(store, "a")] == [("running", None)]


def test_labels_limit_claims_to_subsets_of_the_workers_labels(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job("plain"), ticks(1))
        claims.queue_runs(conn, job("on_a", labels={"host": "a"}), ticks(1))
        claims.queue_runs(conn, job("on_b", labels={"host": "b"}), ticks(1))
        claims.queue_runs(conn, job("on_a_x", labels={"host": "a", "zone": "x"}), ticks(1))
    keys = claims.label_keys({"host": "a"})
    assert sorted(keys) == ["", "host=a"]
    assert sorted(c.job_id for c in claim(store, labels=keys)) == ["on_a", "plain"]
    both = claims.label_keys({"zone": "x", "host": "a"})
    assert sorted(both) == ["", "host=a", "host=a,zone=x", "zone=x"]
    assert [c.job_id for c in claim(store, labels=both)] == ["on_a_x"]


def test_stale_run_is_taken_over_and_the_old_attempt_is_fenced_off(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job(), ticks(1))
    (mine,) = claim(store, identity="w1")
    assert claim(store, identity="w2", stale_after=5) == []  # fresh heartbeat: not stale
    with store.begin() as conn:
        conn.execute(update(job_runs).values(heartbeat_at=now_plus(-10), checkpoint={"done": 7}))
    (theirs,) = claim(store, identity="w2", stale_after=5)
    assert (theirs.attempt, theirs.took_over_from, theirs.checkpoint) == (2, "w1", {"done": 7})
    with store.begin() as conn:
        beat = claims.heartbeat(conn, "w1", [("j", T0, mine.attempt)])
        assert beat.lost == [("j", T0)]
        assert not claims.save_checkpoint(conn, "j", T0, mine.attempt, {"done": 1})
        assert not claims.record(conn, claims.Outcome("j", T0, mine.attempt, "failed", exit_status=1))
        assert claims.heartbeat(conn, "w2", [("j", T0, theirs.attempt)]).lost == []
    (row,) = rows(store)
    assert (row["state"], row["worker"], row["attempt"], row["checkpoint"]) == (
        "running",
        "w2",
        2,
        {"done": 7},
    )


def test_stale_runs_come_first_and_only_when_asked_for(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job("old"), ticks(1))
    claim(store, identity="w1")
    with store.begin() as conn:
        claims.queue_runs(conn, job("new"), ticks(3, T0 - timedelta(hours=1)))  # queued, and due earlier
        conn.execute(update(job_runs).where(job_runs.c.job_id == "old").values(heartbeat_at=now_plus(-10)))
    with store.begin() as conn:  # a NOTIFY-driven claim: queued runs only
        got = claims.claim(conn, "w2", 2, ANY, 5, take_stale=False)
    assert [(c.job_id, c.took_over_from) for c in got] == [("new", None), ("new", None)]
    (stale, queued) = claim(store, identity="w2", limit=2, stale_after=5)
    assert (stale.job_id, stale.took_over_from, queued.job_id) == ("old", "w1", "new")


def test_a_claim_walks_the_queue_index_not_the_whole_table(store):
    """With runs queued far beyond the limit, the claim reads only what it takes (no sort of the queue)."""
    from sqlalchemy import text

    with store.begin() as conn:
        claims.queue_runs(conn, job("many"), ticks(3000))
        if conn.dialect.name == "postgresql":
            conn.execute(text("ANALYZE job_runs"))
    stale_query, queued_query = claims._candidate_queries(tuple(ANY))
    with store.begin() as conn:
        for query in (stale_query.params(limit=5, stale=-5.0), queued_query.params(limit=5)):
            sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            explain = {"postgresql": "EXPLAIN ", "sqlite": "EXPLAIN QUERY PLAN "}.get(
                conn.dialect.name, "EXPLAIN "
            )
            plan = " ".join(str(r) for r in conn.exec_driver_sql(explain + sql).all())
            if conn.dialect.name == "postgresql":
                assert "Index Scan using ix_job_runs_" in plan and "Sort" not in plan, plan
            elif conn.dialect.name == "sqlite":
                assert "USING INDEX ix_job_runs_" in plan and "TEMP B-TREE" not in plan, plan
            else:
                assert "ix_job_runs_" in plan and "filesort" not in plan, plan
    assert [c.scheduled_for for c in claim(store, limit=5)] == ticks(5)


def test_heartbeat_reports_cancel_requests_and_beats_all_runs_at_once(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job(), ticks(3))
    got = claim(store)
    with store.begin() as conn:
        conn.execute(update(job_runs).values(heartbeat_at=now_plus(-30)))
        conn.execute(update(job_runs).where(job_runs.c.scheduled_for == T0).values(cancel_requested=True))
        beat = claims.heartbeat(conn, "w1", [(c.job_id, c.scheduled_for, c.attempt) for c in got])
    assert beat.lost == [] and beat.cancel == [("j", T0)]
    assert claim(store, identity="w2", stale_after=10) == []  # every heartbeat moved


def test_retry_and_hand_back_requeue_without_the_worker(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job("r", concurrency=Concurrency.FORBID), ticks(1))
        claims.queue_runs(conn, job("h", concurrency=Concurrency.FORBID), ticks(1))
    got = {c.job_id: c for c in claim(store)}
    with store.begin() as conn:
        retry = claims.Outcome("r", T0, got["r"].attempt, "queued", exit_status=2, retry_after=30, error="x")
        assert claims.record(conn, retry)
        back = claims.Outcome(
            "h", T0, got["h"].attempt, "queued", exit_status=143, checkpoint={"i": 3}, save_checkpoint=True
        )
        assert claims.record(conn, back)
    r, h = rows(store, "r")[0], rows(store, "h")[0]
    assert (r["state"], r["failures"], r["worker"], r["exclusive"], r["exit_status"]) == (
        "queued",
        1,
        None,
        None,
        2,
    )
    assert r["not_before"] > datetime.now(UTC) + timedelta(seconds=20)
    assert (h["state"], h["failures"], h["worker"], h["heartbeat_at"], h["checkpoint"]) == (
        "queued",
        0,
        None,
        None,
        {"i": 3},
    )
    assert [c.job_id for c in claim(store)] == ["h"]  # the retry waits for its backoff
    assert rows(store, "h")[0]["attempt"] == 2


def test_prune_keeps_the_limits_and_moves_history_start_past_every_pruned_tick(store):
    instants = ticks(20)
    states = ["succeeded"] * 6 + ["failed"] * 4 + ["timed_out"] * 2 + ["skipped"] * 3 + ["succeeded"] * 4
    states += ["queued"]
    with store.begin() as conn:
        conn.execute(
            job_runs.insert(),
            [
                dict(job_id="p", scheduled_for=t, state=s, queued_at=t, labels_key="", concurrency="allow")
                for t, s in zip(instants, states, strict=True)
            ],
        )
        conn.execute(job_state.insert().values(job_id="p", schedule_key="k", defined_at=T0, updated_at=T0))
        pruned = pruning.prune(conn, ["p", "absent"], keep_succeeded=3, keep_failed=2)
        history_start = conn.execute(select(job_state.c.history_start)).scalar_one()
        events = conn.execute(select(job_events.c.kind)).scalars().all()
    left = [(r["scheduled_for"], r["state"]) for r in rows(store, "p")]
    # Kept: failures at 10, 11 (timed_out), successes at 16, 17, 18, the queued one at 19. The newest pruned
    # tick is the success at 15, so the skipped rows before it go and history starts just after it.
    assert left == [(instants[i], states[i]) for i in (10, 11, 16, 17, 18, 19)]
    assert pruned == {"p": 14}
    assert history_start == instants[15] + timedelta(microseconds=1)
    assert events == ["pruned"]
    with store.begin() as conn:
        assert pruning.prune(conn, ["p"], keep_succeeded=3, keep_failed=2) == {}


def test_prune_of_many_jobs_prunes_exactly_those_over_a_limit(store):
    """Pruning asks which jobs are over a limit in one grouped query per chunk of ids: the ones just over
    each limit, past the first chunk too, are pruned; those at a limit or with only skipped rows are not."""
    instants = ticks(5)
    shapes = {
        "over-succeeded": ["succeeded"] * 4,
        "over-failed": ["failed", "timed_out", "failed"],
        "at-limits": ["succeeded"] * 3 + ["failed"] * 2,
        "only-skipped": ["skipped"] * 5,
    }
    filler = [f"f{i:04d}" for i in range(1200)]  # one success each: more ids than one MySQL IN chunk
    runs = [(j, states) for j, states in shapes.items()] + [(j, ["succeeded"]) for j in filler]
    with store.begin() as conn:
        conn.execute(
            job_runs.insert(),
            [
                dict(job_id=j, scheduled_for=t, state=s, queued_at=t, labels_key="", concurrency="allow")
                for j, states in runs
                for t, s in zip(instants, states, strict=False)
            ],
        )
        pruned = pruning.prune(conn, [*filler, *shapes], keep_succeeded=3, keep_failed=2)
    assert pruned == {"over-succeeded": 1, "over-failed": 1}
    assert [r["state"] for r in rows(store, "at-limits")] == shapes["at-limits"]
    assert len(rows(store, "only-skipped")) == 5
    assert len(rows(store, "f1199")) == 1


def test_a_batch_of_outcomes_writes_only_the_runs_still_held(store):
    with store.begin() as conn:
        claims.queue_runs(conn, job(), ticks(3))
    mine = claim(store, identity="w1")
    with store.begin() as conn:
        conn.execute(
            update(job_runs).where(job_runs.c.scheduled_for == ticks(3)[1]).values(heartbeat_at=now_plus(-9))
        )
    (theirs,) = claim(store, identity="w2", stale_after=5)
    outcomes = [
        claims.Outcome(c.job_id, c.scheduled_for, c.attempt, "succeeded", exit_status=0) for c in mine
    ]
    outcomes[2] = claims.Outcome("j", ticks(3)[2], mine[2].attempt, "queued", retry_after=5, exit_status=1)
    with store.begin() as conn:
        assert claims.record_many(conn, outcomes) == [True, False, True]
    got = [(r["state"], r["worker"], r["attempt"]) for r in rows(store)]
    assert got == [("succeeded", "w1", 1), ("running", "w2", 2), ("queued", None, 1)]
    assert theirs.scheduled_for == ticks(3)[1]
