"""Every session is bounded on the server: a leader that goes silent inside a transaction (a partition with
no RST looks exactly like this to the server: a session idle in its transaction) cannot hold the lease row
past a bound, cannot commit after its term expired, and the lease history records only true hand-overs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from schedctl.errors import LeaseTooShort, StoreConflict, StoreError
from schedctl.leader import lease
from schedctl.store import Store, leases, open_store
from schedctl.store.bounds import Bounds
from schedctl.store.dialect import db_now
from schedctl.store.migrate import upgrade

NAME = "cron"
SHORT = Bounds.for_lease(6)  # the lease 6 s / renew 2 s: idle-in-transaction and lock waits of 1 s


def _server(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite has no server session to bound: one host, and its busy timeout bounds the wait")


@pytest.fixture
def short_stores(db_url: str) -> Iterator[tuple[Store, Store]]:
    _server(db_url)
    a, b = open_store(db_url, bounds=SHORT), open_store(db_url, bounds=SHORT)
    upgrade(a)
    yield a, b
    a.dispose()
    b.dispose()


def _session_settings(store: Store) -> dict[str, Any]:
    with store.connect() as conn:
        if store.dialect == "postgresql":
            names = ["lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout"]
            names += ["tcp_user_timeout", "tcp_keepalives_idle"]
            return {n: conn.exec_driver_sql(f"SHOW {n}").scalar() for n in names}
        row = conn.exec_driver_sql(
            "SELECT @@innodb_lock_wait_timeout, @@idle_transaction_timeout, @@max_statement_time"
        ).one()
        return dict(zip(["lock_wait", "idle", "statement"], row, strict=True))


def test_every_session_is_bounded_on_the_server(db_url: str) -> None:
    _server(db_url)
    store = open_store(db_url, bounds=SHORT)
    try:
        got = _session_settings(store)
    finally:
        store.dispose()
    if store.dialect == "postgresql":
        assert got == {
            "lock_timeout": "1s",
            "statement_timeout": "12s",
            "idle_in_transaction_session_timeout": "1s",
            "tcp_user_timeout": "3000",
            "tcp_keepalives_idle": "1",
        }
    else:
        assert got == {"lock_wait": 1, "idle": 1, "statement": 12.0}


def test_the_urls_own_options_win(db_url: str) -> None:
    _server(db_url)
    sep = "&" if "?" in db_url else "?"
    if db_url.startswith("postgresql"):
        # The fixture's URL already carries options (its search_path): ours must merge, not replace them.
        url = db_url.replace("options=", "options=-c%20lock_timeout%3D7000%20", 1) + f"{sep}keepalives_idle=9"
    else:
        url = db_url + f"{sep}init_command=SET%20innodb_lock_wait_timeout%3D9"
    store = open_store(url, bounds=SHORT)
    try:
        upgrade(store)  # the search_path still works
        got = _session_settings(store)
        if store.dialect == "postgresql":
            with store.connect() as conn:
                params = conn.connection.driver_connection.info.get_parameters()  # type: ignore[union-attr]
            assert params["keepalives_idle"] == "9"
            assert got["lock_timeout"] == "7s" and got["idle_in_transaction_session_timeout"] == "1s"
        else:
            assert got["lock_wait"] == 9 and got["idle"] == 1
    finally:
        store.dispose()


def test_a_silent_leader_inside_its_fence_does_not_stop_the_takeover(
    short_stores: tuple[Store, Store],
) -> None:
    a, b = short_stores
    first = lease.acquire_or_renew(a, NAME, "a", 3)
    assert first.held and first.expires_at is not None
    # The leader passes its fence and then sends nothing more: the share lock is held by a session the
    # server sees idle in its transaction, as it would see a leader cut off with no RST.
    frozen = a.engine.connect()
    frozen.begin()
    leases.fence(frozen, NAME, "a", first.term or 0)
    try:
        deadline = time.monotonic() + 20  # far past the 3 s lease: without server bounds, never taken
        taken = None
        while time.monotonic() < deadline:
            try:
                result = lease.acquire_or_renew(b, NAME, "b", 6)
            except StoreConflict:
                continue  # a lock wait bounded at 1 s: try again, as the scheduler does
            if result.held:
                taken = result
                break
            time.sleep(0.2)
        assert taken is not None, "the standby never took over behind the frozen leader's lock"
        # Within 3 s of the lapse: the server ended the frozen transaction 1 s after its last statement,
        # long before the lapse; 3 s of margin is for a loaded machine's polling.
        history = lease.history(b, NAME)
        assert history[0].holder == "b" and history[0].term == (first.term or 0) + 1
        late = (history[0].acquired_at - first.expires_at).total_seconds()
        assert 0 <= late < 3.0, late
        # The frozen leader wakes up and writes: its session is gone, nothing commits.
        with pytest.raises(DBAPIError):
            frozen.execute(select(db_now()))
            frozen.commit()
    finally:
        frozen.invalidate()
        frozen.close()


def test_a_fenced_write_is_refused_when_its_lease_ends_within_the_commit_bound(
    short_stores: tuple[Store, Store],
) -> None:
    a, _ = short_stores
    held = lease.acquire_or_renew(a, NAME, "a", SHORT.commit_margin + 0.6)
    assert held.held and held.term is not None
    with a.begin() as conn:
        leases.fence(conn, NAME, "a", held.term)
        leases.fence_commit(conn, NAME, "a", held.term, SHORT.commit_margin)  # 0.6 s to spare: commits
    time.sleep(0.8)  # now under the margin, still live: the commit could land after the expiry
    with pytest.raises(LeaseTooShort), a.begin() as conn:
        leases.fence(conn, NAME, "a", held.term)
        leases.fence_commit(conn, NAME, "a", held.term, SHORT.commit_margin)


def test_the_commit_check_is_built_once_per_term_with_or_without_the_wake_up(store: Any) -> None:
    """Every fenced transaction ends with this check, and the ones that queued runs carry the workers' wake-up
    in it: both variants come from the cache, so no statement is built per dispatch."""
    held = lease.acquire_or_renew(store, NAME, "a", 30)
    assert held.term is not None
    leases._commit_query.cache_clear()
    for _ in range(3):
        for wake_workers in (False, True):
            with store.begin() as conn:
                leases.fence(conn, NAME, "a", held.term)
                leases.fence_commit(conn, NAME, "a", held.term, 1.0, wake_workers=wake_workers)
    info = leases._commit_query.cache_info()
    assert (info.misses, info.hits) == (2, 4)


def test_a_new_term_starts_when_its_holder_held_the_row(store: Any) -> None:
    """The take-over waits behind a transaction holding the lease row; the history dates the new term from
    the moment it got the row, not from when its UPDATE began waiting."""
    assert lease.acquire_or_renew(store, NAME, "a", 30).held
    lease.acquire_or_renew(store, NAME, "a", -1)  # lapsed: free for a take-over
    released: list[Any] = []
    locked = threading.Event()

    def hold_the_row() -> None:
        with store.begin() as conn:
            conn.execute(leases.lease_query(NAME).with_for_update(read=True)).one()
            locked.set()
            time.sleep(1.0)  # inside every backend's lock bound (3 s here), so the take-over waits it out
            released.append(conn.execute(select(db_now())).scalar_one())

    blocker = threading.Thread(target=hold_the_row)
    blocker.start()
    assert locked.wait(10)
    try:
        taken = lease.acquire_or_renew(store, NAME, "b", 30)
    except StoreError:
        blocker.join()
        raise
    blocker.join()
    assert taken.held and taken.new_term
    term = lease.history(store, NAME)[0]
    assert term.holder == "b"
    assert term.acquired_at >= released[0], (term.acquired_at, released[0])
    assert (term.expires_at - term.acquired_at).total_seconds() == pytest.approx(30, abs=0.01)
