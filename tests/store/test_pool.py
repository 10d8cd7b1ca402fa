"""Pooled connections: one the server dropped while it sat idle is replaced before anyone uses it."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from schedctl.errors import StoreError
from schedctl.store import engine as store_mod
from schedctl.store import open_store


def _backend_id(conn) -> int:
    query = "SELECT pg_backend_pid()" if conn.dialect.name == "postgresql" else "SELECT CONNECTION_ID()"
    return int(conn.execute(text(query)).scalar_one())


def _drop_from_the_server(db_url: str, backend_id: int) -> None:
    admin = open_store(db_url)
    try:
        with admin.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend_id})
            else:
                conn.execute(text(f"KILL {backend_id}"))
    finally:
        admin.dispose()
    time.sleep(0.2)


@pytest.fixture
def server_url(db_url):
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite has no server to drop a connection")
    return db_url


def test_an_idle_connection_the_server_dropped_is_replaced_unseen(server_url, monkeypatch):
    monkeypatch.setattr(store_mod, "IDLE_PING_AFTER", 0.0)
    st = open_store(server_url)
    try:
        with st.connect() as conn:
            first = _backend_id(conn)
        _drop_from_the_server(server_url, first)
        with st.connect() as conn:
            assert _backend_id(conn) != first
    finally:
        st.dispose()


def test_a_connection_in_steady_use_is_not_pinged_so_its_death_shows_once(server_url, monkeypatch):
    """The other side of the trade: no ping per transaction, so a connection that died between two
    transactions a moment apart fails the next one; the pool has replaced it by the one after."""
    monkeypatch.setattr(store_mod, "IDLE_PING_AFTER", 3600.0)
    st = open_store(server_url)
    try:
        with st.connect() as conn:
            first = _backend_id(conn)
        _drop_from_the_server(server_url, first)
        with pytest.raises(StoreError), st.connect() as conn:
            _backend_id(conn)
        with st.connect() as conn:
            assert _backend_id(conn) != first
    finally:
        st.dispose()
