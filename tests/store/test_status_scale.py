"""`status` and `missed` over every job read the store in bulk: a fixed number of statements, not some per job,
and for each job the answer it gets alone (no job's rows leak into another's).

The store holds a mix of jobs on every backend: runs that succeeded, failed, were skipped by policy or refused;
ticks no leader dispatched (no leader 12:02..14:00); a pause; jobs never dispatched, stateless, defined late
(their own, narrower windows), redefined by a schedule change, pruned, or paused in their file.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from factories import add_state, add_term, register_worker, run_row
from sqlalchemy import event, insert, or_, select

from schedctl.inspect.jobcontrol import pause
from schedctl.inspect.missed import gather, missed, missed_counts
from schedctl.inspect.status import Verdict, all_status, assemble, job_status
from schedctl.jobs.job import CatchUp, Job
from schedctl.store.dialect import insert_ignore
from schedctl.store.schema import job_events, job_runs, job_state, lease_terms
from schedctl.store.snapshot import read_status
from schedctl.store.window import Lookup


def T(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 3, 1, hour, minute, second, tzinfo=UTC)


NOW = T(16, 45)
# In this order, the first five kinds cover every conditional read: a job with state, one without (the
# first-dispatch lookup), one whose window is empty.
KINDS = (
    "outage",
    "stateless",
    "never",
    "paused",
    "failing",
    "healthy",
    "late",
    "refused",
    "redefined",
    "file_paused",
)


def ticks(start: datetime, end: datetime, step: int = 10) -> list[datetime]:
    out, t = [], start
    while t <= end:
        out.append(t)
        t += timedelta(minutes=step)
    return out


def in_gap(t: datetime) -> bool:
    return T(12, 2, 30) < t < T(14, 0, 0)


def make_job(i: int) -> tuple[str, Job]:
    kind = KINDS[i % len(KINDS)]
    job = Job(
        id=f"j{i:03d}-{kind}",
        schedule="*/10 * * * *" if i % 3 else "*/15 * * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP if kind in ("healthy", "failing") else CatchUp.ALL,
        max_catch_up=5 if kind == "refused" else None,
        command="true",
        paused=kind == "file_paused",
    )
    return kind, job


def _run(job: Job, t: datetime, state: str, **extra) -> dict:
    """Terms 1 then 2 (from 12:00); a run takes 2 s; failed runs exit 3, timed-out ones have no status."""
    extra.setdefault("term", 1 if t < T(12, 0) else 2)
    return run_row(
        job, t, state, finished_after=timedelta(seconds=3), failed_exit=3, timed_out_exit=None, **extra
    )


def job_ticks(job: Job, start: datetime, end: datetime) -> list[datetime]:
    step = 15 if job.schedule.startswith("*/15") else 10
    first = start + timedelta(minutes=(-start.minute) % step)
    return ticks(first, end, step)


def seed(store, n: int) -> dict[str, Job]:
    jobs: dict[str, Job] = {}
    rows: list[dict] = []
    paused: list[Job] = []
    with store.begin() as conn:
        add_term(conn, 0, "host-c:3", T(6, 0), T(7, 0, 15), T(7, 0), "released", renewed=T(6, 59))
        add_term(conn, 1, "host-a:1", T(8, 0), T(12, 2, 30), T(14, 0), "expired", renewed=T(12, 2))
        add_term(conn, 2, "host-b:2", T(14, 0), T(16, 45, 10), renewed=T(16, 44, 55), current=True)
        for i in range(n):
            kind, job = make_job(i)
            jobs[job.id] = job
            every = job_ticks(job, T(9, 0), T(16, 40))
            led = [t for t in every if not in_gap(t)]
            if kind == "never":
                continue
            if kind == "stateless":
                rows += [_run(job, t, "succeeded") for t in led if t >= T(10, 0)]
                # `schedctl run` before any leader saw it: a manual run is not a tick, the window starts at 10:00.
                rows.append(_run(job, T(9, 3, 7), "succeeded", manual=True, term=None))
                continue
            if kind == "late":
                add_state(conn, job, T(15, 50), T(16, 40))
                late = [t for t in every if t > T(15, 50)]
                rows += [_run(job, t, "succeeded") for t in late[:-2]]
                rows += [_run(job, late[-2], "running"), _run(job, late[-1], "queued")]
                continue
            if kind == "redefined":
                add_state(conn, job, T(11, 0), T(16, 40), history_start=T(10, 0))
                conn.execute(
                    insert(job_events).values(job_id=job.id, at=T(11, 0), kind="schedule_changed", detail="x")
                )
                rows += [_run(job, t, "succeeded") for t in led if t > T(11, 0)]
                # Rows of the old schedule, before the job's window: never its missed ticks.
                rows += [_run(job, t, "succeeded") for t in ticks(T(9, 5), T(10, 55)) if t != T(10, 25)]
                rows.append(_run(job, T(10, 25), "skipped", reason="concurrency", reason_detail="busy"))
                continue
            if kind == "refused":
                add_state(
                    conn,
                    job,
                    T(9, 0),
                    T(14, 0),
                    refused_at=T(14, 0),
                    refused_detail="7 missed ticks exceed max_catch_up = 5; run `schedctl replay`",
                )
                rows += [_run(job, t, "succeeded") for t in led if t < T(12, 0)]
                continue
            add_state(conn, job, T(9, 0), T(16, 40))
            if kind == "paused":
                paused.append(job)
                rows += [_run(job, t, "succeeded") for t in led if t < T(15, 0)]
                continue
            if kind in ("healthy", "failing"):
                # The scheduler recorded the outage's ticks as dropped by catch_up = "skip".
                rows += [
                    _run(job, t, "skipped", reason="catch_up_skip", reason_detail="missed while down")
                    for t in every
                    if in_gap(t)
                ]
            for k, t in enumerate(led):
                state = "succeeded"
                if kind == "failing" and k >= len(led) - 3:
                    state = "timed_out" if k == len(led) - 1 else "failed"
                rows.append(_run(job, t, state))
        if rows:
            assert insert_ignore(conn, job_runs, rows) == len(rows)
    for job in paused:
        pause(store, job, T(15, 0))
    return jobs


class Counting:
    """Statements the store's engine sends, as the driver sees them."""

    def __init__(self, store) -> None:
        self.engine, self.count = store.engine, 0

    def _on(self, *args) -> None:
        self.count += 1

    def __enter__(self) -> Counting:
        event.listen(self.engine, "before_cursor_execute", self._on)
        return self

    def __exit__(self, *exc) -> None:
        event.remove(self.engine, "before_cursor_execute", self._on)


def per_job_counts(store, jobs: list[Job], since=None, until=None):
    """Each job's count, asked for alone."""
    return [
        c for job in sorted(jobs, key=lambda j: j.id) for c in missed_counts(store, [job], NOW, since, until)
    ]


def test_statements_do_not_grow_with_the_jobs(store):
    jobs = list(seed(store, 50).values())
    few, many = jobs[:5], jobs
    assert {make_job(i)[0] for i in range(5)} == set(KINDS[:5])
    counts = {}
    for label, subset in (("few", few), ("many", many)):
        with Counting(store) as status_count:
            all_status(store, subset, NOW)
        with Counting(store) as missed_count:
            missed_counts(store, subset, NOW)
        counts[label] = (status_count.count, missed_count.count)
    assert counts["many"] == counts["few"], counts
    # The per-job path read ~13 and ~6 statements per job; a constant handful now, whatever the number of jobs.
    # (+2 each since the latest leader's grace and the lasting record of missed ticks are read too, and +1
    # for status: the pause events that say since when a job file's `paused = true` holds.)
    assert counts["many"][0] <= 17 and counts["many"][1] <= 10, counts


def test_a_replay_plan_reads_in_bulk_and_lists_what_missed_lists(store):
    from schedctl.inspect.replay import plan_replay

    jobs = list(seed(store, 50).values())
    with Counting(store) as few:
        plan_replay(store, jobs[:5], None, None, NOW)
    with Counting(store) as many:
        plan = plan_replay(store, jobs, None, None, NOW)
    assert many.count == few.count, (few.count, many.count)
    listed = sorted((m.job_id, m.count) for m in per_job_counts(store, jobs) if m.count)
    assert sorted(plan.per_job().items()) == listed


def test_bulk_answers_equal_the_one_job_answers(store):
    jobs = seed(store, 50)
    register_worker(store)  # alive: the late jobs' queued runs are waiting for it, not stranded
    ordered = sorted(jobs.values(), key=lambda j: j.id)
    one_by_one = [job_status(store, j, NOW, 1) for j in ordered]
    deep_one_by_one = [job_status(store, j, NOW, 10) for j in ordered]
    window = (T(9, 30), T(15, 0))
    narrowed = {j.id: missed(store, j, *window, NOW) for j in ordered}
    with store.connect() as conn:
        deep_bulk = assemble(ordered, read_status(conn, [j.id for j in ordered], Lookup(NOW), 10))
        narrowed_bulk = gather(conn, ordered, Lookup(NOW, *window)).explain()
    bulk = all_status(store, jobs, NOW)
    assert [s.job.id for s in bulk] == [j.id for j in ordered]
    for got, want in zip(bulk, one_by_one, strict=True):
        assert got == want, got.job.id
    assert deep_bulk == deep_one_by_one
    assert narrowed_bulk == narrowed
    assert missed_counts(store, jobs, NOW) == per_job_counts(store, ordered)
    assert missed_counts(store, jobs, NOW, *window) == per_job_counts(store, ordered, *window)

    # The mix is what it claims to be: every verdict the data should produce, and missed ticks of each cause.
    verdicts = {s.job.id.split("-", 1)[1]: s.verdict_code for s in bulk}
    assert verdicts == {
        "outage": Verdict.MISSED,
        "stateless": Verdict.MISSED,
        "never": Verdict.PENDING,
        "paused": Verdict.PAUSED,
        "failing": Verdict.FAILING,
        "healthy": Verdict.HEALTHY,
        "late": Verdict.HEALTHY,
        "refused": Verdict.REFUSED,
        "redefined": Verdict.MISSED,
        "file_paused": Verdict.PAUSED,
    }
    reasons = {m.reason_code for s in bulk for m in s.missed}
    reasons |= {m.reason_code for found in narrowed_bulk.values() for m in found}
    assert reasons == {
        "no_leader",
        "paused",
        "catch_up_skip",
        "catch_up_refused",
        "concurrency",
        "not_defined",
        "unexplained",
    }
    texts = {m.reason_text for found in narrowed_bulk.values() for m in found}
    assert any(t.startswith("before its schedule changed at 11:00") for t in texts)
    assert any(t.startswith("no scheduler has seen this job yet") for t in texts)
    late = next(s for s in bulk if s.job.id.endswith("-late"))
    assert "2 runs queued or running, the oldest for 16:15" in late.verdict


def test_bulk_answers_hold_across_id_chunks(store, monkeypatch: pytest.MonkeyPatch):
    """Seven ids a chunk: 50 jobs take eight chunks, and no job's rows, events or state leak into another's."""
    import schedctl.store.dialect as dialect

    jobs = seed(store, 50)
    ordered = sorted(jobs.values(), key=lambda j: j.id)
    one_by_one = [job_status(store, j, NOW, 1) for j in ordered]
    with Counting(store) as unchunked:
        all_status(store, jobs, NOW)
    monkeypatch.setattr(dialect, "IN_CHUNK", 7)
    monkeypatch.setattr(dialect, "ARRAY_CHUNK", 7)
    with Counting(store) as chunked:
        bulk = all_status(store, jobs, NOW)
    assert bulk == one_by_one
    assert chunked.count > unchunked.count  # the chunks were really used
    assert missed_counts(store, jobs, NOW) == per_job_counts(store, ordered)


def test_a_job_listed_twice_is_answered_twice(store):
    jobs = list(seed(store, 10).values())
    twice = [jobs[0], *jobs]
    summary = all_status(store, twice, NOW)
    assert [s.job.id for s in summary] == sorted(j.id for j in twice)
    assert summary[0] == summary[1]
    assert dataclasses.asdict(missed_counts(store, twice, NOW)[0]) == dataclasses.asdict(
        missed_counts(store, twice, NOW)[1]
    )


def terms_between(conn, name: str, since: datetime, until: datetime):
    """The definition ``TermsCover.between`` answers by: terms whose holding overlaps ``[since, until]``, plus
    the last one acquired before ``since`` and the first acquired after ``until``, ordered by term."""
    from schedctl.store.leases import term_record

    t = lease_terms.c
    overlapping = select(lease_terms).where(
        t.name == name,
        t.acquired_at <= until,
        t.expires_at >= since,
        or_(t.ended_at.is_(None), t.ended_at >= since),
    )
    before = select(lease_terms).where(t.name == name, t.acquired_at < since).order_by(t.term.desc()).limit(1)
    after = select(lease_terms).where(t.name == name, t.acquired_at > until).order_by(t.acquired_at).limit(1)
    found = {r.term: r for r in map(term_record, conn.execute(overlapping))}
    for query in (before, after):
        for r in map(term_record, conn.execute(query)):
            found.setdefault(r.term, r)
    return [found[k] for k in sorted(found)]


def test_one_read_of_the_terms_answers_every_window_inside_it(store):
    """``TermsCover.between`` is ``terms_between`` (above) for any window inside the cover, even over terms that break
    the usual order: two holders at once, a number out of acquisition order, a term ended before it expired."""
    from schedctl.store import history as h

    terms = [
        (0, T(6, 0), T(7, 0, 15), T(7, 0)),
        (4, T(7, 30), T(7, 40), None),  # acquired before term 1, numbered after it
        (1, T(8, 0), T(12, 2, 30), T(14, 0)),
        (5, T(10, 0), T(10, 30), T(10, 5)),  # held while term 1 was
        (2, T(14, 0), T(15, 30), T(15, 10)),
        (3, T(16, 0), T(16, 45, 10), None),
        (6, T(9, 0), T(9, 30), T(8, 50)),  # "ended" before it was acquired (clocks of different hosts)
    ]
    with store.begin() as conn:
        for term, acquired, expires, ended in terms:
            add_term(
                conn, term, f"host-{term}:1", acquired, expires, ended, None if ended is None else "released"
            )
    # Every instant a term starts or stops and a hair either side of it (the comparisons are < and <=).
    marks = {t for _, *instants in terms for t in instants if t is not None}
    hair = timedelta(microseconds=1)
    points = sorted({T(5, 0), T(18, 0), *marks, *(m - hair for m in marks), *(m + hair for m in marks)})
    pairs = [(a, u) for i, a in enumerate(points) for u in points[i:]]
    with store.connect() as conn:
        # Covers from every point to the end and from the start to every point: most windows sit strictly inside.
        covers = [h.TermsCover(conn, "cron", p, points[-1]) for p in points]
        covers += [h.TermsCover(conn, "cron", points[0], p) for p in points]
        seen, checked = set(), 0
        for a, u in pairs:
            want = terms_between(conn, "cron", a, u)
            for cover in covers:
                if cover.since <= a and u <= cover.until:
                    assert cover.between(a, u) == want, (cover.since, cover.until, a, u)
                    checked += 1
            seen.add(tuple(t.term for t in want))
        with pytest.raises(ValueError):
            covers[0].between(points[0] - hair, points[-1])
    assert checked > 10 * len(pairs)
    assert len(seen) > 10  # the windows really did ask for different sets of terms


def test_each_bulk_read_answers_what_each_job_holds(store):
    """Each bulk read against the job's own rows, read plainly and filtered here."""
    from schedctl.store import history as h

    jobs = seed(store, 20)
    ids = sorted(jobs)
    with store.connect() as conn:
        plain = select(*h.RUN_COLUMNS).order_by(job_runs.c.scheduled_for)
        every = {i: [h.run_record(r) for r in conn.execute(plain.where(job_runs.c.job_id == i))] for i in ids}
        stated = set(conn.execute(select(job_state.c.job_id)).scalars())
        all_events = [
            (r.job_id, r.at, r.kind, r.detail)
            for r in conn.execute(select(job_events).order_by(job_events.c.at, job_events.c.id))
        ]
        states = h.job_states_of(conn, ids)
        assert set(states) == stated & set(ids)
        assert all(s.job_id == i for i, s in states.items())
        assert len(states) < len(ids)
        assert h.job_state_of(conn, ids[0]) == states.get(ids[0])
        firsts = h.earliest_runs_at(conn, ids)
        dispatched = {i: [r.scheduled_for for r in rs if not r.manual] for i, rs in every.items()}
        assert firsts == {i: min(ticks) for i, ticks in dispatched.items() if ticks}
        between = h.runs_between_by_job(conn, ids, T(9, 30), T(15, 0))
        assert between == {
            i: [r for r in rs if T(9, 30) < r.scheduled_for < T(15, 0)] for i, rs in every.items()
        }
        some = (("failed", "timed_out"), ("succeeded", "skipped", "running"))
        # At NOW a late job's newest row is queued: a pick by state must look past rows outside its states.
        for before, limit in [(at, n) for at in (T(16, 0), NOW) for n in (1, 3, 22)]:
            newest = {i: [r for r in reversed(rs) if r.scheduled_for <= before] for i, rs in every.items()}
            [latest] = h.latest_runs_by_job(conn, ids, before, [(limit, None)])
            assert latest == {i: rs[:limit] for i, rs in newest.items()}, (before, limit)
            for states_ in some:
                [latest] = h.latest_runs_by_job(conn, ids, before, [(limit, states_)])
                assert latest == {
                    i: [r for r in rs if r.state in states_][:limit] for i, rs in newest.items()
                }
        # Several picks from one read: each as if read alone.
        picks = [(4, some[0]), (2, None), (1, some[1]), (9, some[0])]
        together = h.latest_runs_by_job(conn, ids, NOW, picks)
        assert together == [h.latest_runs_by_job(conn, ids, NOW, [p])[0] for p in picks]
        assert all(any(part.values()) for part in together)
        active = h.active_runs_by_job(conn, ids)
        for i, rs in every.items():
            going = [r.scheduled_for for r in rs if r.state in ("queued", "running")]
            assert active.get(i, (0, None)) == (len(going), min(going, default=None)), i
        assert active  # the late jobs have a queued and a running run
        kinds = ("paused", "resumed", "schedule_changed")
        events = h.events_by_job(conn, ids, kinds, until=NOW)
        assert {i: [(e.job_id, e.at, e.kind, e.detail) for e in evs] for i, evs in events.items()} == {
            i: [e for e in all_events if e[0] == i and e[2] in kinds and e[1] <= NOW] for i in ids
        }
        assert any(events.values())
