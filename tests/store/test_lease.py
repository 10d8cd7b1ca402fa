"""Leader election on every backend: one winner, terms, history, release, fencing, and no local clock."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import select

from schedctl.errors import NotLeader, UsageError
from schedctl.leader import lease
from schedctl.store import leases, open_store
from schedctl.store.dialect import insert_ignore, select_db_now
from schedctl.store.schema import job_runs

NAME = "cron"


def _url(store) -> str:
    return store.url.render_as_string(hide_password=False)


def _race(url: str, identities: list[str], duration: float) -> dict[str, lease.LeaseResult]:
    """Every identity, on its own engine, attempts at the same instant."""
    stores = [open_store(url) for _ in identities]
    for st in stores:  # connect first, so the race is between statements, not between connection set-ups
        lease.db_time(st)
    barrier = threading.Barrier(len(identities))
    results: dict[str, lease.LeaseResult] = {}

    def attempt(st, identity):
        barrier.wait()
        results[identity] = lease.acquire_or_renew(st, NAME, identity, duration)

    threads = [threading.Thread(target=attempt, args=pair) for pair in zip(stores, identities, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for st in stores:
        st.dispose()
    return results


def test_racing_candidates_for_a_new_lease_elect_exactly_one(store):
    results = _race(_url(store), ["a", "b", "c", "d"], 30)
    winners = [who for who, r in results.items() if r.held]
    assert len(winners) == 1 and len(results) == 4
    assert {r.term for r in results.values()} == {1}
    assert {r.holder for r in results.values()} == {winners[0]}
    assert [t.holder for t in lease.history(store, NAME)] == winners


def test_racing_candidates_for_a_lapsed_lease_elect_exactly_one_next_term(store):
    lease.acquire_or_renew(store, NAME, "old", -1)  # lapsed at once, by the database's clock
    results = _race(_url(store), ["a", "b", "c", "d"], 30)
    winners = [who for who, r in results.items() if r.held]
    assert len(winners) == 1
    assert results[winners[0]].term == 2 and results[winners[0]].new_term
    terms = lease.history(store, NAME)
    assert [(t.term, t.holder, t.end_reason) for t in terms] == [(2, winners[0], None), (1, "old", "expired")]


def test_renewal_keeps_the_term_and_moves_the_expiry(store):
    first = lease.acquire_or_renew(store, NAME, "a", 30)
    again = lease.acquire_or_renew(store, NAME, "a", 30)
    assert (first.held, first.term, first.new_term) == (True, 1, True)
    assert (again.held, again.term, again.new_term) == (True, 1, False)
    assert again.expires_at > first.expires_at
    assert abs((again.expires_at - again.db_now).total_seconds() - 30) < 1
    (term,) = lease.history(store, NAME)
    state = lease.current(store, NAME)
    assert (term.term, term.holder, term.ended_at) == (1, "a", None)
    assert term.renewed_at == state.renewed_at and term.expires_at == state.expires_at == again.expires_at
    assert state.acquired_at == term.acquired_at < state.renewed_at


def test_a_live_lease_is_not_taken_and_the_loser_learns_who_holds_it(store):
    lease.acquire_or_renew(store, NAME, "a", 30)
    other = lease.acquire_or_renew(store, NAME, "b", 30)
    assert (other.held, other.holder, other.term, other.new_term) == (False, "a", 1, False)
    assert lease.current(store, NAME).holder == "a"


def test_expiry_lets_another_win_the_next_term_and_history_records_it(store):
    held = lease.acquire_or_renew(store, NAME, "a", 2.0)  # margin: b's first attempt comes within 2 s
    assert not lease.acquire_or_renew(store, NAME, "b", 30).held
    _wait_until_lapsed(store, held.expires_at)
    taken = lease.acquire_or_renew(store, NAME, "b", 30)
    assert (taken.held, taken.term, taken.new_term) == (True, 2, True)
    assert taken.previous_tzdata == lease.tzdata_version()
    new, old = lease.history(store, NAME)
    assert (new.term, new.holder, new.ended_at, new.end_reason) == (2, "b", None, None)
    assert (old.term, old.holder, old.end_reason) == (1, "a", "expired")
    assert old.ended_at == old.expires_at == held.expires_at
    assert lease.current(store, NAME).transitions == 1
    # The old holder, back from its pause, is refused: the lease is live and someone else's.
    assert not lease.acquire_or_renew(store, NAME, "a", 30).held


def test_own_lapsed_lease_taken_again_is_a_new_term(store):
    lease.acquire_or_renew(store, NAME, "a", -1)
    again = lease.acquire_or_renew(store, NAME, "a", 30)
    assert (again.held, again.term, again.new_term) == (True, 2, True)
    assert [(t.term, t.end_reason) for t in lease.history(store, NAME)] == [(2, None), (1, "expired")]


def test_release_hands_over_at_the_next_attempt(store):
    mine = lease.acquire_or_renew(store, NAME, "a", 300)
    assert not lease.acquire_or_renew(store, NAME, "b", 300).held
    assert not lease.release(store, NAME, "a", mine.term + 1)  # not that term
    assert not lease.release(store, NAME, "b", mine.term)  # not b's
    assert lease.release(store, NAME, "a", mine.term)
    taken = lease.acquire_or_renew(store, NAME, "b", 300)
    assert (taken.held, taken.term) == (True, 2)
    new, old = lease.history(store, NAME)
    assert (old.holder, old.end_reason) == ("a", "released")
    assert old.ended_at <= new.acquired_at
    assert not lease.release(store, NAME, "a", mine.term)


def test_the_holder_taking_its_released_lease_again_starts_a_new_term(store):
    first = lease.acquire_or_renew(store, NAME, "a", 300)
    lease.release(store, NAME, "a", first.term)
    again = lease.acquire_or_renew(store, NAME, "a", 300)
    assert (again.held, again.term, again.new_term) == (True, 2, True)
    assert [(t.term, t.end_reason) for t in lease.history(store, NAME)] == [(2, None), (1, "released")]


def test_releasing_a_lapsed_lease_does_not_extend_it(store):
    lapsed = lease.acquire_or_renew(store, NAME, "a", -5)
    assert lease.release(store, NAME, "a", lapsed.term)
    (term,) = lease.history(store, NAME)
    assert lease.current(store, NAME).expires_at == lapsed.expires_at == term.ended_at
    assert term.end_reason == "released"


def test_history_is_newest_first_and_limited(store):
    for i in range(4):
        result = lease.acquire_or_renew(store, NAME, f"h{i}", 300)
        lease.release(store, NAME, f"h{i}", result.term)
    assert [t.term for t in lease.history(store, NAME, limit=3)] == [4, 3, 2]
    assert lease.history(store, "other") == [] and lease.current(store, "other") is None


def test_a_released_lease_is_free_in_the_same_clock_tick(store):
    """A release writes expires_at = now; a take-over read at that same instant must win.

    SQLite's clock moves in milliseconds, so back-to-back release/take pairs land in one tick most of the
    time; with a strict `expires_at < now` most of these 40 take-overs failed. No timing margin: every
    pair must succeed whatever the clock's resolution.
    """
    for i in range(40):
        result = lease.acquire_or_renew(store, NAME, f"h{i % 2}", 300)
        assert result.held, f"take-over {i} failed right after a release"
        assert lease.release(store, NAME, f"h{i % 2}", result.term)
    assert lease.current(store, NAME).term == 40


def _wait_until_lapsed(store, expires_at, conn=None):
    """Poll the database's clock (never this host's) until ``expires_at`` has passed."""
    for _ in range(200):
        now = select_db_now(conn) if conn is not None else lease.db_time(store)
        if now > expires_at:
            return
        time.sleep(0.05)
    raise AssertionError("the lease never lapsed by the database's clock")


def _dispatch(store, identity, term, job_id):
    """What the scheduler does: fence first, then write, in one transaction."""
    with store.begin() as conn:
        leases.fence(conn, NAME, identity, term)
        now = select_db_now(conn)
        row = dict(job_id=job_id, scheduled_for=now, state="queued", queued_at=now)
        insert_ignore(conn, job_runs, [row])


def _runs(store):
    with store.connect() as conn:
        return conn.execute(select(job_runs.c.job_id).order_by(job_runs.c.job_id)).scalars().all()


def test_fence_rejects_a_stale_term_so_the_ex_leaders_write_never_lands(store):
    old = lease.acquire_or_renew(store, NAME, "a", 30)
    _dispatch(store, "a", old.term, "written-while-leader")
    lease.acquire_or_renew(store, NAME, "a", -1)  # its last renewal: the lease lapses (a pause, a partition)
    new = lease.acquire_or_renew(store, NAME, "b", 30)
    with pytest.raises(NotLeader, match="held by b in term 2, not by a in term 1"):
        _dispatch(store, "a", old.term, "stale-write")
    _dispatch(store, "b", new.term, "written-by-new-leader")
    assert _runs(store) == ["written-by-new-leader", "written-while-leader"]


def test_fence_rejects_a_lapsed_lease_nobody_took_yet(store):
    old = lease.acquire_or_renew(store, NAME, "a", -1)
    with pytest.raises(NotLeader, match="lapsed"):
        _dispatch(store, "a", old.term, "too-late")
    with pytest.raises(NotLeader, match="has no holder"), store.begin() as conn:
        leases.fence(conn, "never-held", "a", 1)
    assert _runs(store) == []


def test_a_takeover_waits_for_the_fenced_dispatch_to_commit(store):
    """The shared lock fence() takes means no one acquires the lease in the middle of a dispatch."""
    other = open_store(_url(store))
    lease.db_time(other)  # connected before the lease starts: only the fence's BEGIN lies in between
    taken: list[lease.LeaseResult] = []
    # Margin: the fence must come within 2 s of the acquisition (one BEGIN and one SELECT); 1 s was seen
    # to run out on a loaded 2-core machine when a connection set-up still lay in between.
    mine = lease.acquire_or_renew(store, NAME, "a", 2.0)
    with store.begin() as conn:
        leases.fence(conn, NAME, "a", mine.term)
        _wait_until_lapsed(store, mine.expires_at, conn)  # while the dispatch transaction is still open
        thief = threading.Thread(target=lambda: taken.append(lease.acquire_or_renew(other, NAME, "b", 30)))
        thief.start()
        thief.join(timeout=0.5)
        assert thief.is_alive() and not taken  # blocked on the lease row until this transaction ends
    thief.join(timeout=30)
    other.dispose()
    assert taken and taken[0].held and taken[0].term == 2


@pytest.fixture
def faketime():
    path = shutil.which("faketime")
    if path is None:
        pytest.skip("libfaketime is not installed (Debian: apt-get install faketime)")
    return path


ATTEMPT = """
import datetime, sys
from schedctl.leader import lease
from schedctl.store import open_store
st = open_store(sys.argv[1])
r = lease.acquire_or_renew(st, "cron", sys.argv[2], float(sys.argv[3]))
print(datetime.datetime.now(datetime.UTC).isoformat(), r.held, r.term, r.db_now.isoformat(), r.expires_at.isoformat())
"""


def _attempt_with_skew(faketime, url, identity, duration, skew):
    env = dict(os.environ, FAKETIME_DONT_FAKE_MONOTONIC="1")
    done = subprocess.run(
        [faketime, "-f", skew, sys.executable, "-c", ATTEMPT, url, identity, str(duration)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    local, held, term, db_now, expires = done.stdout.split()
    from datetime import datetime

    return (
        datetime.fromisoformat(local),
        held == "True",
        int(term),
        datetime.fromisoformat(db_now),
        datetime.fromisoformat(expires),
    )


@pytest.mark.processes
def test_a_replica_with_a_skewed_clock_neither_steals_nor_misjudges_the_lease(store, faketime):
    """Real processes under libfaketime: one 10 minutes ahead, one 10 minutes behind this host."""
    if store.dialect == "sqlite":
        pytest.skip(
            "SQLite's clock is the host's own: one host, one clock (SQLite is documented one-host only)"
        )
    url = _url(store)
    held = lease.acquire_or_renew(store, NAME, "honest", 120)
    # Ahead: judged by its own clock, the honest lease would have lapsed eight minutes ago.
    local, won, term, db_now, _ = _attempt_with_skew(faketime, url, "ahead", 30, "+10m")
    assert (local - db_now).total_seconds() > 500  # the replica really believes it is later
    assert (won, term) == (False, held.term)
    assert lease.current(store, NAME).holder == "honest"
    # Behind: once the lease is free it wins, and its lease ends 30 s after the database's now; by its own
    # clock the expiry would lie ten minutes in the past and the lease would be up for grabs at once.
    lease.release(store, NAME, "honest", held.term)
    local, won, term, db_now, expires = _attempt_with_skew(faketime, url, "behind", 30, "-10m")
    assert (db_now - local).total_seconds() > 500
    assert (won, term) == (True, held.term + 1)
    assert abs((expires - db_now).total_seconds() - 30) < 1
    assert abs((db_now - lease.db_time(store)).total_seconds()) < 30
    assert lease.acquire_or_renew(store, NAME, "honest", 120).held is False


def test_an_identity_longer_than_the_column_is_refused_before_any_write(store):
    with pytest.raises(UsageError, match="1 to 255 characters"):
        lease.acquire_or_renew(store, NAME, "x" * 256, 15)
    assert lease.current(store, NAME) is None


def test_tzdata_version_is_the_zone_data_fire_times_are_computed_with():
    """Zones load from the tzdata package, never the host's files (which may be older, as on this host's
    Debian 2025b): the term records, and the new-leader check compares, the package's IANA release."""
    import tzdata

    assert lease.tzdata_version() == f"tzdata {tzdata.IANA_VERSION}"


def test_no_term_is_lost_when_the_lease_row_is_deleted(store):
    """A hand-deleted lease row must not restart terms at 1 (the history's primary key would collide)."""
    from schedctl.store.schema import scheduler_lease

    lease.acquire_or_renew(store, NAME, "a", -1)
    lease.acquire_or_renew(store, NAME, "b", -1)
    with store.begin() as conn:
        conn.execute(scheduler_lease.delete())
    again = lease.acquire_or_renew(store, NAME, "c", 30)
    assert (again.held, again.term, again.new_term) == (True, 3, True)
    assert [t.end_reason for t in lease.history(store, NAME)] == [None, "expired", "expired"]
